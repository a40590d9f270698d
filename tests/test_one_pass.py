"""Models RecBole fits in one pass (config/one_pass.py): which they are, that the settings a sweep leaves
out of their cells change nothing in their numbers, and Pop's counts (seams/models.py)."""

import json
import warnings

import pytest
import torch

from recrunner import Experiment, run_experiment
from recrunner.config.one_pass import (FITTED_ANEW, nothing_to_tune, one_pass_classes, one_pass_models, tree_models,
                                       unread_settings)
from recrunner.run.models import model_caveat
from recrunner.seams.models import count_every_interaction

from .conftest import Unmixable
from .tiny_models import DATA

SMALL = {key: DATA[key] for key in ("epochs", "user_inter_num_interval", "eval_batch_size")}


def test_the_models_recbole_fits_in_one_pass_are_read_from_its_source():
    assert one_pass_models() == {"ADMMSLIM", "AsymKNN", "EASE", "ItemKNN", "LightGBM", "NCEPLRec", "Pop", "Random",
                                 "SLIMElastic"}
    assert tree_models() == {"LightGBM", "XGBoost"}
    source = ("class A(B):\n    input_type = X\n    type = ModelType.TRADITIONAL\n\n"
              "class C(B):\n    type = ModelType.GENERAL\n# ModelType.TRADITIONAL in a comment\n"
              "class D(B):\n    def calculate_loss(self, interaction):\n        return torch.nn.Parameter(torch.zeros(1))\n"
              "class E(B):\n    def calculate_loss(self, interaction):\n        x = 1\n"
              "        return torch.nn.Parameter(torch.zeros(1))\n")
    assert one_pass_classes(source) == ["A", "D"]
    assert {"learning_rate", "train_batch_size", "epochs"} <= unread_settings("ItemKNN")
    assert "eval_step" not in unread_settings("ItemKNN")  # above 1 it skips the one epoch's validation
    assert "train_batch_size" not in unread_settings("Pop") and "learning_rate" in unread_settings("Pop")
    assert unread_settings("BPR") == frozenset()
    assert {"learning_rate", "train_batch_size", "weight_decay"} <= unread_settings("XGBoost")  # its rate: xgb_params
    assert not {"epochs", "stopping_step"} & unread_settings("XGBoost")  # it boosts on from the last epoch's trees
    assert "epochs" in unread_settings("LightGBM")
    assert [nothing_to_tune(m) for m in ("Pop", "Random", "ItemKNN", "EASE", "BPR")] == [True, True, False, False, False]


def test_nceplrec_fitted_while_built_trains_one_epoch_not_all_its_epochs(workspace):
    """RecBole's Trainer would run every epoch: its validation ties, so early stopping never ends it."""
    result = run_experiment(Experiment("NCEPLRec", "ml-100k", {**SMALL, "epochs": 20, "stopping_step": 2}), workspace,
                            console=False)
    record = json.loads((result.run_dir / "metrics.json").read_text())
    assert (result.status, record["epochs_trained"], record["best_epoch"], record["under_trained"]) == ("ok", 1, 0, None)


def test_lightgbm_is_fitted_anew_each_epoch_by_recboles_trainer():
    """The fact FITTED_ANEW rests on: RecBole's LightGBMTrainer trains without the last epoch's booster
    (its XGBoostTrainer passes xgb_model=self.boost_model and continues)."""
    import inspect

    from recbole.trainer.trainer import LightGBMTrainer, XGBoostTrainer

    assert FITTED_ANEW == {"LightGBM"}
    assert "init_model" not in inspect.getsource(LightGBMTrainer._train_at_once)
    assert "xgb_model=self.boost_model" in inspect.getsource(XGBoostTrainer._train_at_once).replace(" ", "")


def test_lightgbm_trains_one_epoch_not_all_its_epochs(workspace, capfd):
    """Every epoch would fit the same booster: its validation ties, so early stopping never ends it."""
    pytest.importorskip("lightgbm")
    params = {**SMALL, "epochs": 20, "stopping_step": 2, "lgb_num_boost_round": 10}
    result = run_experiment(Experiment("LightGBM", "ml-100k", params), workspace, console=False)
    record = json.loads((result.run_dir / "metrics.json").read_text())
    assert (result.status, record["epochs_trained"], record["best_epoch"], record["under_trained"]) == ("ok", 1, 0, None)
    # its own lines (written from C++) are log records: in run.log, not on a console the run has not got
    assert "[LightGBM] [Info]" not in capfd.readouterr().out
    assert "INFO  [LightGBM] [Info] Number of positive" in (result.run_dir / "run.log").read_text()


def test_xgboost_reads_none_of_the_gradient_settings_a_grid_leaves_out_of_its_cells(workspace, capsys):
    pytest.importorskip("xgboost")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        first, _ = _test_metrics(workspace, "XGBoost", xgb_num_boost_round=10, epochs=2, learning_rate=0.1,
                                 train_batch_size=512, weight_decay=0.1)
    # its booster between epochs has its format's extension (xgboost warned twice an epoch about booster.tmp),
    # and RecBole's evals by position are quiet (seams/environment.py)
    assert not [w for w in caught if "Unknown file format" in str(w.message) or "UBJSON" in str(w.message)
                or "Pass `evals`" in str(w.message)]
    assert "train-auc" not in capsys.readouterr().out  # its evaluation lines are log records (run.log)
    second, _ = _test_metrics(workspace, "XGBoost", xgb_num_boost_round=10, epochs=2, learning_rate=0.001,
                              train_batch_size=4096, learner="sgd")
    assert first == second
    third, _ = _test_metrics(workspace, "XGBoost", xgb_num_boost_round=10, epochs=1)
    assert third != first  # its epochs count: it boosts on


def _test_metrics(workspace, model, **params):
    result = run_experiment(Experiment(model, "ml-100k", {**SMALL, **params}), workspace, console=False)
    assert result.status == "ok", result.error
    return result.test, result.warnings


@pytest.mark.parametrize("model", ["ItemKNN", "EASE"])
def test_the_settings_left_out_of_a_one_pass_models_cells_change_nothing_in_its_numbers(workspace, model):
    first, _ = _test_metrics(workspace, model, learning_rate=0.1, train_batch_size=512, weight_decay=0.1, epochs=3)
    second, _ = _test_metrics(workspace, model, learning_rate=0.001, train_batch_size=4096, learner="sgd")
    assert first == second


def test_pop_counts_an_item_once_per_batch_as_recbole_does_unless_asked_to_count_every_interaction(workspace):
    small, warned = _test_metrics(workspace, "Pop", train_batch_size=512)
    large, _ = _test_metrics(workspace, "Pop", train_batch_size=4096)
    assert small != large  # RecBole 1.2.1's Pop (its issue #1844): so a grid keeps Pop's train_batch_size
    assert any("counted each item once per training batch it is in" in warning and "(512)" in warning
               for warning in warned)
    small, warned = _test_metrics(workspace, "Pop", train_batch_size=512, pop_counts="interactions")
    large, _ = _test_metrics(workspace, "Pop", train_batch_size=4096, pop_counts="interactions")
    assert small == large and small["recall@10"] > 0
    assert not any("once per training batch" in warning for warning in warned)


class _Pop:
    """What count_every_interaction reads of RecBole's Pop."""
    ITEM_ID, device = "item_id", "cpu"

    def __init__(self, items: int):
        self.item_cnt, self.max_cnt = torch.zeros(items, 1, dtype=torch.long), None


def test_counting_every_interaction_counts_repeated_items_and_no_sampled_negative():
    pop = _Pop(5)
    count_every_interaction(pop, label="label")
    pop.calculate_loss({"item_id": torch.tensor([1, 1, 2, 3, 3, 3]), "label": torch.tensor([1, 1, 1, 0, 1, 1])})
    pop.calculate_loss({"item_id": torch.tensor([1, 4])})  # no label: every row is an interaction
    assert pop.item_cnt.squeeze(1).tolist() == [0, 3, 1, 2, 1] and pop.max_cnt.tolist() == [3]


def test_counting_every_interaction_stays_where_the_batch_is():
    """On a GPU Pop's counts and the batch are there: nothing is read back to the host or mixed with a CPU
    tensor (`Unmixable` refuses both, as a CUDA tensor does)."""
    pop = _Pop(5)
    pop.item_cnt = pop.item_cnt.as_subclass(Unmixable)
    count_every_interaction(pop, label="label")
    pop.calculate_loss({"item_id": torch.tensor([1, 1, 2, 3]).as_subclass(Unmixable),
                        "label": torch.tensor([1, 1, 1, 0]).as_subclass(Unmixable)})
    assert isinstance(pop.item_cnt, Unmixable) and pop.item_cnt.cpu().squeeze(1).tolist() == [0, 2, 1, 0, 0]


def test_only_pop_counting_per_batch_has_a_caveat():
    assert "train_batch_size (2048)" in model_caveat("Pop", {"pop_counts": None, "train_batch_size": 2048})
    assert model_caveat("Pop", {"pop_counts": "interactions", "train_batch_size": 2048}) is None
    assert model_caveat("BPR", {"pop_counts": None, "train_batch_size": 2048}) is None


def test_a_models_caveat_is_listed_once_under_the_sweeps_tables():
    from recrunner.sweep.results import results_markdown

    caveat = model_caveat("Pop", {"pop_counts": "batches", "train_batch_size": 2048})
    rows = [{"cell": f"d/Pop/seed={seed}", "model": "Pop", "dataset": "d", "seed": seed, "status": "ok", "caveat": caveat,
             "best_valid_score": 0.1, "valid_metric": "mrr@10", "test/mrr@10": 0.2} for seed in (1, 2)]
    text = results_markdown(rows, ["learning_rate", "seed"], "sweep")  # Pop's cells do not set learning_rate
    assert text.count(f"- Pop: {caveat}") == 1 and "## model caveats" in text
    assert "| Pop | d | – | 1, 2 | – |" in text  # its chosen configuration: no value, not "None"
    assert "## model caveats" not in results_markdown([{**row, "caveat": None} for row in rows], ["seed"], "sweep")
