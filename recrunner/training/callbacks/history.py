"""HistoryWriter: one JSON line per epoch in the run directory (history.jsonl).

    {"epoch": 3, "loss": 812.4, "losses": null, "train_seconds": 1.31, "lr": 0.001, "score": 0.081,
     "valid": {"recall@10": 0.15, ...}, "best_epoch": 3, "seconds": 1.92, "time": "2026-11-21T10:02:11.284+00:00"}

`train_seconds`: the epoch's training (RecBole's "epoch N training [time: ...]"); `seconds`: the
whole epoch, its validation and checkpoints included.

Epoch -1 (the initial validation) is the first line. A resumed run first drops the lines of
epochs it is about to train again, so every epoch appears once, as in TensorBoard.

With `eval_every_steps` each validation is a line of its own, written when it ends, with the
epoch it fell in and its optimizer step; the epoch's line then has its step and no validation:

    {"epoch": 0, "step": 200, "score": 0.05, "valid": {...}, "best_epoch": 0, "best_step": 200, "time": ...}
    {"epoch": 0, "step": 388, "lr": 0.001, "loss": 1201.3, "losses": null, "best_epoch": 0, "seconds": 51.2, ...}

A run resumed within an epoch keeps every line up to the step it resumes at.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from ...core.files import write_text_atomic
from .base import Callback, total_loss


class HistoryWriter(Callback):
    order = 50

    def __init__(self, path: Path):
        self.path = Path(path)
        self._row: dict = {}
        self._started = self._elapsed = 0.0
        self._fresh = True

    def on_fit_start(self, loop, control):
        # a fresh start validates epoch -1 again, so it drops that line too
        within_epoch = loop.start_batch > 0
        self._drop_epochs_from(loop.start_epoch if loop.start_epoch > 0 or within_epoch else -1,
                               loop.global_step if within_epoch or loop.start_epoch > 0 else None)
        self._fresh = loop.start_epoch == 0 and not within_epoch

    def on_epoch_start(self, loop, control):
        if getattr(loop, "start_batch", 0) and self._row.get("epoch") == loop.epoch:  # resumed within it: its row goes on
            self._started = time.perf_counter() - self._elapsed
            return
        if loop.epoch == 0 and self._fresh and loop.initial_valid_result is not None:
            self._append({"epoch": -1, "valid": _floats(loop.initial_valid_result)})
        self._row = {"epoch": loop.epoch, "lr": loop.optimizer.param_groups[0]["lr"]}
        self._started = time.perf_counter()

    def on_train_epoch_end(self, loop, control, losses):
        parts = [float(v) for v in losses] if isinstance(losses, tuple) else None
        self._row.update(loss=float(total_loss(losses)), losses=parts,
                         train_seconds=round(time.perf_counter() - self._started, 3))

    def on_validation_end(self, loop, control, metrics, score):
        if getattr(loop, "eval_every_steps", None) is None:
            self._row.update(score=float(score), valid=_floats(metrics))
            return
        self._append({"epoch": loop.epoch, "step": loop.global_step, "score": float(score), "valid": _floats(metrics),
                      "best_epoch": loop.best_epoch, "best_step": loop.best_step})

    def on_epoch_end(self, loop, control):
        if getattr(loop, "eval_every_steps", None) is not None:
            self._row["step"] = loop.global_step
        self._row.update(best_epoch=loop.best_epoch, seconds=round(time.perf_counter() - self._started, 3))
        self._append(self._row)

    def state_dict(self) -> dict:
        """The epoch's line so far (its learning rate, its time), for a resume within the epoch."""
        return {"row": dict(self._row), "elapsed": time.perf_counter() - self._started if self._started else 0.0}

    def load_state_dict(self, state: dict) -> None:
        self._row, self._elapsed = dict(state.get("row") or {}), float(state.get("elapsed") or 0.0)

    def _append(self, row: dict) -> None:
        row = {**row, "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, allow_nan=True) + "\n")

    def _drop_epochs_from(self, epoch: int, step: int | None = None) -> None:
        """Keep the lines before `epoch`, and the step validations up to `step` (a resume within an epoch)."""
        if not self.path.exists():
            return
        rows = [(line, json.loads(line)) for line in self.path.read_text(encoding="utf-8").splitlines()
                if _complete(line)]
        kept = [line for line, row in rows
                if row["epoch"] < epoch or ("valid" in row and step is not None and row.get("step", step + 1) <= step)]
        write_text_atomic(self.path, "".join(line + "\n" for line in kept))


def _floats(metrics) -> dict:
    return {name: float(value) for name, value in metrics.items()}


def _complete(line: str) -> bool:
    """A line a killed process finished writing."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def read_history(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if _complete(line)]
