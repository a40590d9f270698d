import pytest

from recrunner.config.params import (
    available_metrics,
    check_overrides,
    check_valid_metric,
    coerce_value,
    load_yaml,
    parse_set_options,
)
from recrunner.core.errors import ConfigError
from recrunner.config.run_id import make_run_id


def test_set_values_are_parsed_as_yaml():
    assert parse_set_options(["epochs=5", "topk=[10,20]", "learning_rate=1e-3", "x=abc"]) == {
        "epochs": 5, "topk": [10, 20], "learning_rate": 0.001, "x": "abc"}


def test_malformed_yaml_reports_file_and_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nb: [2\nc: 3\n")
    with pytest.raises(ConfigError, match=rf"malformed YAML in {path}:\d"):
        load_yaml(path)


def test_yaml_that_is_not_a_mapping_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(path)


def test_unknown_key_suggests_the_close_ones():
    with pytest.raises(ConfigError, match="unknown config key 'learnig_rate'; did you mean learning_rate"):
        check_overrides({"learnig_rate": 0.1}, {"learning_rate": 0.001, "epochs": 300})


@pytest.mark.parametrize("value, default, expected", [
    ("1e-3", 0.001, 0.001), (2, 0.5, 2), (3.0, 300, 3), (True, False, True), (None, 300, None), ([1], None, [1]),
])
def test_values_are_coerced_to_the_default_type(value, default, expected):
    assert coerce_value("k", value, default) == expected


@pytest.mark.parametrize("value, default", [("many", 300), (True, 300), (2.5, 300), ("yes", False), (3, {"a": 1})])
def test_values_of_the_wrong_type_are_refused(value, default):
    with pytest.raises(ConfigError, match="k expects"):
        coerce_value("k", value, default)


def test_available_metrics_expand_topk_only_for_ranking_metrics():
    assert available_metrics(["Recall", "NDCG", "AUC"], [5, 10]) == ["recall@5", "recall@10", "ndcg@5", "ndcg@10", "auc"]


def test_unsupported_valid_metric_lists_the_available_ones():
    config = {"metrics": ["Recall", "MRR"], "topk": [10], "valid_metric": "NDCG@10"}
    with pytest.raises(ConfigError, match="available: recall@10, mrr@10"):
        check_valid_metric(config)
    check_valid_metric({**config, "valid_metric": "MRR@10"})


def test_run_id_is_readable_sorted_and_stable():
    assert make_run_id({"seed": 2020, "learning_rate": 0.001}) == "learning_rate=0.001,seed=2020"
    assert make_run_id({"learning_rate": 0.001, "seed": 2020}) == make_run_id({"seed": 2020, "learning_rate": 0.001})
    assert make_run_id({"eval_args": {"mode": "full"}}) == "eval_args.mode=full"


def test_run_ids_differ_when_only_unsafe_characters_differ():
    closed, half_open = make_run_id({"i": "[10,60]"}), make_run_id({"i": "[10,60)"})
    assert closed != half_open and "/" not in closed and "[" not in closed


def test_long_run_ids_are_shortened_with_a_hash():
    params = {f"parameter_{i}": i for i in range(20)}
    run_id = make_run_id(params)
    assert len(run_id) <= 96 and run_id.startswith("parameter_0=0,")
    assert run_id != make_run_id({**params, "parameter_19": 0})


def test_a_shortened_run_id_never_cuts_a_key_or_value_in_half():
    params = {"MAX_ITEM_LIST_LENGTH": 10, "epochs": 2, "hidden_size": 16, "inner_size": 32, "n_heads": 1,
              "n_layers": 1, "seed": 2020, "train_batch_size": 2048, "user_inter_num_interval": "[10,60]"}
    run_id = make_run_id(params)
    readable, _, digest = run_id.rpartition("-")
    assert len(run_id) <= 96 and len(digest) == 10
    assert all(pair in {f"{k}={v}" for k, v in params.items()} for pair in readable.split(","))
    assert make_run_id({"x" * 200: 1}).isalnum()  # not even one pair fits: the hash alone


def test_an_interval_given_as_a_yaml_list_is_recboles_interval_string():
    from recrunner.config.params import coerce_value

    assert coerce_value("user_inter_num_interval", [10, 60], None) == "[10,60]"
    assert coerce_value("user_inter_num_interval", "[10,inf)", None) == "[10,inf)"


def test_keys_a_model_reads_without_a_default_in_recboles_yaml_are_known_for_that_model_only():
    """FEARec's contrastive losses are off unless `contrast` is set, and no RecBole YAML defines it."""
    from recrunner.config.recbole_files import recbole_keys
    from recrunner.config.params import undeclared_keys

    assert undeclared_keys("FEARec", context_aware=False) == {"contrast": None, "tau": None, "sim": None}
    assert undeclared_keys("DeepFM", context_aware=True) == {"double_tower": None}
    assert undeclared_keys("SASRec", context_aware=False) == {}
    assert {"contrast", "tau", "sim", "has_residual", "double_tower"} <= recbole_keys()  # a grid file may name them


def test_fearecs_contrastive_losses_can_be_switched_on(workspace):
    from recrunner import Experiment, prepare

    config = prepare(Experiment("FEARec", "ml-100k", {"contrast": "us_x", "tau": 1, "sim": "dot"}), workspace).config

    assert (config["contrast"], config["tau"], config["sim"]) == ("us_x", 1, "dot")
    with pytest.raises(ConfigError, match="unknown config key 'contrast'"):
        prepare(Experiment("SASRec", "ml-100k", {"contrast": "us_x"}), workspace)
    with pytest.raises(ConfigError, match="unknown config key 'use_filter'"):  # RecBole's use fails: no weight
        prepare(Experiment("FEARec", "ml-100k", {"use_filter": True}), workspace)
