"""A validation's batches are the same at every validation: built at the first, replayed after.

RecBole's full-sort evaluation loaders draw nothing (no shuffle, no negatives, no transform where
RecBole's identity is set), so every validation builds the batches the one before built. A general
model's full sort on ml-1m is 6,040 batches of one user, and building them (torch's DataLoader
fetching, recrunner's gather: seams/loaders.py) was 40% of a BPR validation on this project's CPU.

| torch 2.x / RecBole 1.2.1                       | recrunner                                        |
|-------------------------------------------------|--------------------------------------------------|
| `DataLoader.__iter__` -> `self._get_iterator()` | `replay_batches(loader, limit)` sets the         |
| (one `_SingleProcessDataLoaderIter` an epoch,   | instance's `_get_iterator`: the first iteration  |
| which draws one int64 from `loader.generator`)  | builds every batch through torch's iterator and  |
|                                                 | keeps them; later ones make torch's one draw and |
|                                                 | hand over the kept batches                       |

Only a loader whose batches recrunner's own collate gathers (`gathered`: "eval", "users"), over
consecutive row numbers (seams/batch_order.py's `EpochOrder` without a generator), with RecBole's
identity transform, is replayed. The batches are kept where they were built (the run's device)
while they take at most `limit` bytes; past that the first iteration goes on unkept and says so in
one line. The loader's generator, which checkpoints save, moves as before, so resume stays exact.
"""

from __future__ import annotations

import itertools
import logging

import torch
from torch.utils.data import DataLoader

from .batch_order import EpochOrder
from .loaders import gathered, identity_transform

logger = logging.getLogger("recrunner")


def replayable(loader) -> bool:
    """Whether `loader` builds the same batches every time it is iterated (pure over the loader)."""
    return gathered(loader) in ("eval", "users") and isinstance(loader, DataLoader) and loader.num_workers == 0 \
        and isinstance(loader.sampler, EpochOrder) and loader.sampler.generator is None \
        and identity_transform(loader)


def replay_batches(loader, limit: int) -> bool:
    """Make `loader` keep the batches of its first iteration (at most `limit` bytes) and hand them
    over at every later one (True), where it is `replayable` (else leave it: False)."""
    if not replayable(loader):
        return False
    loader._get_iterator = Replay(loader, limit)  # DataLoader.__iter__ reads it from the instance first
    return True


class Replay:
    """A loader's `_get_iterator`: torch's iterator, kept whole the first time, replayed after."""

    def __init__(self, loader, limit: int):
        self.loader, self.limit = loader, limit
        self.batches: list | None = None
        self.shape: tuple | None = None  # (batches, step) the kept batches were built for
        self.refused = False  # they took more than `limit`: every iteration builds, as before
        self.regroup = None  # batches -> what the iteration hands over (training/loop/eval_graphs.py's Groups)

    def __call__(self):
        loader = self.loader
        built_for = (len(loader), getattr(loader, "step", None))
        if self.batches is not None and self.shape == built_for:
            torch.empty((), dtype=torch.int64).random_(generator=loader.generator)  # torch's iterator's one draw
            return iter(self.batches if self.regroup is None else self.regroup(self.batches))
        iterator = DataLoader._get_iterator(loader)
        return iterator if self.refused else self._keep(iterator, built_for)

    def _keep(self, iterator, built_for):
        """Build every batch of `iterator` now and keep them, or, past `limit` bytes, stop keeping them:
        what was built, then the rest of `iterator`."""
        kept, size = [], 0
        for batch in iterator:
            kept.append(batch)
            size += batch_bytes(batch)
            if size > self.limit:
                self.refused, self.batches = True, None
                logger.info(f"evaluation: its batches take more than {self.limit / 2**20:.0f} MiB; each validation "
                            "builds them again (the metrics are the same)")
                return itertools.chain(kept, iterator)
        self.batches, self.shape = kept, built_for
        return iter(kept if self.regroup is None else self.regroup(kept))


def batch_bytes(batch) -> int:
    """The bytes of every tensor in an evaluation batch (an Interaction, tensors, tuples, None) (pure)."""
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if isinstance(batch, (tuple, list)):
        return sum(batch_bytes(part) for part in batch)
    columns = getattr(batch, "interaction", None)  # RecBole's Interaction
    return sum(batch_bytes(column) for column in columns.values()) if isinstance(columns, dict) else 0
