"""Fast mode's training negatives drawn by torch where the batch is: RecBole's distribution, no redraws.

| RecBole 1.2.1                                           | recrunner (`fast_negatives: torch`)              |
|---------------------------------------------------------|--------------------------------------------------|
| `Sampler.sample_by_user_ids` (uniform): numpy draws in  | `TorchNegatives`: one draw per negative, its     |
| [1, item_num), each one in the user's used items drawn  | rank among the user's unused items, turned into  |
| again, on the host (recrunner: as arrays, samplers.py)  | the item by one `searchsorted` (`UnusedItems`)   |
| `RepeatableSampler` (sequential models): the row's own  | the same, with the row's own item the one used   |
| item is the one excluded                                | item                                             |
| `_pop_sampling` (distribution: popularity): an alias    | `PopularItems`: a draw in the user's unused      |
| table of count ** alpha, redrawn where used             | weight, turned into the item by two searchsorted |

Each unused item of [1, item_num) is as likely as in RecBole, and a used one is never drawn; the
random numbers are torch's, from the generator of the device the batch is on (the GPU's, or torch's
CPU generator), so the negatives are not exact mode's for the same seed. Nothing is read back to the
host and nothing is redrawn: on a GPU a batch's negatives are a few kernels queued behind its
gather. The device's generator is in every checkpoint (training/checkpoints/rng.py), so a resumed
run draws what the uninterrupted one drew. Popularity negatives are drawn the same way in proportion
to RecBole's weights (an item's count over the sampler's interactions, to the power `alpha`), held
as integers summing to about 2**40 so that the arithmetic is exact: each item's share is RecBole's to
within one part in 2**40 of the total.
"""

from __future__ import annotations

import numpy as np
import torch

from .loaders import static_negatives
from .samplers import used_pairs

_RANKS = 2**62  # a draw's range before it is reduced to a user's unused items (bias below count / 2**62:
#                 2**-40 for items, 2**-22 for popularity weights)


def sorted_pairs(used_ids, keep) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """RecBole's `used_ids` as (key, value) pairs whose values `keep(values)` keeps, sorted by key then
    value; with each key's count of pairs and the index of its first (pure)."""
    keys, values = used_pairs(used_ids)
    kept = keep(values)
    keys, values = keys[kept], values[kept]
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    counts = np.bincount(keys, minlength=len(used_ids)).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return keys, values, counts, starts


class UnusedItems:
    """The items of [1, item_num) each key has not used (RecBole's `used_ids`: one set per key), on
    `device`: `item(keys, ranks)` is the `ranks`-th unused item of each key, counting from 0.

    With a key's used items sorted, s_0 < s_1 < ..., the r-th unused item is 1 + r + c, c the number of
    j with s_j - 1 - j <= r (the unused items below s_j). Those bounds, offset by key * item_num, are
    sorted across all keys, so c for a whole batch is one `searchsorted`."""

    def __init__(self, used_ids, item_num: int, device):
        keys, values, counts, starts = sorted_pairs(used_ids, lambda values: (values >= 1) & (values < item_num))
        below = values - 1 - (np.arange(len(values), dtype=np.int64) - starts[keys])
        self.item_num = item_num
        self.bounds = torch.from_numpy(keys * item_num + below).to(device)
        self.starts = torch.from_numpy(starts).to(device)
        self.unused = torch.from_numpy(item_num - 1 - counts).to(device)

    def item(self, keys: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        before = torch.searchsorted(self.bounds, keys * self.item_num + ranks, right=True) - self.starts[keys]
        return 1 + ranks + before


class PopularItems:
    """Items drawn in proportion to integer `weights` (one per item id; 0: never drawn) among those
    each key has not used, on `device`: `item(keys, ranks)` for ranks in [0, unused[key]).

    W is the weights' cumulative sum. With a key's used items sorted, s_0 < s_1 < ..., a rank r of the
    key's unused weight falls in unused item i once the weight of the used items below i is added
    back: item = searchsorted(W, r + U, right), U the summed weight of the used s_j whose unused
    weight below them, t_j = W(s_j - 1) - (the weight of s_0 .. s_j-1), is <= r. The t_j, offset per
    key, are sorted across all keys, so U for a whole batch is one more `searchsorted`."""

    def __init__(self, weights: np.ndarray, used_ids, device):
        def weighted(values):  # an item without weight is never drawn: nothing to add back
            keep = (values >= 0) & (values < len(weights))
            keep[keep] = weights[values[keep]] > 0
            return keep

        keys, values, counts, starts = sorted_pairs(used_ids, weighted)
        cumulative = np.cumsum(weights)
        total = int(cumulative[-1])
        used = weights[values]
        through = np.cumsum(used)  # the used weight through each pair, over all keys
        within = through - np.concatenate([[0], through])[starts[keys]]  # through each pair, its key's only
        below = cumulative[values] - used - (within - used)  # t_j: the key's unused weight below s_j
        key_used = np.zeros(len(used_ids), dtype=np.int64)
        np.add.at(key_used, keys, used)
        if len(used_ids) and int(key_used.max()) >= total:
            raise ValueError("a user has used every item with a popularity weight: no negative can be drawn for it")
        if len(used_ids) * (total + 1) >= 2**62:
            raise ValueError(f"{len(used_ids)} users x popularity weights summing to {total}: past int64's offsets")
        self.span = total + 1
        self.bounds = torch.from_numpy(keys * self.span + below).to(device)
        self.within = torch.from_numpy(np.concatenate([[0], within])).to(device)  # [0]: no used item below
        self.starts = torch.from_numpy(starts).to(device)
        self.cumulative = torch.from_numpy(cumulative).to(device)
        self.weights = torch.from_numpy(weights).to(device)
        self.unused = torch.from_numpy(total - key_used).to(device)

    def item(self, keys: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        first = self.starts[keys]
        found = torch.searchsorted(self.bounds, keys * self.span + ranks, right=True) - first  # used items below
        added = self.within[torch.where(found > 0, first + found, 0)]  # their weight (within[0] is 0)
        return torch.searchsorted(self.cumulative, ranks + added, right=True)

    def other_than(self, own: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        """The item at each rank of the weight of every item but `own`, ranks in [0, `not_own(own)`)
        (RepeatableSampler: a sequential model's row excludes only its own item)."""
        mass = self.weights[own]
        below = self.cumulative[own] - mass  # the weight of the items below `own`
        return torch.searchsorted(self.cumulative, ranks + torch.where(ranks >= below, mass, 0), right=True)

    def not_own(self, own: torch.Tensor) -> torch.Tensor:
        return self.span - 1 - self.weights[own]


def popularity_weights(sampler, keys: int) -> np.ndarray:
    """RecBole's popularity weights of `sampler` (a Counter of `_get_candidates_list()`, to the power
    `alpha`, as its `_build_alias_table` makes them) as integers, one per item id, summing to about
    2**40 (less where `keys` users would take the offsets past int64), an item with any weight at
    least 1 (pure over the sampler's interactions)."""
    scale = 2 ** min(40, 61 - int(np.ceil(np.log2(keys + 2))))
    candidates = np.asarray(sampler._get_candidates_list(), dtype=np.int64)
    counts = np.bincount(candidates, minlength=sampler.item_num).astype(np.float64)
    shares = np.where(counts > 0, (counts / len(candidates)) ** float(getattr(sampler, "alpha", 1.0)), 0.0)
    weights = np.rint(shares / shares.sum() * scale).astype(np.int64)
    return np.where(counts > 0, np.maximum(weights, 1), 0)


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
        self.weights = None if getattr(sampler, "distribution", "uniform") != "popularity" else \
            popularity_weights(sampler, 1 if self.repeatable else len(sampler.used_ids))
        self._nothing_used = np.array([], dtype=object)  # a repeatable sampler's: only each row's own item
        self._built: tuple | None = None  # (the used_ids and device it was built for, its UnusedItems or PopularItems)

    def __call__(self, users: torch.Tensor, items: torch.Tensor, num: int) -> torch.Tensor:
        item_num = self.sampler.item_num
        if self.repeatable and self.weights is not None:
            own, popular = items.repeat(num), self._items(self._nothing_used, items.device)
            return popular.other_than(own, uniform_ranks(popular.not_own(own)))
        if self.repeatable:
            own = items.repeat(num)
            ranks = uniform_ranks(torch.full_like(own, item_num - 2))
            return 1 + ranks + (ranks >= own - 1).long()
        keys = users.repeat(num)
        drawn = self._items(self.sampler.used_ids, keys.device)
        return drawn.item(keys, uniform_ranks(drawn.unused[keys]))

    def _items(self, used, device) -> UnusedItems | PopularItems:
        """What draws from `used` on `device`, built again when either changes."""
        if self._built is None or self._built[0] is not used or self._built[1] != device:
            drawn = UnusedItems(used, self.sampler.item_num, device) if self.weights is None else \
                PopularItems(self.weights, used, device)
            self._built = (used, device, drawn)
        return self._built[2]


NO_NEGATIVES = "it draws no training negatives"


def torch_negatives_for(loader) -> str:
    """Why `loader`'s negatives cannot be drawn by torch ("" where they can) (pure over the loader)."""
    sampler = getattr(loader, "_sampler", None)
    if type(loader).__name__ != "TrainDataLoader" or sampler is None or not static_negatives(loader):
        return NO_NEGATIVES
    if type(sampler).__name__ not in ("Sampler", "RepeatableSampler"):
        return f"RecBole's {type(sampler).__name__} draws them"
    if getattr(sampler, "distribution", "") not in ("uniform", "popularity"):
        return (f"{sampler.distribution} negatives are drawn by RecBole's sampler; torch draws uniform and "
                "popularity ones")
    return ""


def draw_with_torch(loader, gathered: bool = True) -> str:
    """Make `loader`'s batches, `gathered` by seams/loaders.py, draw their negatives with torch;
    returns why not ("" where they do)."""
    why = torch_negatives_for(loader) or ("" if gathered else "its batches are built by RecBole's collate")
    if not why:
        loader.torch_negatives = TorchNegatives(loader._sampler)
    return why
