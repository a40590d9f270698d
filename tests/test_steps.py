"""Step schedules (recrunner.training.loop.steps): validate, checkpoint and log within epochs, and a run
stopped at any batch resumes at its last step checkpoint exactly."""

import json
import random
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from recrunner import Experiment, Workspace, run_experiment
from recrunner.config.checks import impossible_values
from recrunner.run.convergence import under_trained
from recrunner.training.callbacks.history import read_history
from recrunner.training.callbacks.progress import progress_line
from recrunner.training.callbacks.pruning import _trained
from recrunner.training.loop.steps import StepSchedule, steps_in

from .conftest import LOSSES, REPO, TINY_BPR, TINY_SASREC, read_scalars

BATCH = {"train_batch_size": 256}  # ml-100k [10,60]: 51 BPR batches per epoch


# ---------------------------------------------------------------- decisions (pure)
def test_step_schedule_decisions():
    schedule = StepSchedule(eval_every=4, checkpoint_every=3, checkpoint_minutes=2.0, log_every=5)
    assert [s for s in range(13) if schedule.validate_at(s)] == [4, 8, 12]
    assert [s for s in range(13) if schedule.log_at(s)] == [5, 10]
    assert [s for s in range(10) if schedule.checkpoint_at(s, 0.0)] == [3, 6, 9]
    assert schedule.checkpoint_at(1, 120.0) and not schedule.checkpoint_at(1, 119.9)
    assert schedule.active and not StepSchedule().active
    assert not StepSchedule().validate_at(4) and not StepSchedule().checkpoint_at(4, 1e9)


def test_steps_count_optimizer_steps_with_a_last_short_group():
    assert steps_in(51, 1) == 51 and steps_in(51, 3) == 17 and steps_in(52, 3) == 18 and steps_in(0, 3) == 0


def test_impossible_step_values_are_refused():
    problems = impossible_values({"eval_every_steps": 2.5, "log_every_steps": "often", "checkpoint_every_steps": 0,
                                  "checkpoint_every_minutes": -1})
    assert len(problems) == 4 and "eval_every_steps counts optimizer steps" in problems[0]
    assert impossible_values({"eval_every_steps": [100, 500], "checkpoint_every_minutes": 0.5}) == []


def test_under_trained_reads_step_validations():
    flagged = under_trained(best_epoch=1, epochs_trained=2, max_epochs=5, stopped_early=True, best_step=90,
                            validated_step=90)
    assert "its best validation (step 90) is the last it ran" in flagged
    assert under_trained(best_epoch=1, epochs_trained=2, max_epochs=5, stopped_early=True, best_step=60,
                         validated_step=90) is None


def test_progress_line_shows_the_step_and_the_next_validation():
    line = progress_line(1, 3, 60, 100, 10.0, None, trained=20, step=160, next_validation=40)
    assert line == "epoch 1/3: batch 60/100 (60%), step 160, 2.00 batch/s, epoch left 20s, next validation in 20s"


def test_a_pruner_counts_steps_where_the_run_validates_by_steps():
    by_steps = SimpleNamespace(eval_every_steps=50, global_step=150, epoch=1)
    by_epochs = SimpleNamespace(eval_every_steps=None, global_step=150, epoch=1)
    assert _trained(by_steps) == 150 and _trained(by_epochs) == 2


# ---------------------------------------------------------------- real runs
def _run(workspace, model, params):
    base = TINY_SASREC if model == "SASRec" else TINY_BPR
    return run_experiment(Experiment(model, "ml-100k", {**base, **BATCH, **params}), workspace, console=False)


def test_step_validation_counts_patience_in_validations_and_stops_within_the_epoch(workspace):
    # nothing improves by 1.0: the first validation is the best, the third (patience 1 + 1) stops the run
    result = _run(workspace, "BPR", {"epochs": 3, "eval_every_steps": 10, "stopping_step": 1,
                                     "early_stop_min_delta": 1.0})
    record = json.loads((result.run_dir / "metrics.json").read_text())
    validations = [line for line in read_history(result.run_dir / "history.jsonl") if "step" in line and "valid" in line]
    assert [line["step"] for line in validations] == [10, 20, 30]
    assert record["stopped_early"] and record["epochs_trained"] == 1
    assert record["best_step"] == validations[-1]["best_step"]  # best.pth follows valid_metric, without min_delta
    epoch_line = read_history(result.run_dir / "history.jsonl")[-1]
    assert epoch_line["epoch"] == 0 and epoch_line["step"] == 30 and "valid" not in epoch_line


def test_history_tensorboard_and_best_pth_agree_on_the_best_step(workspace):
    result = _run(workspace, "BPR", {"epochs": 2, "learning_rate": 0.01, "eval_every_steps": 15, "log_every_steps": 5})
    history = read_history(result.run_dir / "history.jsonl")
    validations = [line for line in history if "step" in line and "valid" in line]
    assert [line["step"] for line in validations] == [15, 30, 45, 60, 75, 90, 102]  # and after the last step
    best = max(validations, key=lambda line: (line["score"], line["step"]))  # a tie counts as better, as RecBole
    record = json.loads((result.run_dir / "metrics.json").read_text())
    saved = torch.load(result.run_dir / "checkpoints" / "best.pth", weights_only=True)
    assert record["best_step"] == saved["step"] == best["step"] == validations[-1]["best_step"]
    assert record["best_epoch"] == saved["epoch"] == best["epoch"]
    scalars, step_scalars = read_scalars(result.run_dir), read_scalars(result.run_dir / "steps")
    step_axis = dict(step_scalars["Valid-step/score"])
    assert sorted(step_axis) == [line["step"] for line in validations]
    assert step_axis[best["step"]] == pytest.approx(best["score"])
    # the epoch axis: epoch -1, then each epoch's newest validation
    assert [step for step, _ in scalars["Valid/score"]] == [-1, 0, 1]
    assert dict(scalars["Valid/score"])[0] == pytest.approx(validations[2]["score"])
    assert [step for step, _ in step_scalars["Train-step/Loss"]] == list(range(5, 103, 5))
    assert not [tag for tag in scalars if "-step/" in tag]  # the epoch axis's folder has none


def test_validating_by_steps_never_changes_what_is_trained(workspace, tmp_path):
    plain = _run(workspace, "SASRec", {"epochs": 2})
    other = Workspace(tmp_path / "by-steps", workspace.data_path, workspace.config_dir)
    stepped = _run(other, "SASRec", {"epochs": 2, "eval_every_steps": 40, "checkpoint_every_steps": 25})
    losses = lambda r: [line["loss"] for line in read_history(r.run_dir / "history.jsonl") if "loss" in line]
    assert losses(plain) == losses(stepped) and len(losses(plain)) == 2
    plain_record = json.loads((plain.run_dir / "metrics.json").read_text())
    assert "best_step" not in plain_record  # unset keys: the files are as before
    assert not (plain.run_dir / "steps").exists()


# Runs one experiment and sends itself a signal at its N-th training batch (counted in this process)
STOPPER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from recrunner import Callback, Experiment, Workspace, run_experiment

    spec = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal: CI may start us with it ignored

    class SignalAtBatch(Callback):
        seen = 0
        def on_train_batch(self, loop, control, batch):
            SignalAtBatch.seen += 1
            if SignalAtBatch.seen == spec["batch"]:
                os.kill(os.getpid(), getattr(signal, spec["signal"]))

    ws = Workspace(Path(spec["output"]), Path(spec["data"]), Path(spec["configs"]))
    run_experiment(Experiment(spec["model"], "ml-100k", spec["params"]), ws, console=False, callbacks=[SignalAtBatch()])
""")


def _stopped_run(workspace, model, params, batch, sig):
    spec = {"model": model, "params": params, "batch": batch, "signal": sig, "output": str(workspace.output_dir),
            "data": str(workspace.data_path), "configs": str(workspace.config_dir)}
    return subprocess.run([sys.executable, "-c", STOPPER, json.dumps(spec)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def _same_run(reference, resumed, stepped=True):
    assert resumed.status == "ok" and resumed.test == reference.test and resumed.best_valid == reference.best_valid
    strip = lambda r: [{k: v for k, v in line.items() if k not in ("time", "seconds", "train_seconds")}
                       for line in read_history(r.run_dir / "history.jsonl")]
    assert _same(strip(resumed), strip(reference))
    for tag in ("Valid/score", "Train/Loss", "Train/LR"):
        assert _same(read_scalars(resumed.run_dir)[tag], read_scalars(reference.run_dir)[tag])
    if stepped:  # the step axis: the killed process's points up to its checkpoint, then the resumed one's
        assert _same(read_scalars(resumed.run_dir / "steps"), read_scalars(reference.run_dir / "steps"))


def _same(got, expected) -> bool:
    """Equal, floats to `LOSSES` (bit for bit on a CPU; a GPU's atomic adds differ in the last bits)."""
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(_same(got[k], expected[k]) for k in expected)
    if isinstance(expected, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(expected) and all(map(_same, got, expected))
    if isinstance(expected, float):
        return got == pytest.approx(expected, **LOSSES)
    return got == expected


@pytest.mark.parametrize("model, extra", [
    ("SASRec", {"lr_scheduler": "cosine", "lr_interval": "batch"}),  # the per-step LR schedule resumes too
    ("BPR", {"gradient_accumulation_steps": 3}),                      # a step is 3 batches
    ("BPR", {"read_loss_every": 5, "log_every_steps": 2}),             # losses read in groups (loop/losses.py)
    ("BPR", {"fast": True, "fast_negatives": "torch"}),                # negatives from torch's generator (seams/negatives.py)
])
def test_a_run_killed_at_a_random_batch_resumes_at_its_step_checkpoint_exactly(model, extra, workspace, tmp_path):
    base = TINY_SASREC if model == "SASRec" else TINY_BPR
    params = {**base, **BATCH, "epochs": 2, "learning_rate": 0.01, "eval_every_steps": 10, "checkpoint_every_steps": 3,
              **extra}
    reference = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)
    history = read_history(reference.run_dir / "history.jsonl")
    steps = next(line["step"] for line in history if "loss" in line)  # optimizer steps per epoch
    group = extra.get("gradient_accumulation_steps", 1)  # ml-100k [10,60]: 51 BPR batches, 17 steps of 3
    kill_at = random.Random(model).randint(int(1.2 * steps * group), int(1.9 * steps * group))  # late, in epoch 1

    killed = Workspace(tmp_path / "killed", workspace.data_path, workspace.config_dir)
    assert _stopped_run(killed, model, params, kill_at, "SIGKILL").returncode == -signal.SIGKILL
    state = torch.load(next(killed.output_dir.rglob("last.pth")), weights_only=True)
    assert state["epoch"] == 0 and state["global_step"] % 3 == 0 and state["global_step"] > steps
    assert state["batch_in_epoch"] == (state["global_step"] - steps) * group
    killed_batch = kill_at - 1  # 0-based, counted over both epochs; its step never ended
    assert killed_batch - 3 * group < steps * group + state["batch_in_epoch"] <= killed_batch  # the checkpoint before it

    resumed = run_experiment(Experiment(model, "ml-100k", params), killed, console=False)
    _same_run(reference, resumed)
    assert f"continuing within epoch 1 at batch {state['batch_in_epoch']}" in (resumed.run_dir / "run.log").read_text()


@pytest.mark.parametrize("signal_at, saved_at", [
    (51 + 20, (0, 20)),  # while the 20th batch of epoch 1 trains: saved once its step ended, at batch 20
    (51, (-1, 51)),      # while epoch 0's last batch trains: saved after it, the epoch's end still to do
])
def test_ctrl_c_within_an_epoch_saves_at_that_step_and_the_run_resumes_exactly(signal_at, saved_at, workspace,
                                                                               tmp_path):
    params = {**TINY_BPR, **BATCH, "epochs": 2}  # no step keys: a stop still keeps the epoch's progress
    reference = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)

    stopped = Workspace(tmp_path / "stopped", workspace.data_path, workspace.config_dir)
    proc = _stopped_run(stopped, "BPR", params, signal_at, "SIGINT")
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    record = json.loads(next(stopped.output_dir.rglob("metrics.json")).read_text())
    state = torch.load(next(stopped.output_dir.rglob("last.pth")), weights_only=True)
    assert record["status"] == "interrupted" and (state["epoch"], state["batch_in_epoch"]) == saved_at

    _same_run(reference, run_experiment(Experiment("BPR", "ml-100k", params), stopped, console=False), stepped=False)


def test_a_model_fitted_in_one_pass_says_step_schedules_act_at_epoch_ends(workspace):
    result = run_experiment(Experiment("Pop", "ml-100k", {"eval_every_steps": 5, "checkpoint_every_steps": 5}),
                            workspace, console=False)
    log = (result.run_dir / "run.log").read_text()
    assert result.status == "ok"
    assert "step schedules: Pop is fitted in one pass; eval_every_steps" in log and "act at epoch ends only" in log


def test_a_held_stop_waits_for_the_boundary_and_a_second_one_does_not():
    from recrunner.core.interrupts import HeldStops

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal (CI may ignore it)
    try:
        _held_stops(HeldStops)
    finally:
        signal.signal(signal.SIGINT, previous)


def _held_stops(HeldStops):
    import os

    with pytest.raises(KeyboardInterrupt):
        with HeldStops() as stops:
            os.kill(os.getpid(), signal.SIGINT)
            assert stops.pending == signal.SIGINT  # held: the batch in progress finishes its step
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # and the handler is back
    with pytest.raises(KeyboardInterrupt):
        with HeldStops():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C stops at once
            pytest.fail("a second stop was held too")
