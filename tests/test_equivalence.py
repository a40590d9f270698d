"""CustomTrainer gives exactly the numbers of RecBole's own Trainer."""

import json

import pytest

from recrunner import Experiment, prepare, run_experiment

from .conftest import TINY_BPR, TINY_SASREC


def _plain_recbole(config):
    """RecBole's own loop: Trainer.fit, then evaluate(load_best_model=True), as run_recbole does."""
    from recbole.data import create_dataset, data_preparation
    from recbole.trainer import Trainer
    from recbole.utils import get_model, init_seed

    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"], config["reproducibility"])
    model = get_model(config["model"])(config, train_data._dataset).to(config["device"])
    trainer = Trainer(config, model)
    best_score, best_result = trainer.fit(train_data, valid_data, saved=True)
    test_result = dict(trainer.evaluate(test_data, load_best_model=True))
    return best_score, dict(best_result), test_result, len(trainer.train_loss_dict)


@pytest.mark.parametrize("model, params, epochs_trained", [
    ("SASRec", {**TINY_SASREC, "epochs": 3}, 3),
    ("BPR", {**TINY_BPR, "epochs": 4, "stopping_step": 1, "learning_rate": 0.01}, 4),
    # early stopping fires: recrunner's EarlyStopping callback stops where RecBole's stopping_step does
    ("BPR", {**TINY_BPR, "epochs": 30, "stopping_step": 0, "learning_rate": 0.05}, 6),
])
def test_custom_trainer_matches_recbole_trainer(model, params, epochs_trained, workspace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # RecBole's Trainer writes log_tensorboard/ and saved/ into the cwd
    # RecBole's own evaluate() calls torch.load without weights_only, which torch >= 2.6 refuses
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    prepared = prepare(Experiment(model, "ml-100k", params), workspace)
    prepared.config["checkpoint_dir"] = str(tmp_path / "plain-recbole")
    expected_score, expected_valid, expected_test, expected_epochs = _plain_recbole(prepared.config)

    result = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    assert result.status == "ok"
    assert result.best_valid == pytest.approx(expected_valid, abs=0)
    assert result.test == pytest.approx(expected_test, abs=0)
    assert max(result.best_valid.values()) > 0
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert metrics["epochs_trained"] == expected_epochs == epochs_trained

