"""Every RecBole 1.2.1 model trains one tiny epoch under recrunner's loop (docs/models.md).

One parametrized case per model, on ml-100k users with 10-60 interactions at tiny sizes
(tests/tiny_models.py), all sharing one data cache. Each must end `ok` with a best.pth and a
last.pth that open with torch.load(weights_only=True), or be in EXPECTED_FAILURES with the
one-line reason recrunner gives before reading any data.
"""

import importlib

import pytest

from recrunner import Experiment, Workspace, run_experiment
from recrunner.training.checkpoints.files import load as load_checkpoint
from recrunner.core.errors import EnvironmentProblem
from recrunner.run.models import available_models

from .conftest import REPO
from .tiny_models import model_keys, tiny_params, write_ml100k_with_kg_embeddings

# model: (the package it cannot import here, why): kept short on purpose
EXPECTED_FAILURES = {
    "KGAT": ("dgl", "dgl's newest builds support torch up to 2.4; recrunner's torch is newer"),
}


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance")
    write_ml100k_with_kg_embeddings(root / "datasets")  # ml-100k plus .ent/.rel for KSR and GRU4RecKG
    return Workspace(output_dir=root / "runs", data_path=root / "datasets", config_dir=REPO / "configs")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except Exception:
        return False


def test_recbole_has_the_94_models_this_suite_covers():
    assert len(available_models()) == 94


@pytest.mark.parametrize("model", available_models())
def test_model_trains_an_epoch_with_checkpoints_and_test_metrics(model, shared_workspace):
    experiment = Experiment(model, "ml-100k", tiny_params(model, model_keys(model)))
    if model in EXPECTED_FAILURES and not _importable(EXPECTED_FAILURES[model][0]):
        with pytest.raises(EnvironmentProblem, match=f"{model} needs the package '{EXPECTED_FAILURES[model][0]}'"):
            run_experiment(experiment, shared_workspace, console=False)
        return
    result = run_experiment(experiment, shared_workspace, console=False)
    assert result.status == "ok", result.error
    assert result.test and all(value == value for value in result.test.values())  # no NaN
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pth")
    last = load_checkpoint(result.run_dir / "checkpoints" / "last.pth")
    assert best["kind"] == "best" and last["kind"] == "last" and last["finished"]
