"""NonFiniteGuard: a non-finite loss or validation score ends the run as failed, with its reason.

RecBole raises a bare `ValueError("Training loss is nan")` from inside its epoch. CustomTrainer
instead ends the epoch at the first non-finite batch loss and reports the epoch's loss as NaN;
this guard turns that (or a NaN/Inf validation score or metric) into a failure request, which
the loop raises as `TrainingFailed`: the run is recorded as failed in metrics.json and in
TensorBoard's status, and a sweep goes on with its other runs.
"""

from __future__ import annotations

import math

from .base import Callback

HINT = "lower learning_rate, set clip_grad_norm or use an lr_scheduler with lr_warmup"


def non_finite(values) -> list[str]:
    """Names of the entries of {name: number} that are NaN or infinite (pure)."""
    return [name for name, value in values.items() if not math.isfinite(float(value))]


class NonFiniteGuard(Callback):
    order = -10  # before anything that would act on a meaningless number

    def on_train_epoch_end(self, loop, control, losses):
        parts = losses if isinstance(losses, tuple) else (losses,)
        bad = non_finite({f"loss_{i}": v for i, v in enumerate(parts)})
        if bad:
            where = f" at batch {loop.non_finite_batch}" if loop.non_finite_batch is not None else ""
            control.failure = f"training loss became {_first_bad(parts)} in epoch {loop.epoch}{where}; {HINT}"

    def on_validation_end(self, loop, control, metrics, score):
        bad = non_finite({"score": score, **metrics})
        if bad:
            control.failure = (f"validation gave non-finite {', '.join(bad)} in epoch {loop.epoch} "
                               f"(the weights have diverged); {HINT}")


def _first_bad(values) -> str:
    return next(str(float(v)) for v in values if not math.isfinite(float(v)))
