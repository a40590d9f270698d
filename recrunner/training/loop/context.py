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
    batches_seen: int = 0                 # batches whose loss was computed (read or pending)
    steps_counted: int = 0                # its optimizer steps already counted in state.global_step
    running_loss: float | None = None     # its loss so far, summed as RecBole sums it
    part_sums: tuple | None = None        # each part's sum so far, where the model's loss has parts
    non_finite_batch: int | None = None   # its first batch with a non-finite loss
    rng: dict | None = None               # every RNG when its batch order was drawn (step checkpoints keep it)

    def count_loss(self, value: float, parts: tuple | None = None):
        """A batch's loss (its value, and its parts' values) added to the running sums, as RecBole adds them."""
        self.running_loss = value if self.running_loss is None else self.running_loss + value
        if parts is not None:
            self.part_sums = parts if self.part_sums is None else tuple(map(sum, zip(self.part_sums, parts)))

    def epoch_loss(self):
        """What RecBole's epoch returns: the parts' sums where the loss has parts, else the sum."""
        return self.part_sums if self.part_sums is not None else self.running_loss
