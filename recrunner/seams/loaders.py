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

| `FullSortEvalDataLoader.collate_fn` (sequential        | `gather_eval_batches`: the same 4-tuple, from   |
| models): `Dataset.__getitem__`, as in training         | the gathered rows                                |

Batches, negatives and numpy's RNG state are identical to RecBole's, element for element
(tests/test_loaders_seam.py compares whole epochs), so exact mode stays bit-identical: this seam
is on in every run (`data/cache.py`). A sampler whose `used_ids` is replaced between calls
(RepeatableSampler does that per batch) gets its pairs rebuilt when that happens.

Where the rows are gathered is a `Tables`: the interactions' columns and the user and item
features joined to them (each a `Rows`), all on one device. On a GPU (`recrunner.data.placement` decides) the tables are copied there once and
a batch is a gather there: only the batch's row numbers cross from the host, and, where negatives
are drawn, the user and item ids RecBole's sampler reads (gathered from host copies) and the
negatives it draws with numpy's RNG, as RecBole draws them. Loaders this module does not know
keep RecBole's collate.
"""

from __future__ import annotations

import copy
import itertools
import types

import numpy as np
import torch

_SAMPLERS = ("Sampler", "RepeatableSampler")  # the samplers of interaction loaders


def vectorise_loaders(loaders, tables=None) -> None:
    """Give every RecBole sampler behind `loaders` the array check, and every training loader (and a
    sequential model's full-sort evaluation loaders) gathered batches, each once. `tables(loader)`:
    where the loader's rows are gathered (a `Tables`, or None: RecBole's collate); without it, a
    plain dataset's tables on the host."""
    for loader in loaders:
        if loader is None:
            continue
        sampler = getattr(loader, "_sampler", None)
        if sampler is not None and type(sampler).__name__ in _SAMPLERS and not hasattr(sampler, "_recrunner_codes"):
            vectorise(sampler)
        kind = gathered(loader)
        found = None if kind is None else tables(loader) if tables is not None else plain_tables(loader._dataset)
        if found is None:
            continue
        (gather_batches if kind == "train" else gather_eval_batches)(loader, found)


def gathered(loader) -> str | None:
    """Which of this module's collates `loader` can take: "train", "eval" (a sequential model's full
    sort), or None (RecBole's own stays)."""
    kind = type(loader).__name__
    if kind == "TrainDataLoader":
        return "train"
    if kind == "FullSortEvalDataLoader" and getattr(loader, "is_sequential", False):
        return "eval"
    return None


class Rows:
    """The rows of an Interaction's plain tensor columns: `take(index)` gives each column at `index`."""

    def __init__(self, columns: dict):
        self.columns = dict(columns)

    def tensors(self) -> list:
        return list(self.columns.values())

    def to(self, device, moved: dict) -> "Rows":
        return Rows({name: moved_to(column, device, moved) for name, column in self.columns.items()})

    def take(self, index) -> dict:
        return {name: column[index] for name, column in self.columns.items()}


def moved_to(tensor: torch.Tensor, device, moved: dict) -> torch.Tensor:
    """`tensor` on `device`, copied once however many tables hold it (`moved`: id -> (tensor, copy))."""
    if tensor.device == torch.device(device):
        return tensor
    if id(tensor) not in moved:
        moved[id(tensor)] = (tensor, tensor.to(device))  # the original is kept, so its id is not reused
    return moved[id(tensor)][1]


class Tables:
    """Where a dataset's batches are gathered: its interactions' rows (`inter`), the user and item
    features joined to them (`user`, `item`), on `device`; `ids`: host rows of the user and item
    ids RecBole's sampler reads (None on a CPU: the batch's own)."""

    def __init__(self, dataset, inter):
        """`dataset`'s tables on the host, with `inter` for its interactions."""
        self.uid_field, self.iid_field = dataset.uid_field, dataset.iid_field
        self.inter, self.ids, self.device = inter, None, torch.device("cpu")
        self.user = _feature_rows(getattr(dataset, "user_feat", None))
        self.item = _feature_rows(getattr(dataset, "item_feat", None))
        self.host_features = (self.user, self.item)

    def tensors(self) -> list:
        return [t for part in (self.inter, self.user, self.item) if part is not None for t in part.tensors()]

    def to(self, device, moved: dict, ids=None) -> "Tables":
        """These tables on `device` (`ids`: the host rows of the ids the sampler reads)."""
        placed = copy.copy(self)  # the fields and the host features, as they are
        placed.device, placed.ids, placed.inter = torch.device(device), ids, self.inter.to(device, moved)
        placed.user, placed.item = (None if p is None else p.to(device, moved) for p in (self.user, self.item))
        return placed

    def batch(self, rows: torch.Tensor):
        """The joined Interaction of the rows `rows` (a host tensor of row numbers), on the tables' device."""
        from recbole.data.interaction import Interaction

        return self.join(Interaction(self.inter.take(rows.to(self.device, non_blocking=True))))

    def join(self, df):
        """RecBole's Dataset.join: the user's and the item's features added to each row, from the
        tables on the device the rows' ids are on (a host Interaction, as RecBole's tree trainers
        read `dataset[:]`, gets host features)."""
        from recbole.data.interaction import Interaction

        for field, placed, host in ((self.uid_field, self.user, self.host_features[0]),
                                    (self.iid_field, self.item, self.host_features[1])):
            if placed is not None and field in df:
                ids = df[field]
                rows = placed if _on(ids, self.device) else host
                df.update(Interaction(rows.take(ids)))
        return df

    def sampled_ids(self, rows: torch.Tensor, batch) -> tuple[np.ndarray, np.ndarray]:
        """The user and item ids of the batch's rows as numpy arrays, what RecBole's sampler reads."""
        source = batch if self.ids is None else self.ids.take(rows)
        return source[self.uid_field].numpy(), source[self.iid_field].numpy()


def _on(tensor: torch.Tensor, device: torch.device) -> bool:
    """Whether `tensor` is on `device` (cuda:0 and a tensor on cuda:0; cpu and cpu:0 alike)."""
    return tensor.device.type == device.type and device.index in (None, tensor.device.index or 0)


def _feature_rows(table) -> Rows | None:
    return None if table is None else Rows(table.interaction)


def plain_tables(dataset) -> Tables | None:
    """A dataset's tables on the host, where its interactions and features are plain tensors (else None)."""
    tables = [dataset.inter_feat, getattr(dataset, "user_feat", None), getattr(dataset, "item_feat", None)]
    if not all(table is None or _plain(table) for table in tables):
        return None
    return Tables(dataset, Rows(dataset.inter_feat.interaction))


def static_negatives(loader) -> bool:
    """Whether `loader` draws negatives before the model sees the batch (RecBole's `_neg_sampling`'s
    second branch); a dynamic sampler scores candidates with the model and stays RecBole's."""
    args = getattr(loader, "neg_sample_args", None) or {}
    return not args.get("dynamic", False) and args.get("distribution", "none") != "none" \
        and args.get("sample_num", "none") != "none"


def gather_batches(loader, tables: Tables) -> None:
    """Make `loader` (RecBole's TrainDataLoader) build its batches by gathering rows of `tables`."""
    dataset = _joined_from(loader._dataset, tables)  # negatives' features too
    negatives = static_negatives(loader)

    def collate_fn(index):
        rows = torch.as_tensor(np.asarray(index, dtype=np.int64))
        data = loader.transform(dataset, tables.batch(rows))
        if not negatives:
            return loader._neg_sampling(data)  # none, or dynamic (the model picks among candidates)
        users, items = tables.sampled_ids(rows, data)
        drawn = loader._sampler.sample_by_user_ids(users, items, loader.neg_sample_num)
        return loader.sampling_func(data, drawn.to(tables.device))

    loader.collate_fn = collate_fn  # the DataLoader reads it when an epoch's iterator starts


def gather_eval_batches(loader, tables: Tables) -> None:
    """Make a sequential model's FullSortEvalDataLoader gather its batches from `tables`: RecBole's
    (interaction, None, positive_u, positive_i), with the positives where the interaction is."""
    dataset = _joined_from(loader._dataset, tables)

    def collate_fn(index):
        interaction = loader.transform(dataset, tables.batch(torch.as_tensor(np.asarray(index, dtype=np.int64))))
        positive_i = interaction[loader.iid_field]
        return interaction, None, torch.arange(len(interaction), device=positive_i.device), positive_i

    loader.collate_fn = collate_fn


def _joined_from(dataset, tables: Tables):
    """`dataset`, whose `join` (RecBole's, which the loader's negative sampling calls) now reads `tables`."""
    dataset.join = types.MethodType(lambda self, df: tables.join(df), dataset)
    return dataset


def _plain(table) -> bool:
    columns = table.interaction  # a WindowedColumns (not a dict) would make every window if iterated
    return type(columns) is dict and all(isinstance(column, torch.Tensor) for column in columns.values())


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
