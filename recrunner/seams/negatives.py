"""Fast mode's training negatives drawn by torch where the batch is: RecBole's distribution, no redraws.

| RecBole 1.2.1                                           | recrunner (`fast_negatives: torch`)              |
|---------------------------------------------------------|--------------------------------------------------|
| `Sampler.sample_by_user_ids` (uniform): numpy draws in  | `TorchNegatives`: one draw per negative, its     |
| [1, item_num), each one in the user's used items drawn  | rank among the user's unused items, turned into  |
| again, on the host (recrunner: as arrays, samplers.py)  | the item by one `searchsorted` (`UnusedItems`)   |
| `RepeatableSampler` (sequential models): the row's own  | the same, with the row's own item the one used   |
| item is the one excluded                                | item                                             |

Each unused item of [1, item_num) is as likely as in RecBole, and a used one is never drawn; the
random numbers are torch's, from the generator of the device the batch is on (the GPU's, or torch's
CPU generator), so the negatives are not exact mode's for the same seed. Nothing is read back to the
host and nothing is redrawn: on a GPU a batch's negatives are a few kernels queued behind its
gather. The device's generator is in every checkpoint (training/checkpoints/rng.py), so a resumed
run draws what the uninterrupted one drew. Popularity-weighted negatives keep RecBole's sampler
(`torch_negatives_for` says why).
"""

from __future__ import annotations

import numpy as np
import torch

from .loaders import static_negatives
from .samplers import used_pairs

_RANKS = 2**62  # a draw's range before it is reduced to a user's unused items (bias below 2**-40)


class UnusedItems:
    """The items of [1, item_num) each key has not used (RecBole's `used_ids`: one set per key), on
    `device`: `item(keys, ranks)` is the `ranks`-th unused item of each key, counting from 0.

    With a key's used items sorted, s_0 < s_1 < ..., the r-th unused item is 1 + r + c, c the number of
    j with s_j - 1 - j <= r (the unused items below s_j). Those bounds, offset by key * item_num, are
    sorted across all keys, so c for a whole batch is one `searchsorted`."""

    def __init__(self, used_ids, item_num: int, device):
        keys, values = used_pairs(used_ids)
        inside = (values >= 1) & (values < item_num)
        keys, values = keys[inside], values[inside]
        order = np.lexsort((values, keys))
        keys, values = keys[order], values[order]
        counts = np.bincount(keys, minlength=len(used_ids)).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        below = values - 1 - (np.arange(len(values), dtype=np.int64) - starts[keys])
        self.item_num = item_num
        self.bounds = torch.from_numpy(keys * item_num + below).to(device)
        self.starts = torch.from_numpy(starts).to(device)
        self.unused = torch.from_numpy(item_num - 1 - counts).to(device)

    def item(self, keys: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        before = torch.searchsorted(self.bounds, keys * self.item_num + ranks, right=True) - self.starts[keys]
        return 1 + ranks + before


def uniform_ranks(counts: torch.Tensor) -> torch.Tensor:
    """One rank in [0, count) per element of `counts`, each equally likely, from the device's generator."""
    return torch.randint(0, _RANKS, counts.shape, device=counts.device) % counts


class TorchNegatives:
    """A training loader's `sample_by_user_ids` done by torch where the batch's ids are: the same
    arguments as RecBole's (the batch's user and item ids, here on the device) and the same order of
    results (all rows' first negatives, then all rows' second, ...)."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.repeatable = type(sampler).__name__ == "RepeatableSampler"  # excludes each row's own item
        self._built: tuple | None = None  # (the used_ids and device it was built for, its UnusedItems)

    def __call__(self, users: torch.Tensor, items: torch.Tensor, num: int) -> torch.Tensor:
        item_num = self.sampler.item_num
        if self.repeatable:
            own = items.repeat(num)
            ranks = uniform_ranks(torch.full_like(own, item_num - 2))
            return 1 + ranks + (ranks >= own - 1).long()
        keys = users.repeat(num)
        unused = self._unused(keys.device)
        return unused.item(keys, uniform_ranks(unused.unused[keys]))

    def _unused(self, device) -> UnusedItems:
        used = self.sampler.used_ids
        if self._built is None or self._built[0] is not used or self._built[1] != device:
            self._built = (used, device, UnusedItems(used, self.sampler.item_num, device))
        return self._built[2]


NO_NEGATIVES = "it draws no training negatives"


def torch_negatives_for(loader) -> str:
    """Why `loader`'s negatives cannot be drawn by torch ("" where they can) (pure over the loader)."""
    sampler = getattr(loader, "_sampler", None)
    if type(loader).__name__ != "TrainDataLoader" or sampler is None or not static_negatives(loader):
        return NO_NEGATIVES
    if type(sampler).__name__ not in ("Sampler", "RepeatableSampler"):
        return f"RecBole's {type(sampler).__name__} draws them"
    if getattr(sampler, "distribution", "") != "uniform":
        return f"{sampler.distribution} negatives are drawn by RecBole's sampler; torch draws uniform ones"
    return ""


def draw_with_torch(loader, gathered: bool = True) -> str:
    """Make `loader`'s batches, `gathered` by seams/loaders.py, draw their negatives with torch;
    returns why not ("" where they do)."""
    why = torch_negatives_for(loader) or ("" if gathered else "its batches are built by RecBole's collate")
    if not why:
        loader.torch_negatives = TorchNegatives(loader._sampler)
    return why
