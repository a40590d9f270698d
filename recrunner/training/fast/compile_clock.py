"""What a run spends compiling, from torch's own count of its compiles, where it goes, what the
compiler's cache spared, and why it did not spare more (cache_keys.py).

torch keeps, per process, the seconds of each part of every compile it did
(`torch._dynamo.utils.compilation_time_metrics`: a list of times per part, nested parts included
in their parents) and how often its caches had a graph (`torch._dynamo.utils.counters`). `CompileClock`
takes a snapshot when a run starts and reads the difference when it ends, so a process that runs
several runs counts each one's own compiles.
"""

from __future__ import annotations

from typing import NamedTuple

from .cache_keys import LISTENER, KeyBook, compiled_again_for, describe_reasons

# the parts a reader can act on, in the order they happen: (what the run log calls it, torch's name)
PHASES = (
    ("capture", "bytecode_tracing"),                                # dynamo tracing the method's Python
    ("autograd's graph", "aot_trace_joint_graph"),                  # forward and backward traced together
    ("forward", "compile_fx.<locals>.fw_compiler_base"),            # inductor: the forward (and scoring) kernels
    ("backward", "compile_fx.<locals>.bw_compiler"),                # inductor: the backward kernels
    ("kernels waited for", "async_compile.wait"),                   # within forward and backward: gcc or Triton
)
# the whole compile: dynamo's (the forward, and the backward where torch compiles it with the forward: under
# dynamic shapes), and a backward torch compiled lazily, at its first call, outside dynamo's (under static
# shapes: `fast_static_shapes`, whose 8.5 s of the main job's backward went uncounted until 2026-12-01)
TOTAL = ("_compile.compile_inner", "backward._backward_impl")
# torch's caches of compiled graphs: (what the run log calls them, torch's counter group, its prefix)
CACHES = (("graphs", "inductor", "fxgraph_cache"),                 # inductor's compiled forwards and backwards
          ("autograd graphs", "aot_autograd", "autograd_cache"))   # forward and backward traced together
OUTCOMES = (("found", "hit"), ("compiled", "miss"), ("bypassed", "bypass"))
AGAIN = "compiled again for"  # compile_cache's list of why graphs like those in the cache were compiled


class CompileReading(NamedTuple):
    seconds: float
    phases: dict      # seconds per phase (compile_phases)
    cache: dict       # what the caches held (cache_counts)

    def line(self) -> str:
        return f"fast mode: compiling took {self.seconds:.1f}s of this run{describe_phases(self.phases)}{describe_cache(self.cache)}"


class CompileClock:
    """The seconds a run spends compiling (dynamo's and inductor's), from the clock's start; 0 where
    this torch keeps no such count. With a `book`, the keys of the graphs compiled until `read` are
    kept in it, and a graph compiled again is explained (cache_keys.py)."""

    def __init__(self, book: KeyBook | None = None):
        self.start, self.cache_start = _metrics(), _cache_counters()
        self.book = book
        if book is not None:
            LISTENER.start()

    def phases(self) -> dict[str, float]:
        return compile_phases(self.start, _metrics())

    def read(self) -> CompileReading:
        phases = self.phases()
        cache = cache_counts(self.cache_start, _cache_counters())
        if self.book is not None:
            graphs = LISTENER.stop()
            if cache.get("graphs compiled") and (reasons := compiled_again_for(graphs, self.book.known())):
                cache[AGAIN] = reasons
            self.book.add(graphs)
        return CompileReading(phases.pop("total"), phases, cache)

    def seconds(self) -> float:
        return self.phases()["total"]


def compile_phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The seconds of each phase between two snapshots of torch's totals (pure); `total` first (to
    0.1 s, as runs report it), then the phases that took any time (to 0.01 s: from a warm cache, little)."""
    spent = {name: after.get(key, 0.0) - before.get(key, 0.0) for name, key in PHASES}
    total = sum(after.get(key, 0.0) - before.get(key, 0.0) for key in TOTAL)
    return {"total": round(total, 1),
            **{name: round(seconds, 2) for name, seconds in spent.items() if seconds >= 0.005}}


def describe_phases(phases: dict[str, float]) -> str:
    """The run log's clause (pure): ' (capture 5.1 s, forward 10.2 s, ...)', or '' without phases."""
    parts = [f"{name} {seconds:.1f} s" for name, seconds in phases.items() if name != "total"]
    return f" ({', '.join(parts)})" if parts else ""


def cache_counts(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What torch's caches did between two snapshots of its counters (pure): "graphs found", "graphs
    compiled", "graphs bypassed" (not cacheable), and the same of autograd's graphs; those that happened."""
    counts = {f"{name} {word}": after.get(f"{prefix}_{key}", 0) - before.get(f"{prefix}_{key}", 0)
              for name, _, prefix in CACHES for word, key in OUTCOMES}
    return {name: count for name, count in counts.items() if count}


def describe_cache(cache: dict) -> str:
    """The run log's clause (pure): '; the compiler's cache held 2 of 6 graphs, 1 of 2 autograd graphs', or ''."""
    held = [f"{cache.get(name + ' found', 0)} of {sum(cache.get(f'{name} {word}', 0) for word, _ in OUTCOMES)} {name}"
            for name, _, _ in CACHES if any(cache.get(f"{name} {word}") for word, _ in OUTCOMES)]
    return (f"; the compiler's cache held {', '.join(held)}" if held else "") + describe_reasons(cache.get(AGAIN, []))


def _cache_counters() -> dict[str, int]:
    """torch's counts so far of its graph caches' lookups."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {key: int(count) for _, group, _ in CACHES for key, count in counters[group].items()}


def _metrics() -> dict[str, float]:
    """torch's totals so far, per part of a compile."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return {}
    return {key: float(sum(times)) for key, times in compilation_time_metrics.items()}
