"""LRScheduler: linear warmup, then a constant, step, cosine or reduce-on-plateau schedule.

One schedule step is an epoch or an optimizer step (`interval`). The multiplier of the base
learning rate at every step is the pure function `lr_multiplier`; the callback applies it to the
optimizer, counts steps, keeps the plateau state, and saves all of it in last.pth, so a resumed
run continues the schedule where it stopped.

    lr_scheduler: cosine      lr_warmup: 2      lr_interval: epoch      lr_min: 1.0e-5
"""

from __future__ import annotations

import logging
import math

from ...core.errors import ConfigError
from .base import Callback
from .early_stopping import improved

logger = logging.getLogger("recrunner")

SCHEDULES = ("constant", "step", "cosine", "plateau")
INTERVALS = ("epoch", "batch")


def lr_multiplier(step: int, schedule: str, *, warmup: int = 0, total: int = 1, step_size: int = 10,
                  gamma: float = 0.1, min_ratio: float = 0.0, plateau_factor: float = 1.0) -> float:
    """The factor on the base learning rate at schedule step `step` (0-based) (pure).

    The first `warmup` steps ramp linearly: (step + 1) / (warmup + 1). After them, `t` steps in:
    constant 1; step gamma ** (t // step_size); cosine from 1 down to `min_ratio` over the
    remaining `total - warmup` steps; plateau the factor its callback has reached.
    """
    if step < warmup:
        return (step + 1) / (warmup + 1)
    t = step - warmup
    if schedule == "constant":
        return 1.0
    if schedule == "step":
        return gamma ** (t // step_size)
    if schedule == "cosine":
        span = max(1, total - warmup)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(t, span) / span))
    if schedule == "plateau":
        return plateau_factor
    raise ValueError(f"unknown lr schedule {schedule!r}; schedules: {', '.join(SCHEDULES)}")


class LRScheduler(Callback):
    order = -5  # the learning rate is set before anything reads it

    def __init__(self, schedule: str, *, warmup: int = 0, interval: str = "epoch", step_size: int = 10,
                 gamma: float = 0.1, patience: int = 2, min_lr: float = 0.0):
        _check(schedule, warmup, interval, step_size, gamma, patience, min_lr)
        self.schedule, self.warmup, self.interval = schedule, int(warmup), interval
        self.step_size, self.gamma, self.patience, self.min_lr = int(step_size), float(gamma), int(patience), min_lr
        self.base_lrs: list[float] | None = None
        self.steps = 0  # optimizer steps taken (interval "batch")
        self.plateau_factor, self.plateau_best, self.plateau_bad = 1.0, None, 0
        self._total = 1
        self._hook = None
        self._shown_lr = None

    # ---------------------------------------------------------------- events
    def on_fit_start(self, loop, control):
        if self.base_lrs is None:
            self.base_lrs = [group["lr"] for group in loop.optimizer.param_groups]
        if self.interval == "batch":
            self._total = loop.epochs * loop.steps_per_epoch
            self._hook = loop.optimizer.register_step_post_hook(lambda *_: self._after_optimizer_step(loop))
            self._apply(loop, self.steps)
        else:
            self._total = loop.epochs

    def on_epoch_start(self, loop, control):
        if self.interval == "epoch":
            self._apply(loop, loop.epoch)
        self._log_change(loop)

    def on_validation_end(self, loop, control, metrics, score):
        if self.schedule != "plateau":
            return
        if improved(score, self.plateau_best, bigger=loop.valid_metric_bigger):
            self.plateau_best, self.plateau_bad = score, 0
            return
        self.plateau_bad += 1
        if self.plateau_bad > self.patience:
            self.plateau_factor *= self.gamma
            self.plateau_bad = 0
            if self.interval == "batch":
                self._apply(loop, self.steps)

    def on_fit_end(self, loop, control):
        self._remove_hook()

    def on_exception(self, loop, control, exception):
        self._remove_hook()

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {"base_lrs": self.base_lrs, "steps": self.steps, "plateau_factor": self.plateau_factor,
                "plateau_best": self.plateau_best, "plateau_bad": self.plateau_bad}

    def load_state_dict(self, state: dict) -> None:
        self.base_lrs, self.steps = state["base_lrs"], state["steps"]
        self.plateau_factor, self.plateau_best, self.plateau_bad = (
            state["plateau_factor"], state["plateau_best"], state["plateau_bad"])

    # ---------------------------------------------------------------- helpers
    def _after_optimizer_step(self, loop):
        self.steps += 1
        self._apply(loop, self.steps)

    def _apply(self, loop, step):
        for group, base in zip(loop.optimizer.param_groups, self.base_lrs):
            factor = lr_multiplier(step, self.schedule, warmup=self.warmup, total=self._total,
                                   step_size=self.step_size, gamma=self.gamma,
                                   min_ratio=self.min_lr / base if base else 0.0, plateau_factor=self.plateau_factor)
            group["lr"] = max(base * factor, self.min_lr) if self.schedule == "plateau" else base * factor

    def _log_change(self, loop):
        lr = loop.optimizer.param_groups[0]["lr"]
        if self._shown_lr is not None and not math.isclose(lr, self._shown_lr, rel_tol=1e-9):
            logger.info(f"learning rate {self._shown_lr:.4g} -> {lr:.4g} (epoch {loop.epoch}, {self.schedule} schedule)")
        self._shown_lr = lr

    def _remove_hook(self):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None


def _check(schedule, warmup, interval, step_size, gamma, patience, min_lr):
    problems = []
    if schedule not in SCHEDULES:
        problems.append(f"lr_scheduler {schedule!r} is not one of {', '.join(SCHEDULES)}")
    if interval not in INTERVALS:
        problems.append(f"lr_interval {interval!r} is not one of {', '.join(INTERVALS)}")
    if not isinstance(warmup, int) or warmup < 0:
        problems.append(f"lr_warmup must be a whole number >= 0, got {warmup!r}")
    if not isinstance(step_size, int) or step_size < 1:
        problems.append(f"lr_step_size must be a whole number >= 1, got {step_size!r}")
    if not 0 < gamma <= 1:
        problems.append(f"lr_gamma must be in (0, 1], got {gamma!r}")
    if not isinstance(patience, int) or patience < 0:
        problems.append(f"lr_patience must be a whole number >= 0, got {patience!r}")
    if min_lr < 0:
        problems.append(f"lr_min must be >= 0, got {min_lr!r}")
    if problems:
        raise ConfigError("; ".join(problems))
