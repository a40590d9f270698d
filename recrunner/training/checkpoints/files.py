"""Checkpoint files: plain data, written atomically, opened with torch.load(weights_only=True).

Two artifacts per run (docs/design.md: Checkpoints):
  best.pth  the weights of the best validation epoch: what test scoring and later use load
  last.pth  the full training state at the end of the newest epoch: what resume loads
Both hold only tensors, numbers, strings, lists and dicts, so opening one never runs pickled
code, and torch >= 2.6 (weights_only by default) reads them. RecBole's own checkpoints pickle a
Config object and numpy scalars, which torch >= 2.6 refuses; recrunner never writes or loads
those.

The device boundary: every tensor is written from the CPU (`save_atomic`) and read onto the CPU
(`load`, the one place a checkpoint is opened), whatever device trained the run. Placing what was
read on the run's device is the reader's one step: `load_state_dict` of the model and the
optimizer (which move values to their parameters' devices), `model_state.restore(..., device)`,
and `rng.restore` (which takes states from any device). So a run started on a GPU resumes on a CPU
and the reverse, and RecBole's own `torch.load` of a pre-trained stage (S3Rec, RaCT) needs no
map_location.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...core.errors import CheckpointError
from ...core.interrupts import deferred
from ...core.files import atomic_file

FORMAT_VERSION = 1


def header(kind: str, epoch: int, config) -> dict:
    """What identifies every checkpoint, best.pth or last.pth, whatever holds the weights (pure)."""
    return {"format_version": FORMAT_VERSION, "kind": kind, "epoch": epoch, "model": config["model"],
            "config": to_plain(config.final_config_dict)}


def to_plain(value: Any, strict: bool = False) -> Any:
    """Turn config values (enums, devices, numpy scalars, tuples) into plain data (pure).

    Non-strict, anything else becomes its string (fine for a config record); strict, it is a
    TypeError (model state must round-trip exactly).
    """
    if isinstance(value, np.generic):  # before float: numpy.float64 subclasses float
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {(k if isinstance(k, (int, str)) else str(k)): to_plain(v, strict) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, strict) for v in value]
    if strict:
        raise TypeError(f"cannot store a {type(value).__name__} as plain data")
    return str(value)


_PLAIN_TYPES = (type(None), bool, int, float, str, torch.Tensor, torch.Size)


def check_plain(value: Any, where: str = "state") -> None:
    """Raise TypeError unless `value` is data torch.load(weights_only=True) reads back."""
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) not in (int, str):
                raise TypeError(f"{where}: key {key!r} is a {type(key).__name__}")
            check_plain(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_plain(item, f"{where}[{index}]")
    elif type(value) not in _PLAIN_TYPES and not isinstance(value, torch.Tensor):
        raise TypeError(f"{where} is a {type(value).__module__}.{type(value).__name__}, not plain data")


def save_atomic(state: dict, path: Path) -> None:
    """Write `state` so that a kill at any instant leaves the old file or the new one, whole.

    Only plain data is written (check_plain), so every checkpoint opens with weights_only=True.
    Written through `core.files.atomic_file` (tmp, fsync, rename, fsync of the folder).
    An OSError (disk full, permissions) leaves the previous file untouched and is re-raised as
    a CheckpointError.
    """
    check_plain(state)
    state = on_cpu(state)
    try:  # torch's writer turns a signal's exception into a RuntimeError: a stop waits for the file
        with deferred(), atomic_file(path) as handle:
            torch.save(state, handle)
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint {path}: {exc.strerror or exc}") from exc


def on_cpu(value: Any) -> Any:
    """`value` with every tensor on the CPU (a tensor already there is not copied)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: on_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(on_cpu(item) for item in value)
    return value


def load(path: Path) -> dict:
    """Open a recrunner checkpoint safely, every tensor on the CPU; anything else is a one-line
    CheckpointError. The only place a checkpoint is read."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with deferred():  # a stop while reading is not a corrupt file
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for truncated or foreign files
        message = str(exc)
        if "Unsupported global" in message:  # a pickled object: opening it could run code
            raise CheckpointError(
                f"{path} needs arbitrary unpickling (not a recrunner checkpoint); refusing to open it"
            ) from None
        raise CheckpointError(f"{path} is corrupt or truncated ({_load_failure(message, exc)})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a recrunner checkpoint (format {FORMAT_VERSION})")
    return state


def load_training_state(path: Path) -> dict:
    """A last.pth or epoch-NNNN.pth, what resume needs; a best.pth is refused with its reason."""
    state = load(path)
    if state.get("kind") != "last":
        raise CheckpointError(f"{path} holds weights only (best.pth); resume needs last.pth or epoch-NNNN.pth")
    return state


def _load_failure(message: str, exc: Exception) -> str:
    """The informative part of torch.load's error (it wraps it in paragraphs of advice)."""
    _, marker, rest = message.partition("WeightsUnpickler error:")
    lines = [line.strip() for line in (rest if marker else message).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:120]
