"""Kill a real training process with SIGKILL; the resumed run must end exactly as an uninterrupted one."""

import json
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from recrunner import ConfigError, Experiment, run_experiment
from recrunner.training.callbacks.history import read_history

from .conftest import REPO, TINY_BPR, TINY_SASREC, read_scalars

# Runs one experiment and SIGKILLs itself at a chosen point: after the last.pth of epoch K
# ("after-epoch"), or halfway through writing the last.pth of epoch K ("mid-write").
KILLER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    import torch
    from recrunner import Callback, Experiment, Workspace, run_experiment

    spec = json.loads(sys.argv[1])
    kill_epoch, mode, stage = spec["kill_epoch"], spec["mode"], spec.get("stage")

    class KillAfterEpoch(Callback):
        def on_checkpoint_saved(self, trainer, control, path, kind):
            in_stage = stage is None or getattr(trainer.model, "train_stage", None) == stage
            if kind == "last" and trainer.epoch == kill_epoch and in_stage:
                os.kill(os.getpid(), signal.SIGKILL)

    real_save = torch.save
    def half_written_save(obj, f, *args, **kwargs):
        if isinstance(obj, dict) and obj.get("kind") == "last" and obj.get("epoch") == kill_epoch:
            real_save(obj, f, *args, **kwargs)
            f.flush(); f.truncate(f.tell() // 2); f.flush(); os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        return real_save(obj, f, *args, **kwargs)
    if mode == "mid-write":
        torch.save = half_written_save

    ws = Workspace(Path(spec["output"]), Path(spec["data"]), Path(spec["configs"]))
    run_experiment(Experiment(spec["model"], "ml-100k", spec["params"]), ws, console=False,
                   callbacks=[KillAfterEpoch()] if mode == "after-epoch" else [])
""")


def _killed_run(workspace, model, params, kill_epoch, mode, stage=None):
    spec = {"model": model, "params": params, "kill_epoch": kill_epoch, "mode": mode, "stage": stage,
            "output": str(workspace.output_dir), "data": str(workspace.data_path), "configs": str(workspace.config_dir)}
    proc = subprocess.run([sys.executable, "-c", KILLER, json.dumps(spec)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]



def killed_and_resumed(workspace, tmp_path, model, params, kill_epoch):
    """`model` on ml-100k SIGKILLed after the last.pth of epoch `kill_epoch`, in a workspace of its own, then run
    again: (the resumed run, that workspace)."""
    from recrunner import Workspace

    killed = Workspace(tmp_path / "killed-runs", workspace.data_path, workspace.config_dir)
    _killed_run(killed, model, params, kill_epoch, "after-epoch")
    resumed = run_experiment(Experiment(model, "ml-100k", params), killed, console=False)
    assert resumed.status == "ok" and f"continuing at epoch {kill_epoch + 1}" in (resumed.run_dir / "run.log").read_text()
    return resumed, killed


def same_result(one, other) -> bool:
    """Two runs ended alike: the same best epoch, best validation score and test metrics."""
    return (one.best_epoch, one.best_valid, one.test) == (other.best_epoch, other.best_valid, other.test)


CASES = [
    ("SASRec", {**TINY_SASREC, "epochs": 4}, 1, "after-epoch"),
    ("BPR", {**TINY_BPR, "epochs": 5, "learning_rate": 0.01}, 2, "after-epoch"),
    ("SASRec", {**TINY_SASREC, "epochs": 4}, 2, "mid-write"),
]


@pytest.mark.parametrize("model, params, kill_epoch, mode", CASES)
def test_a_killed_run_resumes_to_exactly_the_uninterrupted_result(model, params, kill_epoch, mode, workspace, tmp_path):
    from recrunner import Workspace

    reference = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    killed_ws = Workspace(tmp_path / "killed-runs", workspace.data_path, workspace.config_dir)
    _killed_run(killed_ws, model, params, kill_epoch, mode)
    metrics = json.loads(next(killed_ws.output_dir.rglob("metrics.json")).read_text())
    assert metrics["status"] == "running"  # the process died without a word

    resumed = run_experiment(Experiment(model, "ml-100k", params), killed_ws, console=False)

    assert resumed.status == "ok" and not resumed.skipped
    assert resumed.best_epoch == reference.best_epoch
    assert resumed.best_valid == reference.best_valid
    assert resumed.test == reference.test
    log = (resumed.run_dir / "run.log").read_text()
    resumed_after = kill_epoch - 1 if mode == "mid-write" else kill_epoch
    assert f"continuing at epoch {resumed_after + 1}" in log
    # curves continue with no duplicated steps
    steps = [step for step, _ in read_scalars(resumed.run_dir)["Train/Loss"]]
    assert steps == list(range(params["epochs"]))
    assert read_scalars(resumed.run_dir)["Valid/recall@10"][0][0] == -1
    # one training time: every process's epochs, as last.pth keeps it; seconds_to_best within it
    import torch

    record = json.loads((resumed.run_dir / "metrics.json").read_text())
    state = torch.load(resumed.run_dir / "checkpoints" / "last.pth", weights_only=True)
    assert record["train_seconds"] == round(state["train_seconds"], 3)
    epochs = [line["seconds"] for line in read_history(resumed.run_dir / "history.jsonl") if line["epoch"] >= 0]
    assert len(epochs) == params["epochs"]  # the killed process's epochs and the resumed one's
    assert record["train_seconds"] >= sum(epochs) - 0.001 * len(epochs)  # each line rounded to 1 ms
    assert record["seconds_to_best"] <= record["train_seconds"]


FAMILY_CASES = [
    # S3Rec: killed in its pre-training stage, then in fine-tuning; each resumes its own stage
    ("S3Rec", {"pretrain_epochs": 3, "save_step": 1, "epochs": 2}, 1, "pretrain"),
    ("S3Rec", {"pretrain_epochs": 2, "save_step": 1, "epochs": 3}, 1, "finetune"),
    # NCL with an E-step every 2 epochs: epoch 1 resumes with the clusters of epoch 0's E-step
    ("NCL", {"epochs": 3, "m_step": 2}, 0, None),
    # XGBoost continues boosting from the booster of epoch 0
    ("XGBoost", {"epochs": 2, "xgb_num_boost_round": 5}, 0, None),
]


@pytest.mark.parametrize("model, params, kill_epoch, stage", FAMILY_CASES,
                         ids=["S3Rec-pretrain", "S3Rec-finetune", "NCL", "XGBoost"])
def test_trainer_families_resume_exactly(model, params, kill_epoch, stage, workspace, tmp_path):
    from recrunner import Workspace

    from .tiny_models import model_keys, tiny_params

    pytest.importorskip({"NCL": "faiss", "XGBoost": "xgboost"}.get(model, "recbole"))
    params = {**tiny_params(model, model_keys(model)), **params}
    reference = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    killed_ws = Workspace(tmp_path / "killed-runs", workspace.data_path, workspace.config_dir)
    _killed_run(killed_ws, model, params, kill_epoch, "after-epoch", stage)
    resumed = run_experiment(Experiment(model, "ml-100k", params), killed_ws, console=False)

    assert resumed.status == "ok" and not resumed.skipped
    assert (resumed.best_epoch, resumed.best_valid, resumed.test) == (reference.best_epoch, reference.best_valid,
                                                                     reference.test)
    log = (resumed.run_dir / "run.log").read_text()
    assert f"continuing at epoch {kill_epoch + 1}" in log
    if stage == "finetune":
        assert "pre-training stage pretrain: finished before" in log
    if model == "S3Rec":  # the pre-trained weights RecBole's fine-tuning reads, as plain data
        pretrained = torch.load(resumed.run_dir / "pretrain" / "checkpoints" / "best.pth", weights_only=True)
        assert pretrained["epoch"] == params["pretrain_epochs"] - 1 and "state_dict" in pretrained
        assert (resumed.run_dir / "pretrain" / "checkpoints" / "S3Rec-ml-100k-1.pth").is_file()  # save_step copies


def test_a_corrupt_last_checkpoint_falls_back_to_an_older_one(workspace):
    params = {**TINY_BPR, "epochs": 3, "save_total_limit": 2}
    reference = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False, restart=True)
    checkpoints = reference.run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("epoch-*.pth")) == ["epoch-0001.pth", "epoch-0002.pth"]

    # pretend the run stopped after epoch 1 and its newest last.pth was damaged
    (checkpoints / "epoch-0002.pth").unlink()
    (checkpoints / "last.pth").write_bytes(b"garbage" * 100)
    metrics_path = reference.run_dir / "metrics.json"
    metrics_path.write_text(json.dumps({**json.loads(metrics_path.read_text()), "status": "interrupted"}))

    resumed = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)

    log = (resumed.run_dir / "run.log").read_text()
    assert "last.pth is corrupt or truncated" in log and "continuing at epoch 2" in log
    assert resumed.test == reference.test


def test_restart_trains_again_from_scratch(workspace):
    first = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    again = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, restart=True)
    assert not again.skipped and again.test == first.test
    assert "Resumed" not in (again.run_dir / "run.log").read_text()


def test_last_checkpoint_holds_the_full_training_state(workspace):
    result = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)
    state = torch.load(result.run_dir / "checkpoints" / "last.pth", weights_only=True)
    assert {"state_dict", "optimizer", "epoch", "cur_step", "best_valid_score", "best_epoch", "best_valid_result",
            "train_loss_dict", "callbacks", "rng", "config", "format_version", "finished"} <= set(state)
    assert set(state["rng"]) >= {"python", "numpy", "torch", "generators"} and "train" in state["rng"]["generators"]
    assert state["epoch"] == 1 and state["finished"] is True
    best = torch.load(result.run_dir / "checkpoints" / "best.pth", weights_only=True)
    assert best["kind"] == "best" and "optimizer" not in best


def test_sigterm_marks_the_run_interrupted_and_the_same_command_resumes(workspace, tmp_path):
    import time

    params = {**TINY_SASREC, "epochs": 6}
    reference = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    output = tmp_path / "cli-runs"
    command = [sys.executable, str(REPO / "run_experiments.py"), "--quiet", "--output", str(output),
               "--data-path", str(workspace.data_path), "--config-dir", str(workspace.config_dir),
               "--set", *[f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in params.items()]]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(output.rglob("last.pth")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)

    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    metrics = json.loads(next(output.rglob("metrics.json")).read_text())
    assert metrics["status"] == "interrupted"
    assert metrics["error"] == "interrupted; run the same command again to resume from last.pth"

    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    assert again.returncode == 0, again.stderr[-2000:]
    metrics = json.loads(next(output.rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok"
    assert metrics["test"] == reference.test and metrics["best_epoch"] == reference.best_epoch
    assert "Resumed from" in next(output.rglob("run.log")).read_text()


def test_an_interrupted_run_says_resume_only_where_a_checkpoint_exists():
    from recrunner.run.experiment import interrupted_message

    assert "resume from last.pth" in interrupted_message(True)
    assert "last.pth" not in interrupted_message(False) and "starts the run again" in interrupted_message(False)


def test_resume_from_a_given_checkpoint(workspace, tmp_path):
    from recrunner import Workspace

    params = {**TINY_BPR, "epochs": 3, "save_total_limit": 3}
    reference = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    epoch_0 = reference.run_dir / "checkpoints" / "epoch-0000.pth"

    other = Workspace(tmp_path / "elsewhere", workspace.data_path, workspace.config_dir)
    resumed = run_experiment(Experiment("BPR", "ml-100k", params), other, console=False, resume_from=epoch_0)

    assert f"Resumed from {epoch_0}" in (resumed.run_dir / "run.log").read_text()
    assert resumed.test == reference.test and resumed.best_epoch == reference.best_epoch


def test_a_knowledge_graph_model_resumes_exactly(workspace, tmp_path):
    """RecBole's KnowledgeBasedDataLoader is no DataLoader: the generators of the two loaders it holds
    went unsaved until 2026-11-27, so CKE, KGCN, MKR, KTUP and RippleNet resumed on other orders."""
    from recrunner import Workspace

    from .tiny_models import model_keys, tiny_params

    params = {**tiny_params("CKE", model_keys("CKE")), "epochs": 3, "save_total_limit": 3}
    reference = run_experiment(Experiment("CKE", "ml-100k", params), workspace, console=False)
    state = torch.load(reference.run_dir / "checkpoints" / "last.pth", weights_only=False)
    assert {"train", "train.kg"} <= set(state["rng"]["generators"])
    other = Workspace(tmp_path / "elsewhere", workspace.data_path, workspace.config_dir)
    resumed = run_experiment(Experiment("CKE", "ml-100k", params), other, console=False,
                             resume_from=reference.run_dir / "checkpoints" / "epoch-0000.pth")
    assert resumed.test == reference.test and resumed.best_epoch == reference.best_epoch


def test_the_generators_saved_are_every_loader_s_own():
    from torch.utils.data import DataLoader

    from recrunner.training.loop.trainer import _generators_of

    def loader():
        return DataLoader([0, 1], generator=torch.Generator())

    class KnowledgeBased:  # RecBole's: two loaders inside, no generator of its own
        general_dataloader, kg_dataloader = loader(), loader()

    plain, kg, valid = loader(), KnowledgeBased(), loader()
    assert _generators_of(train=plain, valid=valid) == {"train": plain.generator, "valid": valid.generator}
    assert _generators_of(train=kg, valid=None) == {"train": kg.general_dataloader.generator,
                                                    "train.kg": kg.kg_dataloader.generator}


def test_resume_from_best_pth_is_refused_before_anything_is_written(workspace, tmp_path):
    from recrunner import Workspace

    result = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    other = Workspace(tmp_path / "elsewhere", workspace.data_path, workspace.config_dir)
    with pytest.raises(ConfigError, match="--resume-from: .*holds weights only"):  # a usage error: exit 2
        run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), other, console=False,
                       resume_from=result.run_dir / "checkpoints" / "best.pth")
    assert not other.output_dir.exists()
