"""Fast mode's fused optimizer step (recrunner/training/fast/fused.py)."""

from __future__ import annotations

import json

import pytest
import torch

from recrunner import ConfigError, Experiment, run_experiment
from recrunner.training.fast.fused import fused_choice, fused_optimizer
from recrunner.training.fast.plan import FastPlan, choose, plan_text, same_plan_key

from .conftest import TINY_SASREC
from .test_resume import killed_and_resumed, same_result


def test_auto_fuses_the_step_on_a_gpu_and_keeps_recboles_on_a_cpu():
    assert fused_choice("auto", "adam", "cuda")[0] is True
    assert fused_choice("auto", "adam", "cpu") == (False, "")
    assert fused_choice(True, "Adam", "cpu")[0] is True  # asked for: a CPU has one too
    assert fused_choice(False, "adam", "cuda") == (False, "")
    fused, why = fused_choice(True, "rmsprop", "cuda")
    assert not fused and why == "fast_fused_optimizer: torch has no fused rmsprop step on cuda (only adam, adamw, sgd); RecBole's step"
    assert not fused_choice("auto", "adagrad", "cuda")[0] and fused_choice(True, "adagrad", "cpu")[0]
    with pytest.raises(ConfigError, match="fast_fused_optimizer must be auto, true or false, got 'yes'"):
        fused_choice("yes", "adam", "cuda")


def test_the_plan_names_the_fused_step_and_a_resume_needs_the_same_choice():
    gpu = choose(device_type="cuda", native_bf16=True, model="SASRec")
    assert gpu.fused_optimizer and gpu.settings().endswith(", fused optimizer step")
    assert "the optimizer's step fused: one kernel" in gpu.reason
    assert not choose(device_type="cuda", native_bf16=True, model="SASRec", fused=False).fused_optimizer
    assert not choose(native_bf16=True, model="SASRec").fused_optimizer  # a CPU: RecBole's step
    only_fused = FastPlan(fused_optimizer=True)  # fp32, eager: only the optimizer's step changes
    assert only_fused.model_unchanged and not only_fused.changes_nothing
    assert same_plan_key(only_fused.as_dict()) != same_plan_key(FastPlan(negatives="torch").as_dict())
    older = {"precision": "bf16", "compile": True, "scaler": False}  # a last.pth written before the fused step
    assert FastPlan.stored(older).fused_optimizer is False
    assert plan_text(same_plan_key(only_fused.as_dict())) == "in fast mode (fp32, eager, fused optimizer step)"


@pytest.mark.parametrize("kind, settings", [(torch.optim.Adam, {"weight_decay": 0.1}), (torch.optim.AdamW, {}),
                                            (torch.optim.SGD, {"weight_decay": 0.1})])
def test_the_fused_optimizer_is_recboles_with_one_kernel(kind, settings):
    torch.manual_seed(0)
    weights = [torch.randn(50, 8), torch.randn(8)]
    plain = [torch.nn.Parameter(w.clone()) for w in weights]
    fused = [torch.nn.Parameter(w.clone()) for w in weights]
    reference = kind(plain, lr=0.01, **settings)  # as RecBole's _build_optimizer builds it
    optimizer = fused_optimizer(kind(fused, lr=0.01, **settings))
    assert type(optimizer) is kind and optimizer.param_groups[0]["fused"] is True
    assert {k: v for k, v in optimizer.param_groups[0].items() if k not in ("params", "fused", "foreach")} == \
        {k: v for k, v in reference.param_groups[0].items() if k not in ("params", "fused", "foreach")}
    for _ in range(3):
        for one, other in zip(plain, fused):
            one.grad = other.grad = torch.randn_like(one)
        reference.step()
        optimizer.step()
    assert all(torch.allclose(one, other, rtol=1e-5, atol=1e-6) for one, other in zip(plain, fused))


def test_an_optimizer_without_a_fused_step_is_kept(caplog):
    optimizer = torch.optim.RMSprop([torch.nn.Parameter(torch.zeros(3))], lr=0.01)
    with caplog.at_level("INFO", logger="recrunner"):
        assert fused_optimizer(optimizer) is optimizer
    assert "the optimizer's step stays RMSprop's own" in caplog.text


def test_a_killed_run_with_the_fused_step_resumes_to_the_uninterrupted_result(workspace, tmp_path):
    # fp32, eager, quick: the fused step is what a CPU takes when asked
    params = {**TINY_SASREC, "epochs": 4, "fast": True, "fast_precision": "fp32", "fast_compile": False,
              "fast_fused_optimizer": True}
    reference = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    assert reference.status == "ok"
    assert "fast mode: fp32, eager, numpy's dropout masks, last layer at the scored positions, fused optimizer step (" in (reference.run_dir / "run.log").read_text()
    state = torch.load(reference.run_dir / "checkpoints" / "last.pth", weights_only=True)
    assert state["optimizer"]["param_groups"][0]["fused"] is True
    assert json.loads((reference.run_dir / "metrics.json").read_text())["provenance"]["fast"]["fused_optimizer"] is True

    resumed, killed = killed_and_resumed(workspace, tmp_path, "SASRec", params, 2)
    assert same_result(resumed, reference)

    # RecBole's step never continues from the fused step's checkpoint
    unfused = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast_fused_optimizer": False}), killed,
                             console=False, resume_from=resumed.run_dir / "checkpoints" / "last.pth")
    assert unfused.status == "failed" and "fused optimizer step" in unfused.error and "fast_fused_optimizer" in unfused.error


def test_the_setting_is_checked_before_a_run(workspace):
    with pytest.raises(ConfigError, match="fast_fused_optimizer 'always' must be auto, true or false"):
        run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "fast": True, "fast_fused_optimizer": "always"}),
                       workspace, console=False)
