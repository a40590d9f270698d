"""Early stopping on any metric RecBole reports.

Patience counts validations, as RecBole's `stopping_step` does: training stops at the
validation that makes it `patience + 1` validations without an improvement. A value counts as
an improvement when it is at least `min_delta` better than the best so far; with
`min_delta = 0` a tie counts, exactly as `recbole.utils.early_stopping`.
"""

from __future__ import annotations

import logging
import math

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
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.bad_validations = 0

    def on_fit_start(self, trainer, control):
        from ..config import require_metric

        require_metric(trainer.config, "early_stop_metric", self.metric)  # a callback built outside prepare

    def on_validation_end(self, trainer, control, metrics, score):
        value = float(metrics[self.metric])
        if improved(value, self.best, bigger=self.bigger, min_delta=self.min_delta):
            self.best, self.best_epoch, self.bad_validations = value, trainer.epoch, 0
            return
        self.bad_validations += 1
        if self.bad_validations > self.patience:
            logger.info(f"early stopping: {self.metric} has not improved for {self.bad_validations} validations "
                        f"(best {self.best} at epoch {self.best_epoch})")
            control.should_stop = True
        elif self.bad_validations == self.patience:
            logger.warning(f"early stopping is one validation away: {self.metric} has not improved for "
                           f"{self.bad_validations} validations (best {self.best} at epoch {self.best_epoch})")

    def state_dict(self) -> dict:
        return {"best": self.best, "best_epoch": self.best_epoch, "bad_validations": self.bad_validations}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.best_epoch, self.bad_validations = state["best"], state["best_epoch"], state["bad_validations"]
