"""RecBole's loaders hand each batch's rows over one by one; recrunner hands the same rows as one tensor.

A RecBole loader is a torch DataLoader over `list(range(n))`. Each epoch its sampler yields the rows
one at a time (a `RandomSampler` drawing from the loader's generator in training, a
`SequentialSampler` in evaluation), a `BatchSampler` groups them into lists of `step`, and the
fetcher indexes the list row by row before the collate sees the batch: about 1 ms of Python per
batch of 2048 rows on this project's CPU (BENCHMARKS.md), on the host, before every step, which a
GPU waits for.

`rows_as_tensors(loader)` gives a loader whose collate takes a tensor of row numbers
(recrunner.seams.loaders) an `EpochOrder` instead: the same rows in the same batches, each batch a
slice of one tensor. It calls the generator as `RandomSampler` does: one `randperm` when the epoch's
first batch is asked for, and a second when the first runs out (RandomSampler draws it and keeps
none of it: the last, short batch is built after it, or, where the batches are all full, the request
after the last one draws it). So the generator, which checkpoints save, moves as in RecBole, and a
resume that skips batches (`_next_index`) draws what the uninterrupted epoch drew. Loaders in any
other arrangement (workers, a sampler of their own, `drop_last`) are left as they are;
tests/test_batch_order.py compares both ways, batch for batch and generator state for state.
"""

from __future__ import annotations

import math

import torch
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler


class EpochOrder:
    """An epoch's batches of row numbers, each a slice of one tensor: `RandomSampler` (`generator`
    given) or `SequentialSampler` (None) in `BatchSampler`s of `batch_size`, without dropping; with
    `drop_last` (fast mode's `fast_static_shapes`) the last, shorter batch is left out where a full one
    comes before it, the generator drawing as before."""

    def __init__(self, rows: int, batch_size: int, generator: torch.Generator | None, drop_last: bool = False):
        self.rows, self.batch_size, self.generator, self.drop_last = rows, batch_size, generator, drop_last

    @property
    def dropped(self) -> int:
        """The rows of the batch an epoch leaves out (0: none)."""
        full, rest = divmod(self.rows, self.batch_size)
        return rest if self.drop_last and full else 0

    def __len__(self) -> int:
        return math.ceil(self.rows / self.batch_size) - (1 if self.dropped else 0)

    def __iter__(self):
        shuffled = self.generator is not None
        order = torch.randperm(self.rows, generator=self.generator) if shuffled else torch.arange(self.rows)
        full, rest = divmod(self.rows, self.batch_size)
        for start in range(0, full * self.batch_size, self.batch_size):
            yield order[start:start + self.batch_size]
        if shuffled:  # RandomSampler's second permutation, drawn when the first runs out and kept empty
            torch.randperm(self.rows, generator=self.generator)
        if rest and not self.dropped:
            yield order[full * self.batch_size:]


class _RowNumbers:
    """What the DataLoader indexes with a batch's row numbers: the row numbers themselves."""

    def __init__(self, rows: int):
        self.rows = rows

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index):
        return index


def epoch_order(loader) -> EpochOrder | None:
    """The EpochOrder that draws what `loader`'s own samplers draw, or None where it would not (pure
    over the loader's samplers)."""
    sampler, batches = loader.sampler, loader.batch_sampler
    if type(batches) is not BatchSampler or batches.drop_last or loader.num_workers:
        return None
    if type(sampler) is RandomSampler and sampler.generator is not None and not sampler.replacement \
            and sampler._num_samples is None:
        return EpochOrder(len(sampler.data_source), batches.batch_size, sampler.generator)
    if type(sampler) is SequentialSampler:
        return EpochOrder(len(sampler.data_source), batches.batch_size, None)
    return None


def drop_last_batch(loader) -> str:
    """Make `loader` (a training loader whose rows come as tensors, `rows_as_tensors`) leave out each epoch's
    last, shorter batch; what happened, in one line."""
    order = loader.sampler if isinstance(getattr(loader, "sampler", None), EpochOrder) else None
    if order is None:
        return "fast_static_shapes: this training loader draws its own batches; its last, shorter batch is kept"
    order.drop_last = True
    if order.rows < order.batch_size:
        return f"fast_static_shapes: the training set's {order.rows} rows are one batch, shorter than {order.batch_size}; kept"
    if not order.dropped:
        return f"fast_static_shapes: every training batch holds {order.batch_size} rows already; none is dropped"
    return (f"fast_static_shapes: each epoch's last training batch left out, {order.dropped:,} of {order.rows:,} rows "
            f"(other rows each epoch); every batch holds {order.batch_size} rows")


def rows_as_tensors(loader) -> bool:
    """Make `loader` hand its collate each batch's row numbers as one tensor, where `epoch_order`
    can draw them (True), else leave it (False). The DataLoader refuses these attributes once built,
    so they are set past its guard; its iterator then fetches `dataset[order]` with no auto-collation
    (RecBole's loaders answer `dataset` with their RecBole dataset except while an iterator starts,
    when the DataLoader reads its own: the one set here)."""
    order = epoch_order(loader)
    if order is None:
        return False
    for name, value in (("sampler", order), ("batch_sampler", None), ("dataset", _RowNumbers(order.rows))):
        object.__setattr__(loader, name, value)
    return True
