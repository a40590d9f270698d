"""The loop's context, explicit: what a fit was called with, and where the epoch being trained is.

`FitCall` is frozen: one per `fit`, read by the epoch, its validations and its step boundaries.
`EpochProgress` is the epoch's own bookkeeping, new at every epoch's start. What must survive a
process (the step, the batch within the epoch, its loss so far) is in `TrainingState`, which
last.pth saves whole; nothing here is saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class FitCall:
    """`fit(train_data, valid_data, verbose, saved, show_progress, callback_fn)`, less the training data."""

    valid_data: Any = None
    verbose: bool = True
    saved: bool = True                    # write checkpoints (RecBole's name)
    show_progress: bool = False           # RecBole's tqdm bars
    callback_fn: Callable | None = None   # RecBole's callback_fn(epoch, valid_score)


@dataclass
class EpochProgress:
    """Where the epoch being trained is."""

    index: int = 0                        # the epoch
    start_batch: int = 0                  # the batch its training began at (> 0: resumed within it)
    batches_seen: int = 0                 # batches whose loss was checked (RecBole's _check_nan)
    steps_counted: int = 0                # its optimizer steps already counted in state.global_step
    running_loss: float | None = None     # its loss so far, summed as RecBole sums it
    non_finite_batch: int | None = None   # its first batch with a non-finite loss
    rng: dict | None = None               # every RNG when its batch order was drawn (step checkpoints keep it)
