"""Each built-in callback in real runs; each test fails when its callback is taken away."""

import json
import math
import sys
import types

import pytest
import torch

from recrunner import Callback, ConfigError, Experiment, RunInterrupted, prepare, run_experiment
from recrunner.training.callbacks.history import read_history

from .conftest import TINY_BPR, TINY_SASREC, read_hparams, read_scalars, trainer_and_data


def _metrics(result) -> dict:
    return json.loads((result.run_dir / "metrics.json").read_text())


def _lrs(result) -> list:
    return [round(value, 10) for _, value in read_scalars(result.run_dir)["Train/LR"]]


# ---------------------------------------------------------------- early stopping
def test_early_stopping_on_another_metric_with_min_delta(workspace):
    params = {**TINY_BPR, "epochs": 10, "stopping_step": 1, "early_stop_metric": "ndcg@10", "early_stop_min_delta": 1.0}
    result = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)

    assert result.status == "ok"
    assert _metrics(result)["epochs_trained"] == 3  # epoch 0 sets the best; no later gain is >= 1.0
    log = (result.run_dir / "run.log").read_text()
    assert "early stopping is one validation away: ndcg@10" in log
    assert "early stopping: ndcg@10 has not improved for 2 validations" in log
    assert "Finished training, best eval result in epoch" in log


def test_an_early_stop_metric_the_run_does_not_compute_is_refused_before_any_write(workspace):
    with pytest.raises(ConfigError, match="early_stop_metric 'auc' is not computed by this run; available: recall@10"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "early_stop_metric": "AUC"}), workspace, console=False)
    assert not workspace.output_dir.exists()


# ---------------------------------------------------------------- non-finite guard
DIVERGING_BPR = {**TINY_BPR, "learning_rate": 1e30}  # the embeddings overflow at the first step


def test_without_the_guard_a_diverged_run_would_pass_as_ok(workspace):
    result = run_experiment(Experiment("BPR", "ml-100k", {**DIVERGING_BPR, "nan_guard": False}), workspace,
                            console=False)
    # what the guard (on by default, test_experiment.py) prevents: NaN weights still rank items,
    # so the run would end "ok" with finite, meaningless metrics
    assert result.status == "ok"
    assert all(math.isnan(row["loss"]) for row in read_history(result.run_dir / "history.jsonl")[1:])


def test_a_guarded_diverging_run_fails_alone_in_a_sequence(workspace):
    diverged = run_experiment(Experiment("BPR", "ml-100k", DIVERGING_BPR), workspace, console=False)
    healthy = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)

    assert diverged.status == "failed" and "training loss became nan in epoch 0" in diverged.error
    assert read_hparams(diverged.run_dir)["status"] == "STATUS_FAILURE"
    assert healthy.status == "ok"


# ---------------------------------------------------------------- learning-rate schedule
def test_step_schedule_with_warmup_per_epoch_is_applied_logged_and_in_tensorboard(workspace):
    params = {**TINY_SASREC, "epochs": 4, "lr_scheduler": "step", "lr_step_size": 1, "lr_gamma": 0.5, "lr_warmup": 1}
    result = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)

    assert _lrs(result) == [0.0005, 0.001, 0.0005, 0.00025]
    assert [row.get("lr") for row in read_history(result.run_dir / "history.jsonl")[1:]] == _lrs(result)
    assert "learning rate 0.0005 -> 0.001 (epoch 1, step schedule)" in (result.run_dir / "run.log").read_text()


def test_without_a_schedule_the_rate_is_recboles_constant(workspace):
    result = run_experiment(Experiment("SASRec", "ml-100k", TINY_SASREC), workspace, console=False)
    assert _lrs(result) == [0.001, 0.001]


class _InterruptAfterEpoch(Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def on_checkpoint_saved(self, trainer, control, path, kind):
        if kind == "last" and trainer.epoch == self.epoch:
            raise RunInterrupted("test interruption")


def test_a_per_batch_cosine_schedule_resumes_where_it_stopped(workspace, tmp_path):
    from recrunner import Workspace

    params = {**TINY_SASREC, "epochs": 4, "lr_scheduler": "cosine", "lr_interval": "batch", "lr_warmup": 3,
              "lr_min": 1e-5}
    reference = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)

    other = Workspace(tmp_path / "interrupted", workspace.data_path, workspace.config_dir)
    with pytest.raises(RunInterrupted):
        run_experiment(Experiment("SASRec", "ml-100k", params), other, console=False,
                       callbacks=[_InterruptAfterEpoch(1)])
    saved = torch.load(next(other.output_dir.rglob("last.pth")), weights_only=True)["callbacks"]
    assert saved["LRScheduler"]["steps"] == 14  # 7 batches x 2; saved under its state_key
    resumed = run_experiment(Experiment("SASRec", "ml-100k", params), other, console=False)

    assert _lrs(resumed) == _lrs(reference) and len(set(_lrs(reference))) == 4
    assert resumed.test == reference.test


def test_a_bad_schedule_setting_is_one_clear_error(workspace):
    with pytest.raises(ConfigError, match="lr_scheduler 'linear' is not one of constant, step, cosine, plateau"):
        prepare(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "lr_scheduler": "linear"}), workspace)


# ---------------------------------------------------------------- history file
class _InterruptAtEpochEnd(Callback):
    """Stops after the history line of `epoch` is written but before its last.pth is."""
    order = 99

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, trainer, control):
        if trainer.epoch == self.epoch:
            raise RunInterrupted("test interruption")


def test_history_has_one_line_per_epoch_and_none_twice_after_a_resume(workspace):
    params = {**TINY_SASREC, "epochs": 3}
    with pytest.raises(RunInterrupted):
        run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False,
                       callbacks=[_InterruptAtEpochEnd(1)])
    history = next(workspace.output_dir.rglob("history.jsonl"))
    assert [row["epoch"] for row in read_history(history)] == [-1, 0, 1]  # epoch 1 will be trained again
    result = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)

    rows = read_history(result.run_dir / "history.jsonl")
    assert [row["epoch"] for row in rows] == [-1, 0, 1, 2]
    assert set(rows[0]["valid"]) == set(result.best_valid)
    assert {"loss", "lr", "score", "valid", "best_epoch", "seconds", "train_seconds", "time"} <= set(rows[1])
    assert 0 < rows[1]["train_seconds"] <= rows[1]["seconds"]  # the epoch's training, within the whole epoch
    assert rows[-1]["best_epoch"] == result.best_epoch
    assert rows[result.best_epoch + 1]["valid"] == pytest.approx(result.best_valid)


# ---------------------------------------------------------------- trackers
class _FakeMLflow(types.ModuleType):
    def __init__(self):
        super().__init__("mlflow")
        self.calls = []
        for name in ("set_tracking_uri", "set_experiment", "start_run", "log_params", "log_metrics", "end_run"):
            setattr(self, name, lambda *args, _name=name, **kwargs: self.calls.append((_name, args, kwargs)))
        self.__spec__ = types.SimpleNamespace(name="mlflow")


def test_mlflow_tracker_logs_params_every_metric_and_the_final_status(workspace, monkeypatch):
    fake = _FakeMLflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "mlflow" else real_find_spec(name, *a))
    result = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "trackers": ["mlflow"]}), workspace,
                            console=False)

    assert result.status == "ok"
    names = [name for name, _, _ in fake.calls]
    assert names[:3] == ["set_tracking_uri", "start_run", "log_params"] and names[-1] == "end_run"
    assert fake.calls[0][1][0] == (workspace.output_dir / "default" / "mlruns").as_uri()
    assert fake.calls[2][1][0]["model"] == "BPR"
    logged = {key for name, args, _ in fake.calls if name == "log_metrics" for key in args[0]}
    assert {"Train/Loss", "Train/LR", "Valid/recall_at_10", "Best_Valid/ndcg_at_10", "Test/hit_at_10"} <= logged
    assert fake.calls[-1][2] == {"status": "FINISHED"}
    # TensorBoard is a logger like it: the same scalars at the same steps (epoch -1 included)
    from recrunner.training.callbacks.trackers import _mlflow_name

    sent = {(key, kwargs["step"]): value for name, args, kwargs in fake.calls if name == "log_metrics"
            for key, value in args[0].items()}
    board = {(_mlflow_name(tag), step): value for tag, points in read_scalars(result.run_dir).items()
             for step, value in points}
    assert sent.keys() == board.keys() and ("Valid/ndcg_at_10", -1) in sent
    assert all(sent[key] == pytest.approx(board[key], rel=1e-6) for key in sent)


class _FakeWandb(types.ModuleType):
    """wandb's surface that RecBole's WandbLogger and recrunner's use: every call recorded."""

    def __init__(self):
        super().__init__("wandb")
        self.calls, self.runs = [], 0
        self.__spec__ = types.SimpleNamespace(name="wandb")

    def init(self, **kwargs):
        self.runs += 1
        calls = self.calls
        summary = types.SimpleNamespace(update=lambda metrics: calls.append(("summary", metrics)))
        return types.SimpleNamespace(log=lambda metrics, step=None: calls.append(("log", metrics, step)),
                                     finish=lambda exit_code=0: calls.append(("finish", exit_code)),
                                     summary=summary, define_metric=lambda *a, **k: None)

    def __getattr__(self, name):  # RecBole's logger: wandb.log, wandb.run, wandb.define_metric ...
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((f"wandb.{name}", args, kwargs))


def test_log_wandb_writes_weights_and_biases_through_one_path(workspace, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "wandb" else real_find_spec(name, *a))
    result = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "log_wandb": True}), workspace, console=False)

    assert result.status == "ok"
    assert fake.runs == 1  # one W&B run, recrunner's WandbLogger's
    assert [c for c in fake.calls if c[0].startswith("wandb.")] == []  # RecBole's own logger wrote nothing
    logged = [c[1] for c in fake.calls if c[0] == "log"]
    assert sum("Train/Loss" in metrics for metrics in logged) == 2  # one per epoch, not twice
    assert fake.calls[-1] == ("finish", 0)


def test_a_tracker_that_is_not_installed_is_a_config_error_naming_the_extra(workspace):
    with pytest.raises(ConfigError, match=r"trackers: wandb is not installed; pip install 'recrunner\[wandb\]'"):
        prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "trackers": ["wandb"]}), workspace)
    assert "wandb" not in sys.modules


# ---------------------------------------------------------------- clipping and accumulation
def _trainer_and_data(workspace, model_name, params, callbacks=()):
    return trainer_and_data(workspace, model_name, params, callbacks)[:3]

def _movement_after_one_epoch(workspace, params):
    trainer, train, valid = _trainer_and_data(workspace, "BPR", {**TINY_BPR, "epochs": 1, "learner": "sgd", **params})
    before = torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters()])
    trainer.fit(train, None, verbose=False, saved=False)
    after = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    return (after - before).norm().item(), len(train), trainer


@pytest.mark.parametrize("accumulate", [1, 2])
def test_clip_grad_norm_bounds_every_step(workspace, accumulate):
    # SGD moves the weights by learning_rate * |clipped gradient| <= 1.0 * 1e-4 per optimizer step
    free, _, _ = _movement_after_one_epoch(workspace, {"learning_rate": 1.0, "gradient_accumulation_steps": accumulate})
    clipped, batches, trainer = _movement_after_one_epoch(workspace, {
        "learning_rate": 1.0, "clip_grad_norm": {"max_norm": 1e-4}, "gradient_accumulation_steps": accumulate})
    steps = math.ceil(batches / accumulate)
    assert trainer.steps_per_epoch == steps
    assert clipped <= steps * 1e-4 * (1 + 1e-4)
    assert free > 10 * steps * 1e-4


def test_gradient_accumulation_equals_the_larger_batch(workspace):
    params = {**TINY_SASREC, "epochs": 1, "hidden_dropout_prob": 0.0, "attn_dropout_prob": 0.0}
    _, train, _ = _trainer_and_data(workspace, "SASRec", params)
    rows = len(train.dataset)
    parts = next(d for d in range(2, 64) if rows % d == 0)  # equal micro-batches: the mean of means is the mean

    whole, train, _ = _trainer_and_data(workspace, "SASRec", {**params, "train_batch_size": rows})
    whole.fit(train, None, verbose=False, saved=False)
    split, train, _ = _trainer_and_data(workspace, "SASRec", {
        **params, "train_batch_size": rows // parts, "gradient_accumulation_steps": parts})
    split.fit(train, None, verbose=False, saved=False)

    assert split.optimizer.optimizer_steps == 1 and len(train) == parts
    for name, value in whole.model.state_dict().items():
        assert torch.allclose(value, split.model.state_dict()[name], atol=1e-5), name


# ---------------------------------------------------------------- progress within an epoch
def test_a_run_off_a_terminal_logs_progress_within_its_epochs(workspace):
    result = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "train_batch_size": 512, "progress_every": 0}),
                            workspace, console=False)
    log = (result.run_dir / "run.log").read_text()
    assert result.status == "ok"
    assert "epoch 0/2: batch 1/" in log and "epoch 1/2: batch" in log and "run left ≤" in log
