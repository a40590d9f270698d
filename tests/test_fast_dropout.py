"""Fast mode's dropout masks on a CPU (recrunner.training.fast.dropout): numpy's SFC64, seeded from
torch's generator; what nn.Dropout computes, from other random numbers; the plan's choice; a run."""

import json

import pytest
import torch

from recrunner import ConfigError, Experiment, run_experiment
from recrunner.training.callbacks.history import read_history
from recrunner.training.fast.apply import accelerate
from recrunner.training.fast.dropout import dropout_choice, numpy_masks
from recrunner.training.fast.plan import FastPlan, choose

from .conftest import TINY_BPR, TINY_SASREC


# ------------------------------------------------------------------ the choice (pure)
def test_auto_draws_numpy_masks_on_a_cpu_and_torch_masks_on_a_gpu():
    assert dropout_choice("auto", "cpu")[0] == "numpy" and "not exact mode's masks" in dropout_choice("auto", "cpu")[1]
    assert dropout_choice("auto", "cuda") == ("torch", "")
    assert dropout_choice("torch", "cpu") == ("torch", "")
    assert dropout_choice("numpy", "cuda") == ("torch", "fast_dropout: numpy's masks are drawn on a CPU; a GPU keeps torch's")
    with pytest.raises(ConfigError, match="fast_dropout must be one of auto, torch, numpy, got 'philox'"):
        dropout_choice("philox", "cpu")


def test_the_plan_says_where_masks_come_from_and_exact_plans_keep_torchs():
    sasrec = choose(native_bf16=True, model="SASRec")
    assert sasrec.dropout == "numpy" and sasrec.describe().startswith("fast mode: fp32, compiled, numpy's dropout masks, last layer at the scored positions (")
    assert "fast_dropout: torch keeps them" in sasrec.reason
    assert choose(native_bf16=True, model="SASRec", dropout="torch").dropout == "torch"
    assert choose(model="BPR").dropout == "torch" and choose(model="BPR").changes_nothing  # exact: nothing is swapped
    assert choose(device_type="cuda", native_bf16=True, model="SASRec").dropout == "torch"


def test_a_bad_fast_dropout_is_refused_before_a_run(workspace):
    with pytest.raises(ConfigError, match="fast_dropout 'fastest' is not a generator of masks; choose one of auto"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "fast": True, "fast_dropout": "fastest"}),
                       workspace, console=False)


# ------------------------------------------------------------------ the masks
def _numpy_dropout(p: float) -> torch.nn.Dropout:
    module = torch.nn.Dropout(p)
    assert numpy_masks(module) == 1
    return module


def test_numpy_masks_drop_p_of_the_values_and_scale_the_rest_as_dropout_does():
    module = _numpy_dropout(0.2)
    x = torch.ones(1000, 1000, requires_grad=True)
    torch.manual_seed(0)
    y = module(x)
    assert abs((y == 0).float().mean().item() - 0.2) < 0.002
    assert set(y.unique().tolist()) == {0.0, 1.25}
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # the gradient flows through the kept values, scaled, as dropout's does
    module.eval()
    assert module(x) is x
    assert torch.equal(_numpy_dropout(0.0)(x), x) and not _numpy_dropout(1.0)(x).any()


def test_a_seed_gives_the_same_masks_other_than_torchs_and_new_ones_each_call():
    module, x = _numpy_dropout(0.5), torch.ones(64, 64)
    torch.manual_seed(3)
    first, second = module(x), module(x)
    torch.manual_seed(3)
    assert torch.equal(module(x), first) and not torch.equal(first, second)
    torch.manual_seed(3)
    assert not torch.equal(torch.nn.functional.dropout(x, 0.5), first)  # not torch's masks: fast_dropout: torch keeps those
    torch.manual_seed(3)
    module(x)
    after = torch.get_rng_state()
    torch.manual_seed(3)
    torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64)
    assert torch.equal(torch.get_rng_state(), after)  # one draw of torch's generator a call: resuming restores it


def test_compiled_code_draws_the_masks_eager_code_draws():
    module, x = _numpy_dropout(0.3), torch.randn(12, 7)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), module)
    model.calculate_loss = lambda inputs: model(inputs).sum()
    torch.manual_seed(5)
    eager = model.calculate_loss(x)
    accelerate(model, FastPlan("fp32", compile=True))  # compiled: torch's generator draws the seeds (fallback_random)
    torch.manual_seed(5)
    assert torch.allclose(model.calculate_loss(x), eager, atol=1e-5)


def test_only_plain_dropout_modules_get_numpy_masks_and_the_weights_keep_their_names():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.1), torch.nn.AlphaDropout(0.1),
                                torch.nn.Sequential(torch.nn.Dropout(0.2)))
    keys = list(model.state_dict())
    assert numpy_masks(model) == 2
    assert "forward" not in vars(model[2]) and list(model.state_dict()) == keys


# ------------------------------------------------------------------ a run
def test_a_fast_run_on_a_cpu_trains_with_numpy_masks_and_torch_masks_on_request(workspace):
    """bf16 without compiling (quick): `auto` masks change the run, `torch` masks do not."""
    params = {**TINY_SASREC, "epochs": 2, "fast": True, "fast_precision": "bf16", "fast_compile": False,
              "use_gpu": False}  # numpy's masks are a CPU's choice
    numpy_run = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    torch_run = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast_dropout": "torch"}), workspace, console=False)
    assert numpy_run.status == torch_run.status == "ok" and numpy_run.run_dir != torch_run.run_dir  # part of the identity
    plan = json.loads((numpy_run.run_dir / "metrics.json").read_text())["provenance"]["fast"]
    assert plan["dropout"] == "numpy" and "numpy's dropout masks" in (numpy_run.run_dir / "run.log").read_text()
    losses = [[row["loss"] for row in read_history(run.run_dir / "history.jsonl")[1:]] for run in (numpy_run, torch_run)]
    assert losses[0] != losses[1]
