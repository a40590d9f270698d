"""What a run spends compiling, from torch's own count of its compiles, and where it goes.

torch keeps, per process, the seconds of each part of every compile it did
(`torch._dynamo.utils.compilation_time_metrics`: a list of times per part, nested parts included
in their parents). `CompileClock` takes a snapshot when a run starts and reads the difference
when it ends, so a process that runs several runs counts each one's own compiles.
"""

from __future__ import annotations

# the parts a reader can act on, in the order they happen: (what the run log calls it, torch's name)
PHASES = (
    ("capture", "bytecode_tracing"),                                # dynamo tracing the method's Python
    ("autograd's graph", "aot_trace_joint_graph"),                  # forward and backward traced together
    ("forward", "compile_fx.<locals>.fw_compiler_base"),            # inductor: the forward (and scoring) kernels
    ("backward", "compile_fx.<locals>.bw_compiler"),                # inductor: the backward kernels
    ("kernels waited for", "async_compile.wait"),                   # within forward and backward: gcc or Triton
)
TOTAL = "_compile.compile_inner"


class CompileClock:
    """The seconds a run spends compiling (dynamo's and inductor's), from the clock's start; 0 where
    this torch keeps no such count."""

    def __init__(self):
        self.start = _metrics()

    def phases(self) -> dict[str, float]:
        return compile_phases(self.start, _metrics())

    def seconds(self) -> float:
        return self.phases()["total"]


def compile_phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The seconds of each phase between two snapshots of torch's totals (pure); `total` first (to
    0.1 s, as runs report it), then the phases that took any time (to 0.01 s: from a warm cache, little)."""
    spent = {name: after.get(key, 0.0) - before.get(key, 0.0) for name, key in PHASES}
    return {"total": round(after.get(TOTAL, 0.0) - before.get(TOTAL, 0.0), 1),
            **{name: round(seconds, 2) for name, seconds in spent.items() if seconds >= 0.005}}


def describe_phases(phases: dict[str, float]) -> str:
    """The run log's clause (pure): ' (capture 5.1 s, forward 10.2 s, ...)', or '' without phases."""
    parts = [f"{name} {seconds:.1f} s" for name, seconds in phases.items() if name != "total"]
    return f" ({', '.join(parts)})" if parts else ""


def _metrics() -> dict[str, float]:
    """torch's totals so far, per part of a compile."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return {}
    return {key: float(sum(times)) for key, times in compilation_time_metrics.items()}
