"""RecBole's negative samplers, checked as arrays: the same draws, in the same order.

| RecBole 1.2.1                                           | recrunner                                        |
|---------------------------------------------------------|--------------------------------------------------|
| `AbstractSampler.sample_by_key_ids` (recbole/sampler):  | `vectorise`: the same draws (`self.sampling`,    |
| draws all values, then keeps redrawing those a Python   | same sizes, same order, so numpy's global RNG    |
| list comprehension finds in the key's set of used ids   | moves exactly as in RecBole), checked against    |
| (`v in used`), one at a time: 18% of a BPR ml-1m epoch  | one bitmap of (key, value) pairs (`UsedPairs`)   |
| `_pop_sampling`: a Python loop over every draw          | the same alias-table lookup as array indexing    |

Negatives and numpy's RNG state are identical to RecBole's, draw for draw
(tests/test_loaders_seam.py), so this seam is on in every run (`seams/loaders.py` applies it to
every loader's sampler). A sampler whose `used_ids` is replaced between calls (RepeatableSampler
does that per batch) gets its pairs rebuilt when that happens.
"""

from __future__ import annotations

import itertools
import types

import numpy as np
import torch

SAMPLERS = ("Sampler", "RepeatableSampler")  # the samplers of interaction loaders


def vectorise_sampler(sampler) -> None:
    """`sampler`'s negatives checked as arrays, once (a sampler RecBole does not share is left as it is)."""
    if type(sampler).__name__ in SAMPLERS and not hasattr(sampler, "_recrunner_codes"):
        vectorise(sampler)


def vectorise(sampler) -> None:
    """Replace `sampler`'s `sample_by_key_ids` (and `_pop_sampling`) on the instance."""
    sampler._recrunner_codes = None  # (the used_ids it was built from, their UsedPairs)
    sampler.sample_by_key_ids = types.MethodType(_sample_by_key_ids, sampler)
    if getattr(sampler, "distribution", "") == "popularity":
        sampler._pop_sampling = types.MethodType(_pop_sampling, sampler)


def used_pairs(used_ids) -> tuple[np.ndarray, np.ndarray]:
    """RecBole's `used_ids` (an array of sets, one per key) as two int64 arrays: each (key, value) pair,
    key by key (pure)."""
    sizes = np.fromiter((len(s) for s in used_ids), dtype=np.int64, count=len(used_ids))
    values = np.fromiter(itertools.chain.from_iterable(used_ids), dtype=np.int64, count=int(sizes.sum()))
    return np.repeat(np.arange(len(used_ids), dtype=np.int64), sizes), values


_BITMAP_LIMIT = 2**31  # keys x width up to this: one bit per pair (256 MB at most), else sorted codes


class UsedPairs:
    """RecBole's `used_ids` (an array of sets, one per key) as arrays: `contains(keys, values)` answers
    what RecBole's `v in used_ids[k]` answers, for whole arrays at once.

    A bitmap of keys x width bits (ml-1m: 2.6 MB) where it fits under `limit`, else the sorted
    `key * width + value` codes searched with `np.searchsorted` (slower: a binary search per value).
    """

    def __init__(self, used_ids, limit: int = _BITMAP_LIMIT):
        keys, values = used_pairs(used_ids)
        self.width = int(values.max()) + 1 if len(values) else 1
        codes = keys * self.width + values
        if len(used_ids) * self.width <= limit:
            bits = np.zeros(len(used_ids) * self.width, dtype=bool)
            bits[codes] = True
            self.bitmap, self.codes = np.packbits(bits, bitorder="little"), None
        else:
            self.bitmap, self.codes = None, np.sort(codes)

    def contains(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.int64)
        inside = (values >= 0) & (values < self.width)
        wanted = np.asarray(keys, dtype=np.int64) * self.width + np.where(inside, values, 0)
        if self.bitmap is not None:
            return inside & ((self.bitmap[wanted >> 3] >> (wanted & 7).astype(np.uint8)) & 1).astype(bool)
        if not len(self.codes):
            return np.zeros(len(wanted), dtype=bool)
        found = self.codes[np.minimum(np.searchsorted(self.codes, wanted), len(self.codes) - 1)]
        return inside & (found == wanted)


def _sample_by_key_ids(self, key_ids, num):
    key_ids = np.array(key_ids)
    if len(key_ids) == 0 or (key_ids == key_ids[0]).all():  # RecBole's own path is arrays already
        return type(self).sample_by_key_ids(self, key_ids, num)
    if key_ids.min() < 0 or key_ids.max() >= len(self.used_ids):
        raise IndexError(f"key id out of range [0, {len(self.used_ids)})")  # RecBole's callers turn it into a message
    built = self._recrunner_codes
    if built is None or built[0] is not self.used_ids:
        built = self._recrunner_codes = (self.used_ids, UsedPairs(self.used_ids))
    used = built[1]

    total_num = len(key_ids) * num
    value_ids = np.zeros(total_num, dtype=np.int64)
    check_list = np.arange(total_num)
    key_ids = np.tile(key_ids, num)
    while len(check_list) > 0:
        value_ids[check_list] = self.sampling(len(check_list))
        check_list = check_list[used.contains(key_ids[check_list], value_ids[check_list])]
    return torch.tensor(value_ids, dtype=torch.long)


def _pop_sampling(self, sample_num):
    table = getattr(self, "_recrunner_alias", None)
    if table is None or table[0] is not self.prob:
        keys = list(self.prob.keys())
        table = self._recrunner_alias = (self.prob, np.array(keys), np.array([self.prob[k] for k in keys]),
                                         np.array([self.alias[k] for k in keys]))
    _, keys, prob, alias = table
    random_index_list = np.random.randint(0, len(keys), sample_num)
    random_prob_list = np.random.random(sample_num)
    return np.where(prob[random_index_list] > random_prob_list, keys[random_index_list], alias[random_index_list])
