"""Every random number generator a run depends on: captured as plain data, restored from any device.

    state = capture(generators)      # Python, numpy, torch's CPU generator, each CUDA device's
    restore(state, generators)       #   (where CUDA started), and the named generators (the loaders')
    with preserved(generators): ...  # run something without moving any of them

The one home of RNG state: checkpoints store `capture`'s dict (last.pth's `rng`, a mid-epoch
checkpoint's `epoch_rng`, each data-parallel process's own), the loop restores it on resume and
around every validation, and the data-parallel evaluation shares rank 0's.

A state may arrive on another device than the one it was taken on (a checkpoint loaded with a
map_location, a state sent between processes): `restore` brings every tensor to the CPU first, where
torch's `set_rng_state` and numpy want it. CUDA states are restored when this process has as many
CUDA devices as the state holds; otherwise (a run started on a GPU resumed on a CPU, or the
reverse, or on another number of GPUs) one warning says that the CUDA random numbers from here on
differ from the uninterrupted run's, and everything else is restored.
"""

from __future__ import annotations

import contextlib
import logging
import random

import numpy as np
import torch

logger = logging.getLogger("recrunner")


def capture(generators: dict[str, torch.Generator]) -> dict:
    """Every RNG that shapes the rest of a run, as plain data (tensors on the CPU)."""
    version, keys, gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {
        "python": [version, list(keys), gauss],
        "numpy": [np_kind, torch.from_numpy(np_keys.astype(np.int64)), int(np_pos), int(np_has_gauss), float(np_gauss)],
        "torch": torch.get_rng_state(),
        "generators": {name: gen.get_state() for name, gen in generators.items()},
    }
    if cuda_started():  # where CUDA never started, nothing drew from it (and asking would start it on every GPU)
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict, generators: dict[str, torch.Generator]) -> None:
    """Set every RNG back to `state` (from `capture`, on any device); see the module docstring."""
    version, keys, gauss = state["python"]
    random.setstate((version, tuple(keys), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, _on_cpu(keys).numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(_on_cpu(state["torch"]))
    _restore_cuda(state.get("cuda"))
    for name, gen in generators.items():
        if name in state["generators"]:
            gen.set_state(_on_cpu(state["generators"][name]))


@contextlib.contextmanager
def preserved(generators: dict[str, torch.Generator]):
    """Run the block without moving any RNG the run depends on."""
    state = capture(generators)
    try:
        yield
    finally:
        restore(state, generators)


def cuda_started() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def cuda_plan(saved: int, present: int) -> str | None:
    """None when `saved` CUDA states can be restored on `present` devices; else the warning (pure)."""
    if saved == present:
        return None
    then = f"{saved} CUDA device{'s' if saved != 1 else ''}" if saved else "no CUDA device (a CPU run)"
    now = f"{present}" if present else "none"
    return (f"the checkpoint holds the random state of {then}, this process has {now}: CUDA random numbers from "
            "here on differ from the uninterrupted run's (weights, optimizer, data order and CPU random state "
            "are restored)")


def _restore_cuda(saved) -> None:
    present = torch.cuda.device_count() if cuda_started() else 0
    warning = cuda_plan(len(saved or ()), present)
    if warning is None:
        if saved:
            torch.cuda.set_rng_state_all([_on_cpu(one) for one in saved])
    elif warning not in _warned:
        _warned.add(warning)
        logger.warning(warning)


_warned: set[str] = set()  # each mismatch is said once per process (a step resume restores twice)


def _on_cpu(tensor):
    return tensor.cpu() if isinstance(tensor, torch.Tensor) else tensor
