"""CustomTrainer gives exactly the numbers of RecBole's own Trainer."""

import json

import pytest

from recrunner import Experiment, prepare, run_experiment
from recrunner.training.callbacks.history import read_history

from .conftest import LOSSES, TINY_BPR, TINY_SASREC
from .plain_recbole import run_plain_recbole




@pytest.mark.parametrize("model, params, epochs_trained", [
    ("SASRec", {**TINY_SASREC, "epochs": 3}, 3),
    ("BPR", {**TINY_BPR, "epochs": 4, "stopping_step": 1, "learning_rate": 0.01}, 4),
    # early stopping fires: recrunner's EarlyStopping callback stops where RecBole's stopping_step does
    ("BPR", {**TINY_BPR, "epochs": 30, "stopping_step": 0, "learning_rate": 0.05}, 6),
    # RecBole's autocast (bf16 on a CPU), clipping and progress bars: the same calls in loop/epoch.py
    ("BPR", {**TINY_BPR, "epochs": 2, "enable_amp": True, "clip_grad_norm": {"max_norm": 0.5}, "show_progress": True}, 2),
])
def test_custom_trainer_matches_recbole_trainer(model, params, epochs_trained, workspace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # RecBole's Trainer writes log_tensorboard/ and saved/ into the cwd
    # RecBole's own evaluate() calls torch.load without weights_only, which torch >= 2.6 refuses
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    prepared = prepare(Experiment(model, "ml-100k", params), workspace)
    prepared.config["checkpoint_dir"] = str(tmp_path / "plain-recbole")
    plain = run_plain_recbole(prepared.config)  # RecBole's Trainer.fit, then evaluate(load_best_model=True)
    expected_valid, expected_test, expected_epochs = plain["best_valid"], plain["test"], plain["epochs"]

    result = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    assert result.status == "ok"
    assert result.best_valid == pytest.approx(expected_valid, abs=0)
    assert result.test == pytest.approx(expected_test, abs=0)
    assert max(result.best_valid.values()) > 0
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["epochs_trained"] == expected_epochs == epochs_trained
    history = [line["loss"] for line in read_history(result.run_dir / "history.jsonl") if "loss" in line]
    assert history == pytest.approx(plain["losses"], **LOSSES)  # every epoch's loss, summed as RecBole sums it

