"""What the compiler failed on, remembered beside its cache, so the next run does not fail first again.

A method the compiler fails on is compiled once more without inductor's pattern rewrites, or runs
eagerly (apply.py, `FastMethod`). Without a memory every run pays the failed compile again, cache
or not: SASRec with `n_heads: 1` (configs/quick.yaml) compiled its scoring from a filled cache in
6.8 s, 1.5 s once remembered, on this project's CPU (bench/bench_compile.py, BENCHMARKS.md). So
the outcome is written to `compiler-failures.json` in the compiler's cache folder
(`TORCHINDUCTOR_CACHE_DIR`: `<output>/.cache/compile/` for a run), and a later run of the same
model starts where the first one ended, with one log line saying why:

| outcome       | remembered when                                  | a later run                       |
|---------------|--------------------------------------------------|-----------------------------------|
| `no rewrites` | inductor failed and the same method then compiled | compiles without the rewrites     |
|               | without its pattern rewrites                     |                                   |
| `eager`       | dynamo failed to trace the method (its Python)   | runs the method eagerly           |

Only failures that belong to the model are remembered: a compile that failed with and without the
rewrites may be the machine's (no C++ compiler, a full disk), so it is tried again next time.
A key is one method of one model as built (`model_key`: its class, every module's int, float, bool
and str attributes but the counts its loss raises, its tensors' shapes and dtypes), the plan's
precision and compile settings, the device type and the torch version: another size, dataset or
torch is compiled afresh. Deleting the file (or the cache folder) forgets every outcome.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from ...core.files import EntryFile
from .cache_keys import compile_cache_folder

logger = logging.getLogger("recrunner")

FILE = "compiler-failures.json"
OUTCOMES = ("no rewrites", "eager")
_PRIMITIVES = (bool, int, float, str)


@dataclass(frozen=True)
class Failure:
    outcome: str  # OUTCOMES
    reason: str   # the compiler's error in one line (compiler.compiler_reason)
    model: str    # the model class and method, for a reader of the file
    when: str = ""

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"a remembered compiler outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    def text(self) -> str:
        """`SASRec.full_sort_predict: compiled without inductor's pattern rewrites (the error), since ...`"""
        does = "runs eagerly" if self.outcome == "eager" else "compiled without inductor's pattern rewrites"
        return f"{self.model}: {does} ({self.reason}), since {self.when}"


def model_key(model: torch.nn.Module, method: str, settings: str, counted: tuple[str, ...] = ()) -> str:
    """One method of `model` as built, under one plan's `settings`, on this device type and torch
    (pure over the model): equal for another run of the same model and sizes on the same data."""
    parts: list = [type(model).__qualname__, method, settings, torch.__version__, _device_type(model)]
    for name, module in model.named_modules():
        skip = set(counted) if module is model else set()
        attributes = sorted((k, repr(v)) for k, v in vars(module).items() if isinstance(v, _PRIMITIVES)
                            and not k.startswith("_") and k != "training" and k not in skip)
        parts.append((name, type(module).__qualname__, attributes))
    parts.append(sorted((name, tuple(t.shape), str(t.dtype)) for name, t in model.state_dict().items()))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def _device_type(model: torch.nn.Module) -> str:
    tensor = next(model.parameters(), None)
    return tensor.device.type if tensor is not None else "cpu"


class FailureBook:
    """The remembered outcomes of one cache folder: one JSON file, rewritten whole under a lock
    (cells of a sweep share the folder)."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder is not None else compile_cache_folder()
        self.file = EntryFile(self.folder / FILE, "failures", unreadable=lambda exc: logger.warning(
            f"fast mode: {self.path} is unreadable ({type(exc).__name__}); "
            "compiler failures are found again and the file rewritten"), unwritable=lambda exc: logger.warning(
            f"fast mode: could not remember the compiler's failure in {self.path}: {exc}"))

    @property
    def path(self) -> Path:
        return self.folder / FILE

    def failures(self) -> list[Failure]:
        """Every outcome remembered, oldest first (what `recrunner cache list` shows)."""
        found = [_failure(entry) for entry in self.file.read().values()]
        return sorted((f for f in found if f is not None), key=lambda f: f.when)

    def get(self, key: str) -> Failure | None:
        return _failure(self.file.read().get(key))

    def add(self, key: str, failure: Failure) -> None:
        """Remember `failure` for `key`; a folder that cannot be written only loses the memory (one line)."""
        stamped = Failure(failure.outcome, failure.reason, failure.model,
                          failure.when or datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self.file.update(lambda entries: {**entries, key: asdict(stamped)}, indent=1, sort_keys=True)


def _failure(entry) -> Failure | None:
    try:
        return Failure(**entry) if entry is not None else None
    except (TypeError, ValueError):
        return None  # an entry another recrunner wrote: compiled afresh
