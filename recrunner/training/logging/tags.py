"""Every scalar a run reports, by tag: one place for TensorBoard, the trackers and the HParams columns.

    Train/Loss (Train/Loss_<i> per part of a tuple loss)   Train/LR      step: epoch
    Valid/<metric>, Valid/score                            step: epoch, -1 before training
                                                           (eval_every_steps: the epoch's newest validation)
    Valid-step/<metric>, Valid-step/score                  step: optimizer step (eval_every_steps only)
    Train-step/Loss, Train-step/LR                         step: optimizer step (log_every_steps only)
    Best_Valid/<metric>, Best_Valid/score                  step: the best epoch
    Test/<metric>                                          step: the best epoch
"""

from __future__ import annotations

import math
from typing import Mapping


def train(losses, lr=None) -> dict:
    """An epoch's loss (a float, RecBole's tuple of parts, or None: no loss) and learning rate (pure)."""
    scalars = {}
    if losses is not None:
        scalars["Train/Loss"] = float(sum(losses)) if isinstance(losses, tuple) else float(losses)
    if isinstance(losses, tuple):
        scalars.update({f"Train/Loss_{i}": float(part) for i, part in enumerate(losses)})
    if lr is not None:
        scalars["Train/LR"] = float(lr)
    return scalars


def train_steps(loss: float, lr: float) -> dict:
    """The mean batch loss since the last step log, and the learning rate (pure)."""
    return {"Train-step/Loss": float(loss), "Train-step/LR": float(lr)}


def validation(metrics: Mapping, score=None, prefix: str = "Valid") -> dict:
    """Every metric of a validation under `prefix` (Valid, Best_Valid), and the score if finite (pure)."""
    scalars = {f"{prefix}/{name}": float(value) for name, value in (metrics or {}).items()}
    if score is not None and math.isfinite(score):
        scalars[f"{prefix}/score"] = float(score)
    return scalars


def test(metrics: Mapping) -> dict:
    return {f"Test/{name}": float(value) for name, value in (metrics or {}).items()}


def hparam_metrics(metric_names) -> list[str]:
    """The HParams table's metric columns for runs that report these metrics (pure)."""
    names = list(metric_names)
    return [f"Best_Valid/{m}" for m in names] + (["Best_Valid/score"] if names else []) + [f"Test/{m}" for m in names]
