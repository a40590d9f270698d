"""Fast mode (recrunner.training.fast.plan, .accelerate): the plan, the wrapped methods, the scaler, a
compiled run that is killed and resumes to the uninterrupted run's numbers."""

import json
import os
import re

import pytest
import torch

from recrunner import ConfigError, Experiment, Workspace, run_experiment
from recrunner.training.fast import cache_keys, facts
from recrunner.training.fast.apply import FastMethod, accelerate, scaled_loss
from recrunner.training.fast.compiler import counted_loss_compiles
from recrunner.training.loop.optimizer import OptimizerStep
from recrunner.training.callbacks.history import read_history
from recrunner.training.fast.plan import FastPlan, choose, cpu_has_native_bf16, plan_text, same_plan_key

from .conftest import TINY_BPR, TINY_SASREC
from .test_resume import _killed_run


# ------------------------------------------------------------------ the plan (pure)
@pytest.mark.parametrize("device, native, precision, scaler", [
    ("cpu", True, "bf16", False),    # a CPU with avx512_bf16
    ("cpu", False, "fp32", False),   # without: fp32, compiled only
    ("cuda", True, "bf16", False),   # Ampere and later
    ("cuda", False, "fp16", True),   # older GPUs: fp16 with a gradient scaler
])
def test_auto_precision_follows_the_device(device, native, precision, scaler, monkeypatch):
    monkeypatch.setitem(facts.FACTS, "Caser", (facts.Fact("speed", "accelerate", "cpu", "a CPU", "measured faster"),))
    plan = choose(device_type=device, native_bf16=native, model="Caser")
    assert (plan.precision, plan.compile, plan.scaler) == (precision, True, scaler)
    assert plan.reason


def test_explicit_settings_win_and_bad_ones_are_refused():
    plan = choose(precision="fp16", compile=False, device_type="cpu", native_bf16=True, model="AnyModel")
    assert (plan.precision, plan.compile, plan.scaler) == ("fp16", False, False)  # CPU fp16: no scaler
    assert choose(precision="bf16", device_type="cpu", native_bf16=False).precision == "bf16"
    with pytest.raises(ConfigError, match="fast_precision"):
        choose(precision="fp64")
    with pytest.raises(ConfigError, match="fast_compile"):
        choose(compile="yes")


def test_on_a_cpu_auto_accelerates_only_the_models_measured_faster():
    neumf = choose(native_bf16=True, model="NeuMF")  # compiled it was 0.64x as fast on this CPU
    assert neumf.changes_nothing and "measured faster" in neumf.reason and "fast_compile: true" in neumf.reason
    assert neumf.describe().startswith("fast mode: loss and scores exact (NeuMF runs exactly: on a CPU")  # the run's log line
    assert choose(compile=True, native_bf16=True, model="NeuMF").compile  # asked for: tried anyway
    assert choose(precision="bf16", native_bf16=True, model="NeuMF").precision == "bf16"
    assert choose(device_type="cuda", native_bf16=True, model="NeuMF").compile  # a GPU: the device's rules
    sasrec = choose(native_bf16=True, model="SASRec")
    assert (sasrec.precision, sasrec.compile) == ("fp32", True) and "SASRec" in facts.accelerated_on("cpu")


def _facts(*entries):
    return tuple(facts.Fact(kind, acts, device, f"a {device}", why) for kind, acts, device, why in entries)


def test_facts_apply_on_the_device_they_were_measured_on_and_limits_on_every_device(monkeypatch):
    monkeypatch.setitem(facts.FACTS, "Slow", _facts(("speed", "exact", "cpu", "0.7x an epoch")))
    monkeypatch.setitem(facts.FACTS, "Sparse", _facts(("cannot", "fp32", "cpu", "its sparse products refuse bf16"),
                                                       ("speed", "accelerate", "cpu", "1.5x")))
    monkeypatch.setitem(facts.FACTS, "Picky", _facts(("quality", "fp32 unless asked", "cpu", "bf16 lowered MRR@10"),
                                                      ("speed", "accelerate", "cpu", "2x"),
                                                      ("speed", "accelerate", "cuda", "1.4x on a GPU")))
    assert choose(native_bf16=True, model="Slow").changes_nothing  # measured slower on a CPU: exact there
    on_gpu = choose(device_type="cuda", native_bf16=True, model="Slow")  # nothing measured on a GPU: its defaults
    assert (on_gpu.precision, on_gpu.compile) == ("bf16", True)
    assert on_gpu.reason.startswith("nothing measured of Slow on cuda: the device's defaults")
    assert "not applied on cuda: 1 fact measured on a cpu (speed)" in on_gpu.reason
    sparse = choose(device_type="cuda", native_bf16=True, model="Sparse")  # a kernel's limit holds everywhere
    assert (sparse.precision, sparse.compile) == ("fp32", True) and "refuse bf16 [a cpu]" in sparse.reason
    picky_cpu, picky_gpu = (choose(device_type=d, native_bf16=True, model="Picky") for d in ("cpu", "cuda"))
    assert picky_cpu.precision == "fp32" and "lowered" in picky_cpu.reason
    assert picky_gpu.precision == "bf16" and picky_gpu.reason.startswith("faster on cuda: 1.4x on a GPU [a cuda]")
    assert "not applied on cuda: 2 facts measured on a cpu (quality, speed)" in picky_gpu.reason


def test_the_main_job_on_a_gpu_is_decided_by_what_was_measured_on_a_gpu():
    """On an H200, fp32 compiled was slower than exact mode and bf16 compiled 1.43x (BENCHMARKS.md): the
    CPU's `fp32 unless asked` facts (no bf16 speed there, bf16 quality over 3 seeds) do not decide on a GPU."""
    sasrec = choose(device_type="cuda", native_bf16=True, model="SASRec")
    assert (sasrec.precision, sasrec.compile, sasrec.compile_scoring) == ("bf16", True, True)
    assert "[NVIDIA H200]" in sasrec.describe() and "not applied on cuda: 3 facts" in sasrec.describe()
    gru = choose(device_type="cuda", native_bf16=True, model="GRU4Rec")  # slower on a CPU; not measured on a GPU
    assert (gru.precision, gru.compile) == ("bf16", True)


def test_models_that_cannot_gain_run_exactly_or_eagerly_and_say_why(monkeypatch):
    bpr = choose(precision="bf16", native_bf16=True, model="BPR")  # measured slower in fast mode: exact
    assert (bpr.precision, bpr.compile) == ("fp32", False) and "data loader" in bpr.reason
    one_pass = choose(native_bf16=True, model="Pop", single_pass=True)
    assert (one_pass.precision, one_pass.compile) == ("fp32", False) and "one pass" in one_pass.reason
    faster = ("speed", "accelerate", "cpu", "measured faster")  # measured faster on a CPU, but limited
    monkeypatch.setitem(facts.FACTS, "Odd", _facts(faster, ("speed", "exact", "cpu", "its loss overflows in bf16")))
    monkeypatch.setitem(facts.FACTS, "Graphy", _facts(faster, ("cannot", "eager", "cpu", "the compiler cannot trace "
                                                                                         "its sparse ops")))
    monkeypatch.setitem(facts.FACTS, "Mixed", _facts(faster, ("cannot", "fp32", "cpu", "its sparse products refuse bf16")))
    odd = choose(native_bf16=True, model="Odd")
    assert (odd.precision, odd.compile) == ("fp32", False) and "overflows" in odd.reason
    graphy = choose(native_bf16=True, model="Graphy")
    assert (graphy.precision, graphy.compile) == ("bf16", False) and "sparse ops" in graphy.reason
    mixed = choose(native_bf16=True, model="Mixed")
    assert (mixed.precision, mixed.compile) == ("fp32", True) and "refuse bf16" in mixed.reason
    monkeypatch.setitem(facts.FACTS, "Picky", _facts(faster, ("quality", "fp32 unless asked", "cpu",
                                                              "bf16 lowered its MRR@10")))
    picky = choose(native_bf16=True, model="Picky")  # fp32 unless asked: the user may trade quality for speed
    assert (picky.precision, picky.compile) == ("fp32", True) and "lowered" in picky.reason
    asked = choose(precision="bf16", native_bf16=True, model="Picky")
    assert (asked.precision, asked.compile) == ("bf16", True) and "auto would be fp32" in asked.reason
    assert choose(precision="bf16", native_bf16=True, model="Mixed").precision == "fp32"  # a must stays a must


def test_plans_that_change_nothing_count_as_exact_for_resuming():
    assert same_plan_key(None) is None
    assert same_plan_key(FastPlan().as_dict()) is None
    assert same_plan_key(FastPlan("bf16", True).as_dict()) == ("bf16", True, False, True, "torch", "numpy", False, False, False, False)
    older = {"precision": "bf16", "compile": True, "scaler": False}  # written before scoring, masks and negatives were
    assert same_plan_key(older) == ("bf16", True, False, True, "torch", "numpy", False, False, False, False)
    assert same_plan_key(FastPlan("fp32", True, compile_scoring=False).as_dict()) == ("fp32", True, False, False, "torch", "numpy", False, False, False, False)
    assert same_plan_key(FastPlan("fp32", True, dropout="numpy").as_dict()) == ("fp32", True, False, True, "numpy", "numpy", False, False, False, False)
    torch_negatives = FastPlan(negatives="torch")  # fp32, eager: only the negatives change
    assert not torch_negatives.changes_nothing and torch_negatives.model_unchanged
    assert same_plan_key(torch_negatives.as_dict()) == ("fp32", False, False, False, "torch", "torch", False, False, False, False)
    assert plan_text(None) == "exactly (no fast mode)"
    assert plan_text(("fp16", True, True, True, "torch", "numpy", False, False, False, False)) == "in fast mode (fp16, compiled, grad scaler)"
    assert plan_text(("fp32", True, False, False, "torch", "numpy", False, False, False, False)) == "in fast mode (fp32, compiled, scoring eager)"
    assert plan_text(("fp32", True, False, True, "numpy", "numpy", False, False, False, False)) == "in fast mode (fp32, compiled, numpy's dropout masks)"
    assert plan_text(("fp32", False, False, False, "torch", "torch", False, False, False, False)) == "in fast mode (fp32, eager, negatives drawn by torch)"


def test_models_whose_compiled_scoring_was_slower_score_eagerly(monkeypatch):
    ngcf = choose(compile=True, native_bf16=True, model="NGCF")  # validation 0.67x compiled on ml-1m, on a CPU
    assert (ngcf.precision, ngcf.compile, ngcf.compile_scoring) == ("fp32", True, False)
    assert "scoring eager" in ngcf.describe() and "0.67x" in ngcf.reason
    on_gpu = choose(device_type="cuda", native_bf16=True, model="NGCF")  # measured on a CPU only: scoring compiled
    assert (on_gpu.precision, on_gpu.compile_scoring) == ("fp32", True) and "not applied on cuda" in on_gpu.reason
    assert choose(compile=False, model="NGCF").compile_scoring  # nothing compiled: nothing to say of scoring
    model = _Scorer()
    accelerate(model, ngcf)
    assert model.calculate_loss.compiled is not None
    assert model.predict.compiled is None and model.full_sort_predict.compiled is None
    assert choose(native_bf16=True, model="SASRec").compile_scoring


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16\n")
    assert cpu_has_native_bf16(cpuinfo)
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2\n")
    assert not cpu_has_native_bf16(cpuinfo)
    assert not cpu_has_native_bf16(tmp_path / "missing")


def test_cuda_graphs_are_asked_for_and_only_where_compiled_code_runs_on_a_gpu():
    gpu = dict(device_type="cuda", native_bf16=True, model="SASRec")
    assert not choose(**gpu).cuda_graphs  # auto: off until a GPU measures that they pay
    plan = choose(**gpu, cuda_graphs=True)
    assert plan.cuda_graphs and plan.describe().startswith("fast mode: bf16, compiled, CUDA graphs, last layer at the scored positions, fused optimizer step (")
    on_cpu = choose(device_type="cpu", model="SASRec", cuda_graphs=True)
    assert not on_cpu.cuda_graphs and "fast_cuda_graphs: cpu has no CUDA graphs" in on_cpu.reason
    eager = choose(**gpu, compile=False, cuda_graphs=True)
    assert not eager.cuda_graphs and "only compiled code is replayed as CUDA graphs" in eager.reason
    with pytest.raises(ConfigError, match="fast_cuda_graphs must be auto, true or false"):
        choose(**gpu, cuda_graphs="yes")


def test_the_training_loss_alone_is_replayed_as_cuda_graphs_a_step_at_a_time(monkeypatch):
    modes, steps = {}, []

    def compile(method, dynamic, mode):  # torch.compile, recorded (no GPU here to record graphs on)
        modes[method.__name__] = (dynamic, mode)
        return method

    monkeypatch.setattr(torch, "compile", compile)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: steps.append(1))
    model = _Scorer()
    accelerate(model, FastPlan("fp32", compile=True, cuda_graphs=True))
    x = torch.randn(2, 4)
    model.calculate_loss(x)
    model.calculate_loss(x)
    with torch.no_grad():
        model.predict(x)
    assert modes == {"calculate_loss": (True, "reduce-overhead"), "predict": (True, None), "full_sort_predict": (True, None)}
    assert len(steps) == 2  # one step begins per loss, none per score


def test_fast_settings_are_checked_before_a_run(workspace):
    with pytest.raises(ConfigError, match="fast_precision 'fp64'"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "fast": True, "fast_precision": "fp64"}),
                       workspace, console=False)
    with pytest.raises(ConfigError, match="fast expects true or false"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "fast": "yes"}), workspace, console=False)
    with pytest.raises(ConfigError, match="fast_cuda_graphs 'sometimes' must be auto, true or false"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "fast": True, "fast_cuda_graphs": "sometimes"}),
                       workspace, console=False)


# ------------------------------------------------------------------ the wrapped methods
class _Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def calculate_loss(self, x):
        return self.linear(x).pow(2).mean()

    def predict(self, x):
        return self.linear(x)

    def full_sort_predict(self, x):
        raise NotImplementedError  # RecBole then scores with predict


def test_accelerated_methods_keep_the_weights_names_train_in_bf16_and_score_in_fp32():
    model = _Scorer()
    keys = list(model.state_dict())
    assert accelerate(model, FastPlan("bf16", compile=False)) == ["calculate_loss", "predict", "full_sort_predict"]
    assert list(model.state_dict()) == keys  # no _orig_mod.: checkpoints keep their format
    x = torch.randn(5, 4)
    with torch.no_grad():
        scores, loss = model.predict(x), model.calculate_loss(x)
    assert scores.dtype == torch.float32
    assert torch.equal(scores, model.linear(x))  # scored in fp32: no ties made by rounding
    assert loss.item() != model.linear(x).pow(2).mean().item()  # the loss in bf16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert loss.item() == model.linear(x).pow(2).mean().item()
    with pytest.raises(NotImplementedError):
        model.full_sort_predict(x)
    assert accelerate(model, FastPlan("bf16")) == []  # once only


def test_a_bf16_loss_casts_the_weights_it_reads_at_each_call_not_the_casts_of_an_earlier_call():
    """The epoch calls the loss inside RecBole's autocast (disabled, loop/epoch.py), so autocast's cache of
    casts would last the whole step: a step recorded as CUDA graphs then replayed its warm-up's casts of
    the weights, stale and freed (an illegal memory access on an H200)."""
    model = _Scorer()
    accelerate(model, FastPlan("bf16", compile=False))
    x = torch.randn(5, 4)
    with torch.autocast("cpu", enabled=False):  # as the epoch calls it; the warm-up passes and the recording inside
        before = model.calculate_loss(x)
        with torch.no_grad():
            model.linear.weight.mul_(2)
        after = model.calculate_loss(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert after.item() == model.linear(x).pow(2).mean().item() != before.item()


class _Dropping(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def calculate_loss(self, x):
        return torch.nn.functional.dropout(self.linear(x), p=0.5, training=True).sum(dim=1)


def test_compiled_code_drops_out_what_eager_code_drops_out():
    """Compiled in fp32, a run draws the same dropout masks as exact mode from the same seed."""
    model = _Dropping()
    x = torch.randn(64, 4)
    torch.manual_seed(7)
    eager = model.calculate_loss(x)
    assert accelerate(model, FastPlan("fp32", compile=True)) == ["calculate_loss"]
    torch.manual_seed(7)
    compiled = model.calculate_loss(x)
    assert torch.allclose(compiled, eager, atol=1e-6) and (eager == 0).any()


class _Normed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.norm, self.scale = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4, eps=1e-12), 0.5

    def calculate_loss(self, x):
        return (self.norm(self.linear(x)) / self.scale).sum()


def test_a_models_float_attributes_are_compiled_as_constants_in_one_capture():
    """LayerNorm's eps traced as a symbol made dynamo capture the main job's loss twice (docs/fast.md)."""
    from torch._dynamo.utils import compilation_time_metrics  # torch's record of each capture attempt

    model = _Normed()
    accelerate(model, FastPlan("fp32", compile=True))
    retries = len(compilation_time_metrics.get("compile_attempt_1", []))
    x = torch.randn(6, 4)
    model.calculate_loss(x).backward()
    assert len(compilation_time_metrics.get("compile_attempt_1", [])) == retries
    assert torch.allclose(model.calculate_loss(x), (model.norm(model.linear(x)) / 0.5).sum(), atol=1e-4)


class _Counting(torch.nn.Module):
    """MultiVAE's pattern: the loss raises a step count, which its KL annealing reads."""

    def __init__(self):
        super().__init__()
        self.linear, self.update, self.anneal_steps = torch.nn.Linear(4, 4), 0, 10

    def calculate_loss(self, x):
        self.update += 1
        return self.linear(x).sum() * min(1.0, self.update / self.anneal_steps)


@pytest.mark.skipif(not counted_loss_compiles(torch.__version__),
                    reason="this torch compiles such a loss wrongly; it runs eagerly (the test below)")
def test_a_loss_that_counts_its_steps_compiles_once_not_at_every_step(caplog):
    from torch._dynamo.utils import counters as dynamo_counters

    model = _Counting()
    with caplog.at_level("INFO", logger="recrunner"):
        accelerate(model, FastPlan("fp32", compile=True))
    assert "_Counting's loss changes self.update, compiled as a symbol" in caplog.text
    graphs = dynamo_counters["stats"]["unique_graphs"]
    x = torch.randn(3, 4)
    losses = [model.calculate_loss(x) for _ in range(4)]
    assert dynamo_counters["stats"]["unique_graphs"] - graphs <= 2  # one per step (4) with the count a constant
    assert model.update == 4
    assert torch.allclose(losses[-1], model.linear(x).sum() * 0.4, atol=1e-5)


def test_before_torch_2_13_a_loss_that_counts_its_steps_runs_eagerly(caplog, monkeypatch):
    """torch 2.11 compiled the test above's loss to 0 (the GPU check of 2026-11-29): there, such a loss
    runs eagerly with a warning, and the model's scores stay compiled."""
    assert [counted_loss_compiles(v) for v in ("2.11.0+cu130", "2.12.1", "2.13.0+cpu", "2.13.0a0+git", "2.14.1", "3.0")] \
        == [False, False, True, True, True, True]
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    model = _Counting()
    with caplog.at_level("INFO", logger="recrunner"):
        accelerate(model, FastPlan("fp32", compile=True))
    assert "_Counting's loss changes self.update, and torch 2.11.0+cu130 compiles such a loss wrongly" in caplog.text
    assert model.calculate_loss.compiled is None and "compiled as a symbol" not in caplog.text
    x = torch.randn(3, 4)
    losses = [model.calculate_loss(x) for _ in range(4)]
    assert torch.allclose(losses[-1], model.linear(x).sum() * 0.4, atol=1e-6)


def test_a_compiler_failure_falls_back_to_eager_with_one_line(caplog):
    from torch._dynamo.exc import BackendCompilerFailed

    model = _Scorer()
    method = FastMethod(model.predict, FastPlan("fp32", compile=True), scoring=True)

    def failing(*args):
        raise BackendCompilerFailed("inductor", RuntimeError("no kernel for this op"), None)

    method.compiled = failing
    x = torch.randn(2, 4)
    with caplog.at_level("WARNING", logger="recrunner"), torch.no_grad():
        assert torch.equal(method(x), model.linear(x))
    assert "predict runs eagerly" in caplog.text and method.compiled is None


def test_where_inductors_pattern_rewrites_fail_the_method_compiles_without_them(caplog):
    """SASRec with one head: inductor's attention rewrite fails on its compiled full_sort_predict."""
    import torch._inductor.config as inductor
    from torch._inductor.exc import InductorError

    model = _Scorer()
    method = FastMethod(model.predict, FastPlan("fp32", compile=True), scoring=True)
    calls = []

    def compiled(*args):
        calls.append(inductor.pattern_matcher)
        if inductor.pattern_matcher:
            raise InductorError(RuntimeError("shape '[s85, s56, 16]' is invalid"), "")
        return model.linear(*args)

    method.compiled = compiled
    x = torch.randn(2, 4)
    with caplog.at_level("INFO", logger="recrunner"), torch.no_grad():
        assert torch.equal(method(x), model.linear(x)) and torch.equal(method(x), model.linear(x))
    assert calls == [True, False, False] and method.compiled is compiled  # still compiled, and stays so
    assert "predict compiled without inductor's pattern rewrites; with them the compiler failed: " \
           "InductorError: RuntimeError: shape '[s85, s56, 16]' is invalid" in caplog.text
    assert "runs eagerly" not in caplog.text and inductor.pattern_matcher  # the setting is the method's alone


def test_the_gradient_scaler_scales_gradients_not_the_reported_loss():
    """fp16's path (CUDA in practice), run with the CPU's GradScaler: the same update as unscaled."""
    torch.manual_seed(0)
    plain, scaled = _Scorer(), _Scorer()
    scaled.load_state_dict(plain.state_dict())
    x = torch.randn(8, 4)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    optimizer = OptimizerStep(torch.optim.SGD(scaled.parameters(), lr=0.1), scaler=scaler, clip={"max_norm": 0.5})
    reference = torch.optim.SGD(plain.parameters(), lr=0.1)
    loss_of = scaled_loss(scaled.calculate_loss, scaler)
    for _ in range(3):
        optimizer.zero_grad()
        loss = loss_of(x)
        assert loss.item() == pytest.approx(scaled.calculate_loss(x).item())  # unscaled value
        loss.backward()
        assert scaled.linear.weight.grad.abs().sum() > 100 * 0.01  # gradients carry the scale
        optimizer.step()
        reference.zero_grad()
        plain.calculate_loss(x).backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), max_norm=0.5)
        reference.step()
    assert torch.allclose(scaled.linear.weight, plain.linear.weight, atol=1e-6)
    state = scaler.state_dict()
    assert state["scale"] == 1024.0 and json.dumps(state)  # plain numbers: last.pth opens with weights_only


# ------------------------------------------------------------------ a compiled run, killed and resumed
def test_a_killed_fast_run_resumes_to_the_uninterrupted_fast_result(workspace, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # the first run sets it: one cache per output folder
    params = {**TINY_SASREC, "epochs": 3, "fast": True}
    reference = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    assert reference.status == "ok"
    record = json.loads((reference.run_dir / "metrics.json").read_text())
    plan = record["provenance"]["fast"]
    assert plan["compile"] is True and plan["precision"] in ("bf16", "fp32")
    state = torch.load(reference.run_dir / "checkpoints" / "last.pth", weights_only=True)
    assert state["fast"]["plan"] == plan
    assert not any(key.startswith("_orig_mod") for key in state["state_dict"])
    assert "fast=true" in reference.run_dir.name  # part of the run's identity
    assert (workspace.output_dir / ".cache" / "compile").is_dir()
    assert record["compile_seconds"] > 0 and record["compile_phases"]["backward"] > 0  # where it went, for the run log too
    assert re.search(r"fast mode: compiling took [\d.]+s of this run \(capture [\d.]+ s, .*backward [\d.]+ s",
                     (reference.run_dir / "run.log").read_text())

    killed = Workspace(tmp_path / "killed-runs", workspace.data_path, workspace.config_dir)
    _killed_run(killed, "SASRec", params, 1, "after-epoch")
    resumed = run_experiment(Experiment("SASRec", "ml-100k", params), killed, console=False)
    assert resumed.status == "ok" and "continuing at epoch 2" in (resumed.run_dir / "run.log").read_text()
    assert (resumed.best_epoch, resumed.best_valid, resumed.test) == \
        (reference.best_epoch, reference.best_valid, reference.test)
    if "with them the compiler failed" in (reference.run_dir / "run.log").read_text():  # torch 2.13 on one head
        # the killed run and the resumed one started where the reference ended (fast/failures.py)
        assert "which failed on this model in an earlier run" in (resumed.run_dir / "run.log").read_text()

    # an exact run never continues from the fast run's checkpoint
    exact = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast": False}), killed, console=False,
                           resume_from=resumed.run_dir / "checkpoints" / "last.pth")
    assert exact.status == "failed" and "was trained in fast mode (" in exact.error


def test_fast_mode_composes_with_accumulation_the_lr_schedule_and_the_guard(workspace):
    """bf16 without compiling (quick): every step of the loop still acts."""
    params = {**TINY_SASREC, "epochs": 3, "fast": True, "fast_precision": "bf16", "fast_compile": False,
              "gradient_accumulation_steps": 2, "lr_scheduler": "cosine", "clip_grad_norm": {"max_norm": 1.0}}
    result = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    assert result.status == "ok" and result.test
    record = json.loads((result.run_dir / "metrics.json").read_text())
    assert record["provenance"]["fast"]["precision"] == "bf16" and not record["provenance"]["fast"]["compile"]
    log = (result.run_dir / "run.log").read_text()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    masks = ", numpy's dropout masks" if device == "cpu" else ""  # a CPU's masks (fast/dropout.py)
    assert f"fast mode: bf16, eager{masks}, last layer at the scored positions (faster on {device}: " in log  # the fact that decided, and where it was measured
    asked = "; fast_precision bf16 (auto would be fp32:" in log  # bf16 asked for where auto picks fp32 for SASRec:
    assert asked == (device == "cpu")  # a CPU's facts; on a GPU auto picks bf16 itself (failed on the H200)
    exact = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast": False}), workspace, console=False)
    losses = [[row["loss"] for row in read_history(run.run_dir / "history.jsonl")[1:]] for run in (exact, result)]
    assert losses[0] != losses[1]  # trained in bf16: fast mode is not exact mode


def test_the_compile_cache_is_the_output_folders_unless_the_user_chose_one(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what torch sets when it imports dynamo
    cache_keys.share_compile_cache(tmp_path / "runs" / ".cache" / "compile")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "runs" / ".cache" / "compile")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    cache_keys.share_compile_cache(tmp_path / "other")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_a_cell_with_its_share_of_the_cores_compiles_from_a_single_run_s_cache(tmp_path, monkeypatch):
    """torch 2.13 keys a CPU kernel's cache on the thread count it was written for: a sweep cell with one
    thread of two compiled again what a single run had (30.6 s against 4.7 s for SASRec on ml-100k). Fast
    mode's kernels read the count at run time (compiler.threads_at_run_time), so the cache serves both."""
    from recrunner.training.fast.compile_clock import CompileClock, KeyBook

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch._inductor.config.cpp, "dynamic_threads", False)  # torch's default, restored after
    threads, x = torch.get_num_threads(), torch.randn(9, 7)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh())
    model.calculate_loss = lambda inputs: model(inputs).sum()
    accelerate(model, FastPlan("fp32", compile=True))
    try:
        for count in (2, 1):
            torch.set_num_threads(count)
            torch._dynamo.reset()  # as a new process: only the cache on disk remembers
            clock = CompileClock(KeyBook(tmp_path))
            model.calculate_loss(x).backward()
            cache = clock.read().cache
    finally:
        torch.set_num_threads(threads)
    assert cache.get("graphs found") and not cache.get("graphs compiled"), cache


def test_the_log_lines_in_the_docs_are_what_choose_says():
    from .conftest import REPO

    page = (REPO / "docs" / "fast.md").read_text()
    for device in ("cpu", "cuda"):
        assert choose(device_type=device, native_bf16=True, model="SASRec").describe() + "\n" in page
