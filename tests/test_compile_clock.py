"""recrunner/training/fast/compile_clock.py: a run's compile time and its parts, from torch's counts."""

import torch

from recrunner.training.fast.compile_clock import PHASES, CompileClock, compile_phases, describe_phases


def test_the_phases_are_what_torch_counted_between_two_snapshots_and_only_those_that_took_time():
    before = {"_compile.compile_inner": 10.0, "bytecode_tracing": 1.0, "compile_fx.<locals>.bw_compiler": 4.0}
    after = {"_compile.compile_inner": 52.34, "bytecode_tracing": 6.1, "compile_fx.<locals>.bw_compiler": 4.0,
             "compile_fx.<locals>.fw_compiler_base": 20.26, "async_compile.wait": 8.0, "unrelated": 3.0}
    assert compile_phases(before, after) == {"total": 42.3, "capture": 5.1, "forward": 20.26, "kernels waited for": 8.0}
    assert describe_phases(compile_phases(before, after)) == " (capture 5.1 s, forward 20.3 s, kernels waited for 8.0 s)"
    assert compile_phases({}, {}) == {"total": 0.0} and describe_phases({"total": 0.0}) == ""


def test_the_clock_counts_a_compile_of_this_torch_by_its_phases(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # compiled, not read from an earlier test's cache
    clock = CompileClock()
    torch.compile(lambda x: torch.nn.functional.gelu(x * 2).sum(), dynamic=True)(torch.randn(6, requires_grad=True)).backward()
    phases = clock.phases()
    # this torch still keeps its counts under the names PHASES reads: a rename shows here, not as silent zeros
    assert phases["total"] > 0 and {"capture", "autograd's graph", "forward", "backward"} <= set(phases), phases
    assert set(phases) <= {"total", *(name for name, _ in PHASES)}
    assert clock.seconds() == phases["total"]  # nothing compiled since
