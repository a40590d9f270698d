"""A newcomer's mistakes: each is one line and exit 2, checked before torch is imported where it can
be, and no mistake damages a finished run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from recrunner import ConfigError, Experiment, run_experiment
from recrunner.config.checks import check_output_folder, impossible_values, key_lines
from recrunner.data.files import atomic_file_problem, check_labels

from .conftest import REPO, TINY_BPR, write_mini_dataset
from .conftest import run_cli as _run



# ---------------------------------------------------------------- before any heavy import
EARLY = [
    (["--set", "epochs=-1"], "--set: epochs must be a whole number >= 1, got -1"),
    (["--set", "epochs=0"], "epochs must be a whole number >= 1"),
    (["--set", "train_batch_size=0"], "train_batch_size must be a whole number >= 1"),
    (["--set", "hidden_size=-4"], "hidden_size must be a whole number >= 1"),
    (["--set", "topk=[10,0]"], "topk must be a whole number >= 1"),
    (["--set", "learning_rate=-1"], "learning_rate must be > 0"),
    (["--set", "hidden_dropout_prob=1.5"], "hidden_dropout_prob is a probability"),
    (["--set", "learner=adamm"], "learner 'adamm' is not an optimizer RecBole knows (it would silently use adam)"),
    (["--set", "metrics=[Recal,NDCG]"], "RecBole has no metric 'Recal'; did you mean recall?"),
    (["--set", "epochs=abc"], "--set: epochs expects a number"),
    (["--set", "learning_rate=[0.1,0.01]"], "learning_rate expects a number (default 0.001), got [0.1, 0.01]; to sweep "
                                             "values, give them in a grid (params: {learning_rate: [0.1, 0.01]}, --grid FILE)"),
    (["--set", "hiden_size=16"], "unknown config key 'hiden_size'; did you mean hidden_size"),
    (["--resume-from", "no/such/last.pth"], "--resume-from no/such/last.pth: no such file"),
    (["--select-top", "x"], "argument --select-top: expected a whole number >= 1, got 'x'"),
    (["--select-top", "1"], "select_top must be a whole number >= 2, got 1"),
    (["--select-seeds", "3"], "select_seeds belongs to racing; add select_top: K (or --select-top K)"),
]


@pytest.mark.parametrize("argv, expected", EARLY)
def test_early_mistakes_are_one_line_exit_2_before_torch_is_imported(argv, expected, base_args):
    code = ("import sys, json; from recrunner.cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps([rc, 'torch' in sys.modules, 'recbole' in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code, *base_args, *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [2, False, False], proc.stderr
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr and "Traceback" not in proc.stderr


def test_impossible_values_rule_is_pure_and_lets_possible_ones_pass():
    assert impossible_values({"epochs": 5, "n_layers": 0, "dropout_prob": 0.0, "topk": [10, 20], "learner": "AdamW",
                              "learning_rate": 1e-3, "train_neg_sample_args": {"sample_num": 1}}) == []
    assert len(impossible_values({"epochs": 0, "stopping_step": -1, "embedding_size": 0.5,
                                  "learning_rate": float("inf")})) == 4
    # a switch is auto, true or false, each value of a grid's list too; 1 equals True in Python, yet is no switch
    assert impossible_values({"fast_compile": [True, False], "cuda_graph_optimizer": "auto", "fast_attention": False}) == []
    assert impossible_values({"cuda_graph_step": 1, "fast_fused_optimizer": [True, "yes"]}) == [
        "cuda_graph_step 1 must be auto, true or false", "fast_fused_optimizer [True, 'yes'] must be auto, true or false"]


def test_a_typo_in_a_grid_names_the_grid_file_and_line(base_args, tmp_path, capsys):
    grid = tmp_path / "g.yaml"
    grid.write_text("models: [BPR]\ndatasets: [ml-100k]\nparams:\n  embedding_sise: [8, 16]\n")
    code, _, err = _run(capsys, base_args + ["--grid", str(grid)])
    assert code == 2 and f"{grid}:4: unknown config key 'embedding_sise'; did you mean embedding_size" in err
    assert key_lines(grid) == {"models": 1, "datasets": 2, "params": 3, "embedding_sise": 4}


def test_a_grid_that_expands_to_no_cell_is_an_error(base_args, tmp_path, capsys):
    grid = tmp_path / "g.yaml"
    grid.write_text("models: [BPR]\ndatasets: [ml-100k]\nparams:\n  embedding_size: []\n")
    code, _, err = _run(capsys, base_args + ["--grid", str(grid)])
    assert code == 2 and "params.embedding_size is an empty list, so the grid has no cell" in err


def test_a_binary_config_file_and_an_output_that_is_a_file_are_usage_errors(base_args, tmp_path, capsys):
    binary = tmp_path / "model.pth"
    binary.write_bytes(bytes(range(256)) * 4)
    code, _, err = _run(capsys, base_args + ["--config-file", str(binary)])
    assert code == 2 and "is not a text file" in err
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _, err = _run(capsys, base_args + ["--output", str(afile)])
    assert code == 2 and f"{afile} is a file, not a folder" in err


def test_an_output_folder_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr("os.access", lambda path, mode: False)  # root may write anywhere: the rule, not the OS
    with pytest.raises(ConfigError, match="is not writable"):
        check_output_folder(tmp_path / "runs")


def test_gpus_on_a_machine_without_cuda_are_refused(base_args, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = _run(capsys, base_args + ["--gpus", "0", "--set", "epochs=1"])
    assert code == 2 and "--gpus 0: this machine has no CUDA device" in err


def test_a_model_name_in_any_case_is_recboles(base_args, capsys):
    code, out, _ = _run(capsys, base_args + ["--model", "sasrec", "--dry-run"])
    assert code == 0 and "ml-100k/SASRec/" in out and "sasrec" not in out


# ---------------------------------------------------------------- dataset files
@pytest.mark.parametrize("content, expected", [
    ("user_id,item_id,rating\n1,2,3\n", "line 1 looks like CSV ('user_id,item_id,rating')"),
    ("user_id\titem_id\n1\t2\n", "line 1 is not a header RecBole can read"),
    ("", "is empty"),
    ("user_id:token\titem_id:token\trating:float\n1\t2\tabc\n", "line 2: rating:float is a float column, but holds 'abc'"),
    ("user_id:token\titem_id:token\n1\t2\t3\n", "line 2 has 3 columns, the header 2"),
])
def test_malformed_atomic_files_say_what_recbole_needs(tmp_path, content, expected):
    path = tmp_path / "d.inter"
    path.write_text(content)
    assert expected in atomic_file_problem(path)


def test_a_csv_inter_file_is_one_line_exit_2(base_args, tmp_path, capsys):
    folder = tmp_path / "data" / "mine"
    folder.mkdir(parents=True)
    (folder / "mine.inter").write_text("user_id,item_id,rating,timestamp\n1,2,3,4\n")
    code, _, err = _run(capsys, base_args + ["--model", "BPR", "--dataset", "mine"])
    assert code == 2 and err.count("\n") == 1 and "looks like CSV" in err and "field:type" in err


def test_heads_that_do_not_divide_the_width_are_one_line_before_any_run_folder(base_args, tmp_path, capsys):
    # RecBole: a ValueError while the model is built, the run failed with a traceback
    code, _, err = _run(capsys, base_args + ["--model", "SASRec", "--set", "n_heads=3"])

    assert code == 2 and err.count("\n") == 1
    assert "SASRec: hidden_size (64) must be a multiple of n_heads (3)" in err and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("model", ["KGCN", "KSR"])  # a knowledge-aware model, a sequential one with the graph
def test_a_knowledge_aware_model_on_data_without_a_graph_names_the_files_before_any_run_folder(model, base_args, tmp_path,
                                                                                              capsys):
    folder = tmp_path / "data" / "mine"
    folder.mkdir(parents=True)
    (folder / "mine.inter").write_text("user_id:token\titem_id:token\ttimestamp:float\n1\t2\t3\n")
    (folder / "mine.kg").write_text("head_id:token\trelation_id:token\ttail_id:token\n")

    code, _, err = _run(capsys, base_args + ["--model", model, "--dataset", "mine"])

    assert code == 2 and err.count("\n") == 1  # RecBole: a ValueError inside the data build
    assert f"{model} is knowledge-aware: it needs {folder / 'mine.link'} (.kg: head_id, relation_id, tail_id; .link: " \
           f"item_id, entity_id; ml-100k has both)" in err
    assert not (tmp_path / "runs").exists()


def _pointwise(tmp_path, header, **settings):
    from recbole.utils import InputType, ModelType

    (tmp_path / "d.inter").write_text(header + "\n")
    return {"model": "DeepFM", "dataset": "d", "data_path": str(tmp_path), "MODEL_INPUT_TYPE": InputType.POINTWISE,
            "MODEL_TYPE": ModelType.CONTEXT,
            "eval_args": {"mode": {"valid": "labeled", "test": "labeled"}}, "threshold": None, "LABEL_FIELD": "label",
            "RATING_FIELD": "rating", "train_neg_sample_args": {"distribution": "none"}, "benchmark_filename": None,
            "field_separator": "\t", "load_col": {"inter": ["user_id", "item_id", "rating", "label"]}, **settings}


def test_a_pointwise_model_needs_a_label_from_the_data_a_threshold_or_sampled_negatives(tmp_path):
    from recbole.utils import InputType, ModelType

    with pytest.raises(ConfigError, match=r"set threshold: \{rating: 4\} .* or add --config-file protocols/implicit-feedback"):
        check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token\trating:float"))
    with pytest.raises(ConfigError, match=r"\(no 'label' column, no threshold\): add --config-file protocols/implicit-feedback"):
        check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token\ttimestamp:float"))
    with pytest.raises(ConfigError):  # a label column load_col leaves out is no label
        check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token\tlabel:float", load_col={"inter": ["user_id", "item_id"]}))
    check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token\tlabel:float"))
    check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token\trating:float", threshold={"rating": 4}))
    check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token", train_neg_sample_args={"distribution": "uniform"},
                            eval_args={"mode": "full"}))
    check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token", MODEL_INPUT_TYPE=InputType.PAIRWISE))
    check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token", MODEL_TYPE=ModelType.SEQUENTIAL))  # CE: no label read
    with pytest.raises(ConfigError):  # negatives in training, but a labelled evaluation
        check_labels(_pointwise(tmp_path, "user_id:token\titem_id:token", train_neg_sample_args={"distribution": "uniform"}))


def test_a_context_aware_model_on_implicit_data_is_refused_and_the_packaged_protocol_runs_it(base_args, capsys):
    write_mini_dataset(Path(base_args[3]))
    tiny = ["--model", "DeepFM", "--dataset", "ml-mini", "--set", "epochs=1", "embedding_size=4", "mlp_hidden_size=[8]"]

    code, _, err = _run(capsys, base_args + tiny)

    assert code == 2 and err.count("\n") == 1  # RecBole: KeyError: 'label' in the first batch
    assert "DeepFM learns from a label per interaction, and ml-mini's have none (no 'label' column, no threshold): " \
           "set threshold: {rating: 4} and load_col: {inter: [user_id, item_id, rating]}" in err
    code, out, err = _run(capsys, base_args + tiny + ["--config-file", "protocols/implicit-feedback.yaml", "--quiet"])
    assert code == 0, out + err
    assert "[1/1] ok      DeepFM on ml-mini" in out and "test recall@10=" in out
    code, out, err = _run(capsys, base_args + tiny + ["threshold={rating: 4}", "load_col={inter: [user_id, item_id, rating]}",
                                                      "--quiet"])  # the other fix the line names
    assert code == 0, out + err
    assert "[1/1] ok      DeepFM on ml-mini" in out and "test auc=" in out


def test_nothing_left_after_filtering_is_one_line_and_a_usage_error(base_args, capsys):
    code, out, err = _run(capsys, base_args + ["--model", "BPR", "--set", "epochs=1", "user_inter_num_interval='[900,inf)'"])
    assert code == 2 and "Traceback" not in out + err
    assert "DataError: RecBole could not build ml-100k" in out and "filter" in out


def test_a_bpr_loss_without_sampled_negatives_is_one_line_before_any_run_folder(base_args, tmp_path, capsys):
    # RecBole takes it and fails at the first batch with KeyError: 'neg_item_id'
    code, _, err = _run(capsys, base_args + ["--model", "SASRec", "--set", "loss_type=BPR"])

    assert code == 2 and err.count("\n") == 1
    assert ("SASRec with loss_type BPR scores a sampled negative item per sequence, and train_neg_sample_args samples "
            "none: set train_neg_sample_args to {distribution: uniform, sample_num: 1}, or loss_type to CE") in err
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- a finished run is never damaged
@pytest.fixture
def finished(workspace):
    result = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    assert result.status == "ok"
    files = {p: p.read_bytes() for p in result.run_dir.rglob("*") if p.is_file() and p.name != "run.log"}
    return result, files


def _unchanged(files):
    return all(p.is_file() and p.read_bytes() == content for p, content in files.items())


def test_resume_from_another_models_checkpoint_leaves_a_finished_run_as_it_was(workspace, finished):
    result, files = finished
    other = run_experiment(Experiment("Pop", "ml-100k", {"epochs": 1}), workspace, console=False)
    for restart in (False, True):
        with pytest.raises(ConfigError):
            run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, restart=restart,
                           resume_from=other.run_dir / "checkpoints" / "last.pth")
        assert _unchanged(files)


def test_resume_from_into_a_finished_run_needs_restart_and_never_from_inside_it(workspace, finished):
    result, files = finished
    last = result.run_dir / "checkpoints" / "last.pth"
    with pytest.raises(ConfigError, match=r"is finished \(ok\); --resume-from would replace it: add --restart"):
        run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, resume_from=last)
    with pytest.raises(ConfigError, match="lies inside the run --restart replaces"):
        run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, restart=True, resume_from=last)
    corrupt = workspace.output_dir / "corrupt.pth"
    corrupt.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="--resume-from"):
        run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, restart=True, resume_from=corrupt)
    assert _unchanged(files)


def test_a_restart_that_fails_before_training_brings_the_finished_run_back(workspace, finished, monkeypatch):
    result, files = finished

    def no_data(prepared, workspace):
        raise OSError("the disk went away")

    monkeypatch.setattr("recrunner.run.building.loaders", no_data)
    again = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, restart=True)
    assert again.status == "failed" and "the disk went away" in again.error
    assert _unchanged(files) and json.loads((result.run_dir / "metrics.json").read_text())["status"] == "ok"
    assert not (workspace.output_dir / ".cache" / "replaced").exists() or not any(
        (workspace.output_dir / ".cache" / "replaced").rglob("metrics.json"))


def test_a_restart_replaces_the_run_once_training_has_begun(workspace, finished):
    result, files = finished
    again = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 2}), workspace, console=False,
                           restart=True)
    assert again.status == "ok" and again.run_dir == result.run_dir
    assert not any((workspace.output_dir / ".cache" / "replaced").rglob("*.pth"))


def test_a_full_disk_during_a_run_fails_it_with_one_line_and_the_same_command_resumes(workspace, monkeypatch):
    import errno

    from recrunner.training.checkpoints import files as checkpoint

    real, calls = checkpoint.save_atomic, []

    def fills_up(state, path):
        calls.append(path)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(state, path)

    monkeypatch.setattr(checkpoint, "save_atomic", fills_up)
    failed = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 3}), workspace, console=False)
    assert failed.status == "failed" and "No space left on device" in failed.error
    assert "\n" not in failed.error and "free" in failed.error
    monkeypatch.setattr(checkpoint, "save_atomic", real)
    resumed = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 3}), workspace, console=False)
    assert resumed.status == "ok"


# ---------------------------------------------------------------- what a sweep starts
def test_a_rerun_with_nothing_to_do_starts_no_worker_server(base_args, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"name": "g", "models": ["Pop"], "datasets": ["ml-100k"], "seeds": [1, 2],
                                    "fixed": {"epochs": 1}}))
    code = ("import sys, json, multiprocessing.forkserver as f; from recrunner.cli import main; "
            "rc = main(sys.argv[1:]); print(json.dumps([rc, f._forkserver._forkserver_pid is not None]))")
    argv = [sys.executable, "-c", code, *base_args, "--grid", str(grid), "--workers", "2", "--quiet"]
    first = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
    again = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert json.loads(first.stdout.strip().splitlines()[-1]) == [0, True], first.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1]) == [0, False], again.stderr
    assert "0 ok, 0 failed, 2 skipped" in again.stdout


def test_settings_that_only_change_what_a_run_shows_keep_its_id(workspace):
    from recrunner import prepare

    plain = prepare(Experiment("BPR", "ml-100k", TINY_BPR), workspace)
    shown = prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "progress_every": 5, "checkpoint_every": 2}), workspace)
    assert (shown.run_id, shown.fingerprint) == (plain.run_id, plain.fingerprint)
    assert prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 3}), workspace).run_id != plain.run_id


def test_what_the_early_checks_read_from_recboles_files_is_what_recbole_has():
    from recbole.evaluator.register import metrics_dict

    from recrunner.config.recbole_files import METRICS, canonical_model, recbole_keys, recbole_model_defaults_file

    assert METRICS == sorted(metrics_dict)
    assert {"epochs", "learning_rate", "n_layers", "MAX_ITEM_LIST_LENGTH", "progress_every"} <= recbole_keys()
    assert canonical_model("sasrec") == "SASRec" and recbole_model_defaults_file("SASRec")["n_layers"] == 2
    from recrunner.run.models import available_models

    # every model is spelled as its class, also where RecBole's YAML file is not (lightgbm.yaml, xgboost.yaml)
    assert [canonical_model(model.lower()) for model in available_models()] == list(available_models())


@pytest.mark.parametrize("setting, value, expected", [
    ("hidden_act", "foo", "hidden_act 'foo' is not an activation RecBole's transformers have; choose one of gelu,"),
    ("loss_type", "XYZ", "loss_type 'XYZ' is not a loss RecBole's models have; choose BPR or CE"),
    ("eval_args", {"order": "XX"}, "eval_args order 'XX' is not an order RecBole has; choose RO (random) or TO (time)"),
    ("eval_args", {"mode": "uni0"}, "eval_args mode 'uni0' is not a mode RecBole has"),  # RecBole: ranked against nothing
    ("eval_args", {"mode": {"valid": "full", "test": "unif100"}}, "eval_args mode 'unif100' is not a mode"),
    ("eval_args", {"split": {"LS": "valid_and_tes"}}, "eval_args split {'LS': 'valid_and_tes'} is not a split RecBole has"),
    ("eval_args", {"split": {"RS": [0.8, -0.1, 0.3]}}, "is not a split RecBole has; give {RS: [0.8, 0.1, 0.1]} (ratios)"),
    ("pop_counts", "items", "pop_counts 'items' is not a way to count; choose one of batches, interactions"),
])
def test_a_value_outside_what_recbole_reads_is_named_before_it_is_imported(setting, value, expected):
    assert any(expected in problem for problem in impossible_values({setting: value}))


def test_every_value_recbole_and_the_packaged_layers_use_is_possible():
    for params in ({"hidden_act": "gelu", "loss_type": "CE"}, {"loss_type": "BCE"}, {"loss_type": "NLL"},
                   {"eval_args": {"split": {"RS": [8, 1, 1]}, "order": "RO", "group_by": None, "mode": "labeled"}},
                   {"eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": {"valid": "uni100", "test": "pop50"}}}):
        assert impossible_values(params) == [], params
