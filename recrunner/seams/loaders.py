"""RecBole builds each training batch with Python loops; recrunner builds the same batches as arrays.

| RecBole 1.2.1                                           | recrunner                                        |
|---------------------------------------------------------|--------------------------------------------------|
| `AbstractSampler.sample_by_key_ids` (recbole/sampler):  | `vectorise`: the same draws (`self.sampling`,    |
| draws all values, then keeps redrawing those a Python   | same sizes, same order, so numpy's global RNG    |
| list comprehension finds in the key's set of used ids   | moves exactly as in RecBole), checked against    |
| (`v in used`), one at a time: 18% of a BPR ml-1m epoch  | one bitmap of (key, value) pairs (`UsedPairs`)   |
| `_pop_sampling`: a Python loop over every draw          | the same alias-table lookup as array indexing    |
| `TrainDataLoader.collate_fn` -> `Dataset.__getitem__`   | `gather_batches`: the rows and the joined user   |
| and `Dataset.join` -> `Interaction.__getitem__`, which  | and item features gathered with a tensor index   |
| turns the index into a Python list for every column     | (what indexing with that list gives)             |

Batches, negatives and numpy's RNG state are identical to RecBole's, element for element
(tests/test_loaders_seam.py compares whole epochs), so exact mode stays bit-identical: this seam
is on in every run (`data/cache.py`). A sampler whose `used_ids` is replaced between calls
(RepeatableSampler does that per batch) gets its pairs rebuilt when that happens. Loaders and
datasets this module does not know (sequential datasets whose history columns are windows,
`recrunner/data/augmentation.py`) keep RecBole's collate.
"""

from __future__ import annotations

import itertools
import types

import numpy as np
import torch

_SAMPLERS = ("Sampler", "RepeatableSampler")  # the samplers of interaction loaders


def vectorise_loaders(loaders) -> None:
    """Give every RecBole sampler behind `loaders` the array check and every training loader
    the gathered batches (each once)."""
    for loader in loaders:
        sampler = getattr(loader, "_sampler", None)
        if sampler is not None and type(sampler).__name__ in _SAMPLERS and not hasattr(sampler, "_recrunner_codes"):
            vectorise(sampler)
        if type(loader).__name__ == "TrainDataLoader":
            gather_batches(loader)


def gather_batches(loader) -> bool:
    """Make `loader` (RecBole's TrainDataLoader) build its batches with tensor indexing; False where
    its dataset holds something other than plain tensors (then RecBole's collate stays)."""
    dataset = loader._dataset
    tables = [dataset.inter_feat, getattr(dataset, "user_feat", None), getattr(dataset, "item_feat", None)]
    if not all(table is None or _plain(table) for table in tables):
        return False
    if "join" not in vars(dataset):
        dataset.join = types.MethodType(_join, dataset)

    def collate_fn(index):
        rows = torch.as_tensor(np.asarray(index, dtype=np.int64))
        data = dataset.join(_rows(dataset.inter_feat, rows))
        return loader._neg_sampling(loader.transform(dataset, data))

    loader.collate_fn = collate_fn  # the DataLoader reads it when an epoch's iterator starts
    return True


def _plain(table) -> bool:
    columns = table.interaction  # a WindowedColumns (not a dict) would make every window if iterated
    return type(columns) is dict and all(isinstance(column, torch.Tensor) for column in columns.values())


def _rows(table, index):
    """`table[index]` for an Interaction of tensors: RecBole indexes each column with index.tolist()."""
    from recbole.data.interaction import Interaction

    return Interaction({name: column[index] for name, column in table.interaction.items()})


def _join(self, df):
    """RecBole's Dataset.join, with the feature rows gathered by `_rows`."""
    if self.user_feat is not None and self.uid_field in df:
        df.update(_rows(self.user_feat, df[self.uid_field]))
    if self.item_feat is not None and self.iid_field in df:
        df.update(_rows(self.item_feat, df[self.iid_field]))
    return df


def vectorise(sampler) -> None:
    """Replace `sampler`'s `sample_by_key_ids` (and `_pop_sampling`) on the instance."""
    sampler._recrunner_codes = None  # (the used_ids it was built from, their UsedPairs)
    sampler.sample_by_key_ids = types.MethodType(_sample_by_key_ids, sampler)
    if getattr(sampler, "distribution", "") == "popularity":
        sampler._pop_sampling = types.MethodType(_pop_sampling, sampler)


_BITMAP_LIMIT = 2**31  # keys x width up to this: one bit per pair (256 MB at most), else sorted codes


class UsedPairs:
    """RecBole's `used_ids` (an array of sets, one per key) as arrays: `contains(keys, values)` answers
    what RecBole's `v in used_ids[k]` answers, for whole arrays at once.

    A bitmap of keys x width bits (ml-1m: 2.6 MB) where it fits under `limit`, else the sorted
    `key * width + value` codes searched with `np.searchsorted` (slower: a binary search per value).
    """

    def __init__(self, used_ids, limit: int = _BITMAP_LIMIT):
        sizes = np.fromiter((len(s) for s in used_ids), dtype=np.int64, count=len(used_ids))
        values = np.fromiter(itertools.chain.from_iterable(used_ids), dtype=np.int64, count=int(sizes.sum()))
        self.width = int(values.max()) + 1 if len(values) else 1
        codes = np.repeat(np.arange(len(used_ids), dtype=np.int64), sizes) * self.width + values
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
