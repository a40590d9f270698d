"""A run's record, metrics.json: the one type that writes and reads it, and the run statuses.

Written at the start of a run (status running) and at its end (ok, failed or interrupted), always
atomically; every reader (the experiment itself, sweep tables, the report, the HParams columns,
`--dry-run`) goes through `RunRecord.read`, which tolerates keys it does not know and gives each
missing field its default, so records written by older versions stay readable.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.layout import RunPaths

def device_text(usage: dict | None) -> str:
    """A record's `device` in a few words, for tables and the final line: `cuda:0, peak 3.0 GiB
    allocated`, `cpu, peak 812 MiB RSS` (pure)."""
    from ..core.files import size_text

    if not usage or not usage.get("device"):
        return ""
    peak = usage.get("peak_memory_mb")
    what = "RSS" if usage.get("device") == "cpu" else "allocated"
    return usage["device"] + (f", peak {size_text(peak)} {what}" if peak is not None else "")


class Status(str, enum.Enum):
    """A run's status; the values are what metrics.json, results.csv and the report show."""

    PENDING = "pending"          # a sweep cell not started yet (sweep.jsonl, results tables)
    RUNNING = "running"          # started, not ended (or the process died without a word)
    OK = "ok"                    # trained and tested
    FAILED = "failed"            # ended with an error (the record says which)
    INTERRUPTED = "interrupted"  # SIGTERM / Ctrl-C: the same command resumes it
    PRUNED = "pruned"            # a search trial its pruner stopped (the record says at which epoch and why)

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        """Nothing left to run: trained and tested, or pruned."""
        return self in (Status.OK, Status.PRUNED)


@dataclass
class RunRecord:
    status: Status = Status.RUNNING
    error: str | None = None                         # why it failed, or why it was pruned
    model: str | None = None
    dataset: str | None = None
    sweep: str | None = None
    run_id: str | None = None
    params: dict = field(default_factory=dict)       # what the run set (grid, --config-file, --set)
    seed: int | None = None
    valid_metric: str | None = None
    fingerprint: str | None = None                   # the settings that make this run this run
    started: str | None = None
    finished: str | None = None
    versions: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)   # command, git, versions, data files, machine (provenance.py)
    device: dict = field(default_factory=dict)       # where it trained: device, name, peak_memory_mb (training/loop/device.py)
    best_epoch: int | None = None
    best_step: int | None = None                     # its optimizer step (only where the run validates by steps)
    best_valid_score: float | None = None
    best_valid: dict = field(default_factory=dict)   # validation metrics of the best epoch
    initial_valid: dict = field(default_factory=dict)  # epoch -1
    test: dict = field(default_factory=dict)         # test metrics with the best weights
    epochs_trained: int | None = None
    max_epochs: int | None = None                    # the cap the trainer applied (`epochs`; 1 for Pop, EASE...)
    stopped_early: bool | None = None                # early stopping ended training, not the cap
    epochs_to_best: int | None = None                # best_epoch + 1
    seconds_to_best: float | None = None             # training and validation time until the best epoch ended
    under_trained: str | None = None                 # "may be under-trained: ..." (convergence.py), else None
    caveat: str | None = None                        # what the model does that its numbers depend on (models.model_caveat)
    protocol: dict = field(default_factory=dict)     # split, order, ranking, filters, counts, leakage (protocol.py)
    search: dict = field(default_factory=dict)       # a search's run: {"role": "trial" | "final", "trial": number}
    pretrain_seconds: float | None = None            # S3Rec, RaCT: their pre-training stages
    data_seconds: float | None = None
    train_seconds: float | None = None               # TrainingState.train_seconds: every process's epochs
    test_seconds: float | None = None
    compile_seconds: float | None = None            # fast mode: torch.compile's share of train and test
    compile_phases: dict = field(default_factory=dict)  # its parts: capture, autograd's graph, forward, backward (compile_clock.py)
    compile_cache: dict = field(default_factory=dict)  # graphs the compiler's cache held, and those it compiled (compile_clock.py)

    @property
    def seconds(self) -> float | None:
        """The run's own time: pre-training, data, training and test."""
        parts = (self.pretrain_seconds, self.data_seconds, self.train_seconds, self.test_seconds)
        return round(sum(p or 0 for p in parts), 3) or None

    def finish(self, status: Status, error: str | None, trainer, when: str) -> None:
        """The run's end: its status and error, and what the trainer (if one was built) tracked."""
        self.status, self.error, self.finished = status, error, when
        if trainer is not None:
            self.best_epoch = trainer.best_epoch
            if trainer.steps.eval_every:  # recrunner.training.loop.steps
                self.best_step = trainer.state.best_step
            self.best_valid_score = trainer.best_valid_score if trainer.best_epoch is not None else None
            self.best_valid = {k: float(v) for k, v in (trainer.best_valid_result or {}).items()}
            self.initial_valid = {k: float(v) for k, v in (trainer.initial_valid_result or {}).items()}
            self.epochs_trained = len(trainer.train_loss_dict)
            self.train_seconds = round(trainer.state.train_seconds, 3)  # every process's, as last.pth keeps it
            self._convergence(trainer)

    def _convergence(self, trainer) -> None:
        from .convergence import under_trained

        state = trainer.state
        self.max_epochs, self.stopped_early = trainer.epochs, bool(state.stopped_early)
        self.epochs_to_best = None if self.best_epoch is None else self.best_epoch + 1
        self.seconds_to_best = None if state.seconds_to_best is None else round(state.seconds_to_best, 3)
        if self.status is not Status.OK:
            return
        validating = trainer.eval_step if self.best_valid else 0
        by_steps = trainer.steps.eval_every and self.best_valid
        self.under_trained = under_trained(best_epoch=self.best_epoch, epochs_trained=self.epochs_trained,
                                           max_epochs=self.max_epochs, stopped_early=self.stopped_early,
                                           eval_step=validating, single_pass=trainer.single_pass,
                                           best_step=self.best_step if by_steps else None,
                                           validated_step=state.validated_step if by_steps else None)

    def warnings(self) -> list[str]:
        """What a reader of this run's numbers must know: under-training, the model's caveat, leakage, sampled metrics."""
        from .protocol import warnings

        return [text for text in (self.under_trained, self.caveat) if text] + warnings(self.protocol)

    def to_json(self) -> dict:
        values = dataclasses.asdict(self)
        values["status"] = self.status.value
        if self.pretrain_seconds is None:  # only staged models have it
            del values["pretrain_seconds"]
        if self.best_step is None:  # only runs that validate by steps have it
            del values["best_step"]
        return values

    @classmethod
    def from_json(cls, data: dict) -> "RunRecord":
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {k: v for k, v in data.items() if k in known and v is not None}
        status = values.get("status", Status.FAILED.value)
        values["status"] = Status(status) if status in Status._value2member_map_ else Status.FAILED
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> "RunRecord | None":
        """The record at `path` (a run directory or its metrics.json); None if absent or unreadable."""
        path = Path(path)
        path = RunPaths(path).metrics if path.is_dir() else path
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls.from_json(data) if isinstance(data, dict) else None

    def write(self, path: Path) -> None:
        from ..core.files import write_text_atomic

        write_text_atomic(Path(path), json.dumps(self.to_json(), indent=2, default=str) + "\n")
