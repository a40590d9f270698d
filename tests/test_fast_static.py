"""Fast mode's `fast_static_shapes`: each epoch's last, shorter training batch dropped (seams/batch_order.py),
the loss compiled for its one shape (training/fast/apply.py), said in the plan and kept by resume."""

import pytest
import torch

from recrunner import Experiment, run_experiment
from recrunner.core.errors import ConfigError
from recrunner.seams.batch_order import EpochOrder, drop_last_batch
from recrunner.training.fast import apply
from recrunner.training.fast.data import static_choice
from recrunner.training.fast.plan import FastPlan, choose, plan_text, same_plan_key
from tests.conftest import TINY_SASREC
from tests.test_resume import killed_and_resumed, same_result


def test_static_shapes_are_asked_for_and_said():
    assert static_choice("auto") == (False, "") and static_choice(False) == (False, "")
    assert static_choice(True)[0] and "last, shorter training batch dropped" in static_choice(True)[1]
    with pytest.raises(ConfigError, match="fast_static_shapes must be auto, true or false, got 'yes'"):
        static_choice("yes")
    plan = choose(compile=True, model="SASRec", static=True)
    assert plan.static_shapes and plan.settings().endswith("last batch dropped") and "static shapes" in plan.reason
    exact = choose(model="BPR", static=True)  # a model run exactly on a CPU still trains without its last batch
    assert exact.static_shapes and not exact.changes_nothing
    assert not choose(compile=True, model="SASRec").static_shapes  # auto: off
    key = same_plan_key(plan.as_dict())
    assert key != same_plan_key({**plan.as_dict(), "static_shapes": False}) and plan_text(key).endswith("last batch dropped)")
    assert FastPlan.stored({"precision": "bf16", "compile": True}).static_shapes is False  # a plan saved before


@pytest.mark.parametrize("rows, batch, batches, dropped", [(10, 4, 2, 2), (8, 4, 2, 0), (3, 4, 1, 0)])
def test_the_last_shorter_batch_is_left_out_and_the_generator_draws_as_before(rows, batch, batches, dropped):
    kept, left = EpochOrder(rows, batch, torch.Generator().manual_seed(7)), \
        EpochOrder(rows, batch, torch.Generator().manual_seed(7), drop_last=True)
    all_of, some_of = list(kept), list(left)
    assert len(left) == len(some_of) == batches and left.dropped == dropped  # never an epoch without a batch
    assert all(torch.equal(a, b) for a, b in zip(some_of, all_of)) and sum(map(len, some_of)) == rows - dropped
    assert torch.equal(kept.generator.get_state(), left.generator.get_state())


def test_what_was_dropped_is_said_in_one_line():
    loader = type("Loader", (), {})()
    assert "draws its own batches" in drop_last_batch(loader)
    for rows, said in ((10, "2 of 10 rows"), (8, "none is dropped"), (3, "one batch, shorter than 4; kept")):
        loader.sampler = EpochOrder(rows, 4, None)
        assert said in drop_last_batch(loader) and loader.sampler.drop_last


def test_the_loss_is_compiled_for_its_one_shape_and_scoring_for_every_shape(monkeypatch):
    asked = []
    monkeypatch.setattr(torch, "compile", lambda method, **options: asked.append(options["dynamic"]) or method)
    for static in (False, True):
        plan = FastPlan("fp32", compile=True, static_shapes=static)
        apply.FastMethod(lambda: None, plan, scoring=False)
        apply.FastMethod(lambda: None, plan, scoring=True)
    assert asked == [True, True, None, True]  # None: torch's static shapes, dynamic only if another shape comes


def test_a_run_without_its_last_batches_trains_fewer_rows_and_resumes_exactly(workspace, tmp_path):
    params = {**TINY_SASREC, "epochs": 3, "fast": True, "fast_compile": False, "fast_static_shapes": True,
              "train_batch_size": 1000}
    whole = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    log = (whole.run_dir / "run.log").read_text()
    assert whole.status == "ok" and "each epoch's last training batch left out" in log and "last batch dropped" in log
    resumed, _ = killed_and_resumed(workspace, tmp_path, "SASRec", params, kill_epoch=1)
    assert same_result(resumed, whole)
    kept = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast_static_shapes": False}), workspace, console=False)
    assert kept.status == "ok" and kept.run_dir != whole.run_dir and not same_result(kept, whole)
