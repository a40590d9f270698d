"""Early stopping on any metric RecBole reports.

Patience counts validations, as RecBole's `stopping_step` does: training stops at the
validation that makes it `patience + 1` validations without an improvement. A value counts as
an improvement when it is at least `min_delta` better than the best so far; with
`min_delta = 0` a tie counts, exactly as `recbole.utils.early_stopping`.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

from .base import Callback

logger = logging.getLogger("recrunner")


def metric_bigger(metric: str) -> bool:
    """True when a larger value of `metric` ("ndcg@10", "rmse") is better (pure)."""
    from recbole.evaluator.register import smaller_metrics

    return metric.split("@")[0].lower() not in smaller_metrics


def improved(value: float, best: float | None, *, bigger: bool, min_delta: float = 0.0) -> bool:
    """Whether `value` improves on `best` by at least `min_delta` (pure; NaN never improves)."""
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value >= best + min_delta if bigger else value <= best - min_delta


class Best(NamedTuple):
    """The best value of a watched metric so far, its epoch, and validations since it."""

    value: float | None = None
    epoch: int | None = None
    since: int = 0


def track(best: Best, value: float, epoch: int, *, bigger: bool, min_delta: float = 0.0) -> Best:
    """`best` after a validation with `value` at `epoch` (pure): the one rule for both the
    loop's best epoch (valid_metric, which best.pth holds) and early stopping (its metric)."""
    if improved(value, best.value, bigger=bigger, min_delta=min_delta):
        return Best(value, epoch, 0)
    return best._replace(since=best.since + 1)


class EarlyStopping(Callback):
    """Request a stop after `patience + 1` validations in a row without improvement of `metric`."""

    order = 10  # after callbacks that only observe

    def __init__(self, metric: str, patience: int, min_delta: float = 0.0, bigger: bool | None = None):
        if patience < 0 or min_delta < 0:
            raise ValueError("patience and min_delta must not be negative")
        self.metric = metric.lower()
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.bigger = metric_bigger(self.metric) if bigger is None else bigger
        self.tracked = Best()

    def on_fit_start(self, loop, control):
        from ...config.params import require_metric

        require_metric(loop.config, "early_stop_metric", self.metric)  # a callback built outside prepare

    def on_validation_end(self, loop, control, metrics, score):
        self.tracked = track(self.tracked, float(metrics[self.metric]), loop.epoch, bigger=self.bigger,
                             min_delta=self.min_delta)
        best, epoch, bad = self.tracked
        if bad > self.patience:
            logger.info(f"early stopping: {self.metric} has not improved for {bad} validations "
                        f"(best {best} at epoch {epoch})")
            control.should_stop = True
        elif bad == self.patience and bad > 0:
            logger.warning(f"early stopping is one validation away: {self.metric} has not improved for "
                           f"{bad} validations (best {best} at epoch {epoch})")

    # read by tests and users before the tracker was one value
    best = property(lambda self: self.tracked.value)
    best_epoch = property(lambda self: self.tracked.epoch)
    bad_validations = property(lambda self: self.tracked.since)

    @property
    def state_key(self) -> str:
        return f"EarlyStopping[{self.metric}]"

    def state_dict(self) -> dict:
        return {"best": self.tracked.value, "best_epoch": self.tracked.epoch, "bad_validations": self.tracked.since}

    def load_state_dict(self, state: dict) -> None:
        self.tracked = Best(state["best"], state["best_epoch"], state["bad_validations"])
