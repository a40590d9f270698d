"""recrunner/training/fast/compile_clock.py: a run's compile time and its parts, from torch's counts."""

import torch

from recrunner.training.fast.compile_clock import (AGAIN, PHASES, CompileClock, CompileReading, KeyBook, cache_counts,
                                                   compile_phases, describe_cache, describe_phases)


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


def test_a_backward_compiled_at_its_first_call_is_part_of_the_total(monkeypatch, tmp_path):
    """Under static shapes torch compiles the backward lazily, outside dynamo's compile: the main job's 8.5 s
    backward was missing from fast_static_shapes' total (14.5 s reported of a 21.6 s first step)."""
    before = {"_compile.compile_inner": 1.0}
    after = {"_compile.compile_inner": 11.0, "backward._backward_impl": 4.0, "compile_fx.<locals>.bw_compiler": 3.99}
    assert compile_phases(before, after)["total"] == 14.0 and compile_phases(before, after)["backward"] == 3.99
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    clock = CompileClock()
    compiled = torch.compile(lambda x: torch.nn.functional.gelu(x * 3).sum(), dynamic=None)
    loss = compiled(torch.randn(7, requires_grad=True))
    before_backward = clock.seconds()
    loss.backward()  # this torch compiles a static graph's backward here; its name for that time is in TOTAL
    assert clock.seconds() > before_backward, clock.phases()


def test_what_the_caches_held_is_counted_between_two_snapshots_and_said_in_one_clause():
    before = {"fxgraph_cache_hit": 3, "fxgraph_cache_miss": 1, "autograd_cache_miss": 2}
    after = {"fxgraph_cache_hit": 5, "fxgraph_cache_miss": 5, "fxgraph_cache_bypass": 1, "autograd_cache_miss": 4,
             "autograd_cache_saved": 2}
    cache = cache_counts(before, after)
    assert cache == {"graphs found": 2, "graphs compiled": 4, "graphs bypassed": 1, "autograd graphs compiled": 2}
    assert describe_cache(cache) == "; the compiler's cache held 2 of 7 graphs, 0 of 2 autograd graphs"
    assert cache_counts(after, after) == {} and describe_cache({}) == ""
    reading = CompileReading(35.9, {"capture": 3.6, "forward": 10.9}, {"graphs found": 0, "graphs compiled": 4})
    assert reading.line() == "fast mode: compiling took 35.9s of this run (capture 3.6 s, forward 10.9 s); " \
                             "the compiler's cache held 0 of 4 graphs"
    again = {"graphs compiled": 4, AGAIN: ["deterministic algorithms (deterministic): True here, False then"]}
    assert describe_cache(again) == "; the compiler's cache held 0 of 4 graphs; it held them for other " \
                                    "deterministic algorithms (deterministic): True here, False then"


def test_the_clock_reads_this_torch_s_cache_counters(monkeypatch, tmp_path):
    """A sweep cell on an H200 compiled for 35.9 s with the cache filled by a run of the same model (the GPU
    check of 2026-11-29): a run says what its cache held. torch still counts under the names read here."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    step = lambda x: torch.nn.functional.silu(x * 3).sum()  # noqa: E731
    first = CompileClock(KeyBook(tmp_path))
    torch.compile(step, dynamic=True)(torch.randn(5, requires_grad=True)).backward()
    compiled = first.read().cache
    assert compiled.get("graphs compiled", 0) >= 1 and not compiled.get("graphs found"), compiled
    assert AGAIN not in compiled and len(KeyBook(tmp_path).known()) == compiled["graphs compiled"]  # its keys kept
    torch._dynamo.reset()  # as a new process: only the cache on disk remembers
    again = CompileClock(KeyBook(tmp_path))
    torch.compile(step, dynamic=True)(torch.randn(5, requires_grad=True)).backward()
    found = again.read().cache
    assert found.get("graphs found", 0) + found.get("autograd graphs found", 0) >= 1, found
    assert AGAIN not in found


def test_a_graph_compiled_again_says_which_setting_the_cache_held_it_for(monkeypatch, tmp_path):
    """torch 2.13 keys a CPU graph on torch's thread count: a sweep cell with its share of the cores misses
    what a single run compiled. The run says so (cache_keys.py), from the components inductor logs."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch._inductor.config.cpp, "dynamic_threads", False)  # torch's default (fast mode reads threads
    step = lambda x: torch.nn.functional.silu(x * 5).sum()  # noqa: E731    # at run time: compiler.threads_at_run_time)
    threads = torch.get_num_threads()
    try:
        for count in (2, 1):
            torch.set_num_threads(count)
            torch._dynamo.reset()
            clock = CompileClock(KeyBook(tmp_path))
            torch.compile(step, dynamic=True)(torch.randn(5, requires_grad=True)).backward()
            reading = clock.read()
    finally:
        torch.set_num_threads(threads)
    assert reading.cache[AGAIN] == ["CPU threads (torch.set_num_threads): 1 here, 2 then"], reading.cache
    assert reading.line().endswith("; it held them for other CPU threads (torch.set_num_threads): 1 here, 2 then")
