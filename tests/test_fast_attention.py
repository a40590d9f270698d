"""Fast mode's attention by scaled_dot_product_attention (recrunner/training/fast/attention.py): RecBole's
function and gradients, with the last layer at the scored positions too, the plan's choice, a run and its resume."""

import pytest
import torch

from recrunner import ConfigError, Experiment, run_experiment
from recrunner.training.fast.apply import accelerate
from recrunner.training.fast.attention import attention_choice, attention_forward, fused_attention, is_fused
from recrunner.training.fast.last_layer import last_position_forward, masked_positions_forward
from recrunner.training.fast.plan import FastPlan, choose, plan_text, same_plan_key

from .conftest import TINY_SASREC, model_and_sequences
from .test_resume import killed_and_resumed, same_result


def test_auto_keeps_recboles_attention_until_a_gpu_measures_it():
    assert attention_choice("auto") == (False, "") and attention_choice(False) == (False, "")
    on, why = attention_choice(True)
    assert on and why.startswith("attention by scaled_dot_product_attention: the same function, rounded otherwise")
    with pytest.raises(ConfigError, match="fast_attention must be auto, true or false, got 'flash'"):
        attention_choice("flash")
    for device in ("cpu", "cuda"):
        assert not choose(device_type=device, native_bf16=True, model="SASRec").attention
    plan = choose(device_type="cuda", native_bf16=True, model="SASRec", attention=True)
    assert plan.attention and "attention in one kernel" in plan.settings()
    asked = FastPlan(attention=True)  # fp32 and eager still changes the model
    assert not asked.model_unchanged and plan_text(same_plan_key(asked.as_dict())) == "in fast mode (fp32, eager, attention in one kernel)"
    older = {"precision": "bf16", "compile": True, "scaler": False}  # a last.pth written before
    assert FastPlan.stored(older).attention is False and same_plan_key(older) != same_plan_key({**older, "attention": True})


@pytest.fixture(scope="module")
def sasrec(tmp_path_factory):
    """A two-layer, two-head SASRec (RecBole's structure at a small size) and sequences of every length."""
    return model_and_sequences(tmp_path_factory.mktemp("SASRec"), "SASRec", {**TINY_SASREC, "n_layers": 2, "n_heads": 2})


def _outputs_and_gradients(model, forward, *args) -> dict:
    model.zero_grad()
    out = forward(*args)
    (out * torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out)).sum().backward()
    found = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return {**found, "out": out.detach()}


def _fused(model):
    """`model` with fast_attention's forwards, undone on exit."""
    class Fused:
        def __enter__(self):
            assert fused_attention(model) == 2
            return model

        def __exit__(self, *exc):
            for module in model.modules():
                vars(module).pop("forward", None)
    return Fused()


@pytest.mark.parametrize("last_layer", [False, True])
def test_sasrec_computes_recboles_function_and_gradients(sasrec, last_layer):
    model, items, lengths = sasrec
    model.eval()  # no dropout: the same function of the same weights
    forward = (lambda *args: last_position_forward(model, *args)) if last_layer else model.forward
    recbole = _outputs_and_gradients(model, forward, items, lengths)
    keys = list(model.state_dict())
    with _fused(model):
        assert all(is_fused(layer.multi_head_attention) for layer in model.trm_encoder.layer)
        assert list(model.state_dict()) == keys  # instance attributes: checkpoints unchanged
        fast = _outputs_and_gradients(model, forward, items, lengths)
    assert not any(is_fused(layer.multi_head_attention) for layer in model.trm_encoder.layer)
    assert recbole.keys() == fast.keys() and recbole["out"].shape == (40, model.hidden_size)
    for name in recbole:
        assert torch.allclose(recbole[name], fast[name], atol=1e-5, rtol=1e-4), (name, (recbole[name] - fast[name]).abs().max())


def test_bert4recs_bidirectional_mask_too(tmp_path_factory):
    model, items, lengths = model_and_sequences(tmp_path_factory.mktemp("BERT4Rec"), "BERT4Rec",
                                                {**TINY_SASREC, "n_layers": 2, "n_heads": 2})
    model.eval()
    items = torch.cat([items[:, 1:], torch.full_like(items[:, :1], model.mask_token)], 1)  # scoring's appended mask
    for forward in (model.forward, lambda seq: masked_positions_forward(model, seq)):
        recbole = _outputs_and_gradients(model, forward, items)
        with _fused(model):
            fast = _outputs_and_gradients(model, forward, items)
        for name in recbole:
            assert torch.allclose(recbole[name], fast[name], atol=1e-5, rtol=1e-4), (name, (recbole[name] - fast[name]).abs().max())


def test_in_training_its_dropout_is_the_kernels_at_recboles_rate(sasrec):
    model, items, lengths = sasrec
    attention = model.trm_encoder.layer[0].multi_head_attention
    hidden = torch.randn(8, 10, model.hidden_size, device=items.device)
    mask = model.get_attention_mask(items[:8])
    attention.train()
    try:
        torch.manual_seed(1)
        first = attention_forward(attention, hidden, mask)
        torch.manual_seed(1)
        assert torch.equal(first, attention_forward(attention, hidden, mask))  # torch's generator: seeded, repeatable
        attention.eval()
        assert not torch.allclose(first, attention_forward(attention, hidden, mask))  # it dropped out in training
    finally:
        attention.eval()


def test_accelerate_installs_it_with_the_plan(sasrec):
    model, *_ = sasrec
    try:
        accelerate(model, FastPlan(attention=True))
        assert all(is_fused(layer.multi_head_attention) for layer in model.trm_encoder.layer)
    finally:
        for module in model.modules():
            for name in ("forward", "calculate_loss", "predict", "full_sort_predict"):
                vars(module).pop(name, None)


def test_a_killed_run_with_it_resumes_to_the_uninterrupted_result(workspace, tmp_path):
    params = {**TINY_SASREC, "epochs": 4, "fast": True, "fast_precision": "fp32", "fast_compile": False,
              "fast_attention": True}
    reference = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    assert reference.status == "ok"
    assert "last layer at the scored positions, attention in one kernel (" in (reference.run_dir / "run.log").read_text()
    resumed, _ = killed_and_resumed(workspace, tmp_path, "SASRec", params, 2)
    assert same_result(resumed, reference)
    with pytest.raises(ConfigError, match="fast_attention 'flash' must be auto, true or false"):
        run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast_attention": "flash"}), workspace, console=False)
