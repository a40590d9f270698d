"""RunResult: how one run ended, the one shape from `run_experiment` through a sweep's workers
(a fresh process or a Ray task: it pickles) to the console line and a search's study."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .record import RunRecord, Status


@dataclass(frozen=True)
class RunResult:
    status: Status
    run_dir: Path | None = None       # None: the run never got a folder (it failed before)
    best_epoch: int | None = None
    best_valid: dict | None = None
    test: dict | None = None
    error: str | None = None          # why it failed, or why it was pruned
    skipped: bool = False             # already finished: nothing was trained
    warnings: tuple[str, ...] = ()    # may be under-trained, leaks the future, sampled metrics
    seconds: float | None = None      # the cell's wall time where a sweep ran it (set-up included)
    device: dict | None = None        # the record's device usage: device, name, peak_memory_mb

    @classmethod
    def from_record(cls, run_dir: Path, record: RunRecord, skipped: bool = False) -> "RunResult":
        return cls(status=record.status, run_dir=Path(run_dir), best_epoch=record.best_epoch,
                   best_valid=record.best_valid, test=record.test, error=record.error, skipped=skipped,
                   warnings=tuple(record.warnings()), device=dict(record.device) or None)

    @classmethod
    def failed(cls, error: str, status: Status = Status.FAILED, run_dir: Path | None = None) -> "RunResult":
        """A run that ended before (or without) a record of its own: its one-line reason."""
        return cls(status=status, run_dir=run_dir, error=error)

    def timed(self, seconds: float) -> "RunResult":
        return replace(self, seconds=round(seconds, 3))

    def at(self, run_dir: Path | None) -> "RunResult":
        """The same result with its run folder filled in where it had none."""
        return self if self.run_dir is not None or run_dir is None else replace(self, run_dir=Path(run_dir))
