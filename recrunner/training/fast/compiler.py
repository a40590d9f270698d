"""torch's compiler as fast mode sets it up, and what its failures are.

Fast mode changes three of the compiler's process-wide settings before it compiles anything (`set_up`):
compiled code draws random numbers from torch's generator, a model's float attributes are constants, and a
CPU's kernels read torch's thread count when they run. Exact runs compile nothing, so the settings leave
them alone. `compiler_reason`, `is_compiler_error` and `is_inductor_error` tell a compiler's failure
from the model's own exception (apply.py's `FastMethod` falls back to eager on the first kind only), and
`counted_loss_compiles` says which torch compiles a loss that counts its steps.
"""

from __future__ import annotations

import re


def set_up() -> None:
    """The compiler's process-wide settings for fast mode (each below says what it does and why)."""
    eager_random()
    constant_floats()
    threads_at_run_time()


def counted_loss_compiles(version: str) -> bool:
    """Whether torch `version` compiles a loss that raises a step count (`source.counters`) correctly with the
    count a symbol (pure). torch 2.13 does (tests/test_fast.py, CI); torch 2.11.0+cu130 returned a loss of 0
    from the same test (the GPU check of 2026-11-29, an H200), so before 2.13 such a loss runs eagerly."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return found is not None and (int(found[1]), int(found[2])) >= (2, 13)


def eager_random() -> None:
    """Compiled code draws its random numbers (dropout masks) from torch's generator, as eager code does.

    Inductor's own generator would give a compiled run other masks than the exact run of the same
    seed: a SASRec trained compiled in fp32 then ended 0.0029 lower in test MRR@10 on one seed, like
    another seed would; with torch's generator it ended with exact mode's MRR@10, NDCG@10 and Hit@10
    (docs/fast.md). A process-wide inductor setting; exact runs compile nothing, so it leaves them alone.
    """
    import torch._inductor.config as inductor

    inductor.fallback_random = True


def constant_floats() -> None:
    """The compiler takes a model's float attributes (LayerNorm's eps, dropout's p, attention's scale) as
    the constants they are, with shapes still dynamic.

    Under `dynamic=True` torch traces each as a symbol, then finds it must be a constant (layer_norm's eps
    is) and captures the whole loss again. A second capture is what a filled cache cannot spare: the
    main job's loss compiled from it in 10.5-12.1 s with symbols, 3.7-4.6 s with constants, on this
    project's CPU (bench/bench_compile.py, docs/fast.md). RecBole's models change no float attribute
    while training. Int attributes stay constants too, but for the step counts a loss raises
    (`FastMethod._settings`). A process-wide dynamo setting; exact runs compile nothing, so it
    leaves them alone.
    """
    import torch._dynamo.config as dynamo

    dynamo.specialize_float = True


def threads_at_run_time() -> None:
    """Compiled C++ kernels (a CPU's) take torch's thread count when they run, not the one they were compiled at.

    torch 2.13 writes the count into each kernel and keys its cache on it, so a sweep cell with its share
    of the cores (`--workers 2`: one thread of two) compiled again what a single run had compiled: SASRec
    on ml-100k, 30.6 s; with the count read at run time, 4.7 s from that run's cache, its step as fast
    (1.27-1.32 s against 1.29-1.38 s at one thread; 0.77-0.79 s against 0.73-0.95 s at two) on this
    project's CPU (docs/fast.md). A process-wide inductor setting; a GPU's kernels have no such count.
    """
    import torch._inductor.config as inductor

    inductor.cpp.dynamic_threads = True


def compiler_reason(exc: BaseException) -> str:
    """The compiler's error in one line, with its cause: torch wraps it (`BackendCompilerFailed:
    backend='inductor' raised:` and the reason on the next lines) (pure)."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    if inner is not None and inner is not exc:
        inner_lines = [line.strip() for line in str(inner).splitlines() if line.strip()]
        cause = f"{type(inner).__name__}: {inner_lines[0] if inner_lines else ''}"
        text += "" if cause in text else f" {cause}"  # InductorError's message is its cause's already
    elif lines and lines[0].endswith(":") and len(lines) > 1:
        text += f" {lines[1]}"
    return text[:300]


def is_compiler_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor", "torch.fx"))


def is_inductor_error(exc: BaseException) -> bool:
    """A failure in inductor's part of compiling (after dynamo traced the method): torch's InductorError,
    or dynamo's BackendCompilerFailed around it."""
    return (type(exc).__module__ or "").startswith("torch._inductor") or type(exc).__name__ == "BackendCompilerFailed"
