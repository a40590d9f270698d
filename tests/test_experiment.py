"""One experiment end to end: run directory, TensorBoard, logs, metrics.json."""

import json
import subprocess
import sys

import torch

from recrunner import Experiment, run_experiment

from .conftest import REPO, TINY_BPR, TINY_SASREC, read_hparams, read_scalars


def test_run_writes_the_run_directory_of_design_md(workspace):
    result = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)

    run_dir = result.run_dir
    assert run_dir.parent == workspace.output_dir / "default" / "ml-100k" / "SASRec"
    for name in ("config.yaml", "run.log", "metrics.json", "checkpoints/best.pth", "checkpoints/last.pth"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["error"] is None
    assert metrics["best_epoch"] == 1
    assert set(metrics["test"]) == set(metrics["best_valid"]) == {"recall@10", "mrr@10", "ndcg@10", "hit@10", "precision@10"}
    assert set(metrics["versions"]) == {"recrunner", "recbole", "torch"}
    assert [d.name for d in run_dir.iterdir() if d.is_dir()] == ["checkpoints"]  # no timestamped sub-run


def test_tensorboard_has_every_metric_at_every_validation_including_minus_one(workspace):
    result = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)

    scalars = read_scalars(result.run_dir)
    for metric in ("recall@10", "mrr@10", "ndcg@10", "hit@10", "precision@10", "score"):
        assert [step for step, _ in scalars[f"Valid/{metric}"]] == [-1, 0, 1], metric
    assert [step for step, _ in scalars["Train/Loss"]] == [0, 1]
    assert {tag for tag in scalars if tag.startswith("Test/")} == {f"Test/{m}" for m in result.test}
    assert scalars["Test/recall@10"][0][1] == torch.tensor(result.test["recall@10"]).float().item()
    assert scalars["Best_Valid/recall@10"] == [(1, scalars["Valid/recall@10"][-1][1])]


def test_hparams_row_is_in_the_same_run_with_its_real_status(workspace):
    ok = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)
    failed = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "learning_rate": 1e30}), workspace, console=False)

    row = read_hparams(ok.run_dir)
    assert row["status"] == "STATUS_SUCCESS"
    assert row["hparams"]["model"] == "SASRec" and row["hparams"]["hidden_size"] == 16
    assert row["hparams"]["seed"] == 2020 and row["hparams"]["learning_rate"] == 0.001
    assert "Best_Valid/recall@10" in row["metric_tags"] and "Test/ndcg@10" in row["metric_tags"]
    assert read_hparams(failed.run_dir)["status"] == "STATUS_FAILURE"


def test_nan_loss_fails_the_run_with_its_reason_and_keeps_the_record(workspace):
    result = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "learning_rate": 1e30}), workspace, console=False)

    assert result.status == "failed"
    assert result.error.startswith("TrainingFailed: training loss became nan in epoch 0 at batch ")
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["status"] == "failed" and metrics["error"] == result.error
    assert read_hparams(result.run_dir)["status"] == "STATUS_FAILURE"
    log = (result.run_dir / "run.log").read_text()
    assert "training loss became nan" in log and "Traceback" not in log


def test_two_runs_in_one_process_each_get_their_own_log(workspace):
    first = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    second = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)

    first_log = (first.run_dir / "run.log").read_text()
    second_log = (second.run_dir / "run.log").read_text()
    assert "SASRec" in second_log and "epoch 1 training" in second_log
    assert "SASRec" not in first_log
    assert "\x1b[" not in second_log  # RecBole's colour codes are stripped from files
    assert read_scalars(second.run_dir)["Valid/recall@10"]  # its own TensorBoard run, not the first's


def test_a_finished_run_is_not_trained_again(workspace):
    first = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    log_size = (first.run_dir / "run.log").stat().st_size

    again = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)

    assert again.skipped and again.status == "ok" and again.test == first.test
    assert (first.run_dir / "run.log").stat().st_size == log_size


def test_every_checkpoint_opens_with_weights_only(workspace):
    result = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)
    checkpoints = result.run_dir / "checkpoints"
    assert sorted(path.name for path in checkpoints.glob("*.pth")) == ["best.pth", "last.pth"]
    for kind in ("best", "last"):
        state = torch.load(checkpoints / f"{kind}.pth", weights_only=True)
        assert state["format_version"] == 1 and state["kind"] == kind


def test_recbole_quick_start_and_ray_are_never_imported(workspace):
    # in a fresh interpreter: other tests of this session import ray on purpose (the Ray backend)
    code = (
        "import sys, json; from pathlib import Path; from recrunner import Experiment, Workspace, run_experiment\n"
        f"ws = Workspace(Path({str(workspace.output_dir)!r}), Path({str(workspace.data_path)!r}), "
        f"Path({str(workspace.config_dir)!r}))\n"
        f"result = run_experiment(Experiment('BPR', 'ml-100k', {TINY_BPR!r}), ws, console=False)\n"
        "print(json.dumps([result.status, 'recbole.quick_start' in sys.modules, 'ray' in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["ok", False, False], proc.stderr[-2000:]


def test_ml_1m_loads_from_the_shared_datasets(tmp_path, shared_datasets):
    from recrunner import Workspace

    from .conftest import REPO

    workspace = Workspace(output_dir=tmp_path / "runs", data_path=shared_datasets, config_dir=REPO / "configs")
    params = {**TINY_SASREC, "epochs": 1, "user_inter_num_interval": "[20,40]", "train_batch_size": 4096}
    result = run_experiment(Experiment("SASRec", "ml-1m", params), workspace, console=False)
    assert result.status == "ok", result.error
    assert result.test["recall@10"] > 0


def test_no_submodule_shadows_a_public_name():
    # `import recrunner.prepare` would replace the function recrunner.prepare with a module
    import pkgutil

    import recrunner
    import recrunner.sweep

    for package in (recrunner, recrunner.sweep):
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert not modules & set(package.__all__), package.__name__
