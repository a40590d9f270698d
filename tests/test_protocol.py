"""The protocol card, the leakage audit and the sampled-metrics warning (recrunner.run.protocol)."""

import json

import numpy as np
import pytest

from recrunner import Experiment, prepare, run_experiment
from recrunner.run import protocol
from recrunner.run.record import RunRecord
from tests.conftest import TINY_BPR, run_cli

GLOBAL = {"eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "TO", "group_by": None, "mode": "full"}}
PER_USER = {"eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "TO", "group_by": "user", "mode": "full"}}


def test_the_card_counts_what_recbole_split_produced(workspace):
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    experiment = Experiment("BPR", "ml-100k", TINY_BPR)
    result = run_experiment(experiment, workspace, console=False)
    card = RunRecord.read(result.run_dir).protocol
    assert card["split"] == "ratio [0.8, 0.1, 0.1]" and card["order"] == "random" and card["grouping"] == "per user"
    assert card["ranking"] == {"valid": "full", "test": "full"}
    assert card["filters"] == {"user_inter_num_interval": [10, 60]}

    config = prepare(experiment, workspace).config  # RecBole's own split, built without recrunner's cache
    init_seed(config["seed"], config["reproducibility"])
    splits = data_preparation(config, create_dataset(config))
    for name, loader in zip(("train", "valid", "test"), splits):
        inter = loader._dataset.inter_feat
        assert card["counts"][name] == {"rows": len(inter), "users": len(np.unique(inter["user_id"].numpy())),
                                        "items": len(np.unique(inter["item_id"].numpy()))}
    assert card["items"] == splits[0]._dataset.item_num - 1
    assert sum(card["counts"][n]["rows"] for n in ("train", "valid", "test")) == splits[0]._dataset.inter_num + \
        splits[1]._dataset.inter_num + splits[2]._dataset.inter_num


@pytest.fixture
def timed_dataset(workspace) -> str:
    """Four users on one timeline: u1 at 0..63, u2 at 100..163, u3 at 200..263 (10 interactions each,
    7 time units apart) and u4 at 300..433 (20 interactions); item i is the i-th interaction overall."""
    lines, item = ["user_id:token\titem_id:token\ttimestamp:float"], 0
    for user, start, count in (("u1", 0, 10), ("u2", 100, 10), ("u3", 200, 10), ("u4", 300, 20)):
        for k in range(count):
            item += 1
            lines.append(f"{user}\ti{item}\t{start + 7 * k}")
    folder = workspace.data_path / "timed"
    folder.mkdir(parents=True)
    (folder / "timed.inter").write_text("\n".join(lines) + "\n")
    return "timed"


def _card(workspace, dataset, params):
    from recrunner.data.cache import load_data

    params = {"load_col": {"inter": ["user_id", "item_id", "timestamp"]}, **params}
    config = prepare(Experiment("Pop", dataset, params), workspace).config
    return protocol.card(config, *(loader._dataset for loader in load_data(config, None)))


def test_a_per_user_split_leaks_as_computed_by_hand(workspace, timed_dataset):
    # per user, by time: 8/1/1 of u1..u3 and 16/2/2 of u4. The latest training interaction is u4's
    # 16th (300 + 7 * 15 = 405); the earliest test one u1's last (63).
    card = _card(workspace, timed_dataset, PER_USER)
    assert card["counts"]["test"]["rows"] == 5 and card["counts"]["train"]["rows"] == 40
    leak = card["leakage"]
    assert leak["applies"]
    assert leak["test_before_train_end"] == pytest.approx(3 / 5)   # 63, 163, 263 < 405; 426, 433 are not
    assert leak["valid_before_train_end"] == pytest.approx(3 / 5)  # 56, 156, 256 < 405; 412, 419 are not
    assert leak["train_after_test_start"] == pytest.approx(32 / 40)  # every training interaction of u2, u3, u4
    [warning] = protocol.warnings(card)
    assert "leaks the future" in warning and "60.0% of test" in warning and protocol.GLOBAL_SPLIT in warning


def test_a_global_temporal_split_does_not_leak(workspace, timed_dataset):
    card = _card(workspace, timed_dataset, GLOBAL)
    assert card["grouping"] == "global" and card["order"] == "time"
    assert card["counts"]["train"]["rows"] == 40 and card["counts"]["test"]["rows"] == 5
    assert {k: card["leakage"][k] for k in ("test_before_train_end", "valid_before_train_end",
                                             "train_after_test_start")} == {
        "test_before_train_end": 0.0, "valid_before_train_end": 0.0, "train_after_test_start": 0.0}
    assert protocol.warnings(card) == []


def test_the_shipped_global_temporal_config_is_that_split(workspace, timed_dataset):
    import yaml

    from recrunner.config.layers import config_file

    params = yaml.safe_load(config_file(protocol.GLOBAL_SPLIT.split()[-1]).read_text())
    assert _card(workspace, timed_dataset, params)["leakage"]["test_before_train_end"] == 0.0


def test_positions_are_not_audited_as_times():
    users = np.array([1, 1, 1, 2, 2, 2, 2, 3, 3, 3])
    assert protocol.positions_not_times(users, np.array([0, 1, 2, 0, 1, 2, 3, 0, 1, 2]))
    assert protocol.positions_not_times(users, np.array([1, 2, 3, 1, 2, 3, 4, 1, 2, 3]))  # augmented: first is history
    assert not protocol.positions_not_times(users, np.array([0, 1, 2, 0, 5, 9, 10, 0, 1, 2]))
    assert not protocol.positions_not_times(users, np.array([9e8, 9e8 + 1, 9e8 + 2] + [0, 1, 2, 3] + [0, 1, 2]))
    # a filter (k-core) dropped interactions: gaps, as in the shared ml-1m with item_inter_num_interval [5,inf)
    assert protocol.positions_not_times(users, np.array([0, 2, 3, 1, 2, 4, 5, 0, 3, 4]))
    assert not protocol.positions_not_times(users, np.array([0.1, 0.2, 0.3] * 3 + [0.4]))  # RecBole's normalised times


def test_an_audit_does_not_apply_to_positions(workspace, tmp_path):
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    lines += [f"u{u}\ti{(u * 7 + k) % 30}\t{k}" for u in range(12) for k in range(10)]
    folder = workspace.data_path / "positions"
    folder.mkdir(parents=True)
    (folder / "positions.inter").write_text("\n".join(lines) + "\n")
    card = _card(workspace, "positions", PER_USER)
    assert card["leakage"] == {"applies": False, "reason": "timestamp holds each user's positions 0, 1, 2..., not times"}


def test_sampled_metrics_are_named_with_the_cost_of_full_ranking(workspace, capsys, base_args):
    code, out, err = run_cli(capsys, ["--model", "BPR", *base_args, "--set", "embedding_size=8", "epochs=1",
                                      "user_inter_num_interval=[10,60]", "eval_args={mode: uni100}"])
    assert code == 0
    [metrics] = workspace.output_dir.rglob("metrics.json")
    card = json.loads(metrics.read_text())["protocol"]
    assert card["ranking"] == {"valid": "sampled: 100 uniform negatives", "test": "sampled: 100 uniform negatives"}
    expected = (f"test metrics are sampled (100 uniform negatives) and sampled metrics can reorder models (Krichene "
                f"& Rendle 2020); a full ranking scores all {card['items']} items per user instead of 101")
    assert expected in out + err  # the console's cell line
    assert expected in (metrics.parent / "run.log").read_text()


def test_protocols_are_never_pooled_in_one_cell():
    by_time = {"split": "ratio [0.8, 0.1, 0.1]", "order": "time", "grouping": "global", "ranking": {}, "filters": {}}
    by_chance = {**by_time, "order": "random", "grouping": "per user"}
    rows = [{"dataset": "ml-100k", "protocol": by_time}, {"dataset": "ml-100k", "protocol": by_chance},
            {"dataset": "ml-100k", "protocol": dict(by_time, counts={"train": {"rows": 3}})},  # counts do not matter
            {"dataset": "yelp", "protocol": by_time}]
    cards = protocol.separate(rows)
    labels = [row["dataset"] for row in rows]
    assert labels == ["ml-100k [order time; grouping global]", "ml-100k [order random; grouping per user]",
                      "ml-100k [order time; grouping global]", "yelp"]
    assert set(cards) == set(labels)


def test_a_failed_cell_takes_its_datasets_column_instead_of_a_column_of_its_own():
    by_time = {"split": "ratio [0.8, 0.1, 0.1]", "order": "time", "grouping": "global", "ranking": {}, "filters": {}}
    by_chance = {**by_time, "order": "random"}
    rows = [{"dataset": "ml-100k", "protocol": by_time, "status": "ok"},
            {"dataset": "ml-100k", "protocol": None, "status": "failed"},   # Pop refused a parameter: no card
            {"dataset": "yelp", "protocol": None, "status": "failed"},      # nothing finished on yelp
            {"dataset": "ml-1m", "protocol": by_time, "status": "ok"}, {"dataset": "ml-1m", "protocol": by_chance},
            {"dataset": "ml-1m", "protocol": None, "status": "failed"},
            {"dataset": "old", "protocol": None}]                           # a finished record older than the card
    cards = protocol.separate(rows)
    assert [row["dataset"] for row in rows] == [
        "ml-100k", "ml-100k", "yelp", "ml-1m [order time]", "ml-1m [order random]", "ml-1m [protocol not recorded]", "old"]
    assert set(cards) == {"ml-100k", "ml-1m [order time]", "ml-1m [order random]"}
