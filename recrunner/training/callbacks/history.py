"""HistoryWriter: one JSON line per epoch in the run directory (history.jsonl).

    {"epoch": 3, "loss": 812.4, "losses": null, "lr": 0.001, "score": 0.081,
     "valid": {"recall@10": 0.15, ...}, "best_epoch": 3, "seconds": 1.92, "time": "2026-11-21T10:02:11+00:00"}

Epoch -1 (the initial validation) is the first line. A resumed run first drops the lines of
epochs it is about to train again, so every epoch appears once, as in TensorBoard.
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
        self._started = 0.0

    def on_fit_start(self, loop, control):
        # a fresh start validates epoch -1 again, so it drops that line too
        self._drop_epochs_from(loop.start_epoch if loop.start_epoch > 0 else -1)

    def on_epoch_start(self, loop, control):
        if loop.epoch == 0 and loop.initial_valid_result is not None:
            self._append({"epoch": -1, "valid": _floats(loop.initial_valid_result)})
        self._row = {"epoch": loop.epoch, "lr": loop.optimizer.param_groups[0]["lr"]}
        self._started = time.perf_counter()

    def on_train_epoch_end(self, loop, control, losses):
        parts = [float(v) for v in losses] if isinstance(losses, tuple) else None
        self._row.update(loss=float(total_loss(losses)), losses=parts)

    def on_validation_end(self, loop, control, metrics, score):
        self._row.update(score=float(score), valid=_floats(metrics))

    def on_epoch_end(self, loop, control):
        self._row.update(best_epoch=loop.best_epoch, seconds=round(time.perf_counter() - self._started, 3))
        self._append(self._row)

    def _append(self, row: dict) -> None:
        row = {**row, "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, allow_nan=True) + "\n")

    def _drop_epochs_from(self, epoch: int) -> None:
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines()
                if _complete(line) and json.loads(line)["epoch"] < epoch]
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
