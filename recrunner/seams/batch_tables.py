"""Where batches are gathered from: a dataset's tables as plain tensors, on one device.

`Tables` (training, a sequential model's evaluation, sampled evaluation): the interactions'
columns (`Rows`) and the user and item features joined to them, with `join` as RecBole's
`Dataset.join`. `UserTables` (a general model's full-sort evaluation): its users' rows, and each
user's history and positive items as `Ragged` (RecBole keeps them as an object array of tensors,
one per user). `to(device, moved)` copies a table to a device, each tensor once however many tables
hold it (`moved_to`); `recrunner.data.placement` decides where, `recrunner.seams.loaders` gathers.
"""

from __future__ import annotations

import copy

import numpy as np
import torch


class Rows:
    """The rows of an Interaction's plain tensor columns: `take(index)` gives each column at `index`."""

    def __init__(self, columns: dict):
        self.columns = dict(columns)

    def tensors(self) -> list:
        return list(self.columns.values())

    def to(self, device, moved: dict) -> "Rows":
        return Rows({name: moved_to(column, device, moved) for name, column in self.columns.items()})

    def take(self, index) -> dict:
        """Each column's rows `index`: what `column[index]` gives, by `index_select` where `index` is a
        1-d tensor (on a CPU 2.5-5x as fast as advanced indexing for a batch of 2048 rows)."""
        if isinstance(index, torch.Tensor) and index.dim() == 1 and index.dtype == torch.int64:
            return {name: column.index_select(0, index) for name, column in self.columns.items()}
        return {name: column[index] for name, column in self.columns.items()}


def moved_to(tensor: torch.Tensor, device, moved: dict) -> torch.Tensor:
    """`tensor` on `device`, copied once however many tables hold it (`moved`: id -> (tensor, copy))."""
    if tensor.device == torch.device(device):
        return tensor
    if id(tensor) not in moved:
        moved[id(tensor)] = (tensor, tensor.to(device))  # the original is kept, so its id is not reused
    return moved[id(tensor)][1]


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor (a batch's row numbers, its negatives) on `device`. On a GPU it is copied from
    pinned memory, queued behind the GPU's work: a copy from pageable memory may wait for the GPU's
    stream, which would hold the host up at every batch (loop/losses.py: it should run ahead)."""
    device = torch.device(device)
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


class Tables:
    """Where a dataset's batches are gathered: its interactions' rows (`inter`), the user and item
    features joined to them (`user`, `item`), on `device`; `ids`: host rows of the user and item
    ids RecBole's sampler reads (None on a CPU: `inter` is on the host)."""

    def __init__(self, dataset, inter):
        """`dataset`'s tables on the host, with `inter` for its interactions."""
        self.uid_field, self.iid_field = dataset.uid_field, dataset.iid_field
        self.inter, self.ids, self.device, self._host_ids = inter, None, torch.device("cpu"), None
        self.user = _feature_rows(getattr(dataset, "user_feat", None))
        self.item = _feature_rows(getattr(dataset, "item_feat", None))
        self.host_features = (self.user, self.item)

    def tensors(self) -> list:
        return [t for part in (self.inter, self.user, self.item) if part is not None for t in part.tensors()]

    def to(self, device, moved: dict, ids=None) -> "Tables":
        """These tables on `device` (`ids`: the host rows of the ids the sampler reads)."""
        placed = copy.copy(self)  # the fields and the host features, as they are
        placed.device, placed.ids, placed.inter = torch.device(device), ids, self.inter.to(device, moved)
        placed._host_ids = None  # from `ids` when first asked
        placed.user, placed.item = (None if p is None else p.to(device, moved) for p in (self.user, self.item))
        return placed

    def batch(self, rows: torch.Tensor):
        """The joined Interaction of the rows `rows` (row numbers on the host or the tables' device), on
        the tables' device."""
        from recbole.data.interaction import Interaction

        return self.join(Interaction(self.inter.take(self.placed(rows))))

    def placed(self, rows: torch.Tensor) -> torch.Tensor:
        """Row numbers on the tables' device (host ones copied there)."""
        return rows if _on(rows, self.device) else to_device(rows, self.device)

    def user_item_ids(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The user and item ids of the rows `rows` (on the tables' device), there."""
        columns, rows = self.inter.columns, self.placed(rows)
        return columns[self.uid_field].index_select(0, rows), columns[self.iid_field].index_select(0, rows)

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

    def sampled_ids(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """The user and item ids of the rows `rows` (host row numbers, or a slice) as numpy arrays, what
        RecBole's sampler reads."""
        users, items = self.host_ids()
        return users[rows], items[rows]

    def host_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The user and item ids of every row as host arrays, made once."""
        if self._host_ids is None:
            source = (self.ids or self.inter).columns
            self._host_ids = (source[self.uid_field].numpy(), source[self.iid_field].numpy())
        return self._host_ids


def _on(tensor: torch.Tensor, device: torch.device) -> bool:
    """Whether `tensor` is on `device` (cuda:0 and a tensor on cuda:0; cpu and cpu:0 alike)."""
    return tensor.device.type == device.type and device.index in (None, tensor.device.index or 0)


def _feature_rows(table) -> Rows | None:
    return None if table is None else Rows(table.interaction)


def plain_tables(dataset) -> Tables | None:
    """A dataset's tables on the host, where its features are plain tensors and its interactions too,
    or rows that make their columns per batch (`as_rows`: a sequential training set's history lists,
    recrunner/data/window_rows.py); else None."""
    if not all(table is None or _plain(table) for table in (getattr(dataset, "user_feat", None),
                                                            getattr(dataset, "item_feat", None))):
        return None
    columns = dataset.inter_feat.interaction
    if _plain(dataset.inter_feat):
        return Tables(dataset, Rows(columns))
    as_rows = getattr(columns, "as_rows", None)
    return None if as_rows is None else Tables(dataset, as_rows())


class Ragged:
    """One id tensor per row (RecBole's object arrays of tensors) as one flat tensor: `flat`, each
    element's row `row_of`, and each row's start on the host (`starts`, one more than the rows), so
    rows [a, b) are flat[starts[a]:starts[b]] and a batch of consecutive rows is two slices."""

    def __init__(self, lists):
        lengths = np.fromiter((len(ids) for ids in lists), dtype=np.int64, count=len(lists))
        self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.flat = torch.cat(list(lists)) if len(lists) else torch.zeros(0, dtype=torch.int64)
        self.row_of = torch.repeat_interleave(torch.arange(len(lists)), torch.from_numpy(lengths))

    def tensors(self) -> list:
        return [self.flat, self.row_of]

    def to(self, device, moved: dict) -> "Ragged":
        placed = copy.copy(self)  # the starts stay on the host
        placed.flat, placed.row_of = moved_to(self.flat, device, moved), moved_to(self.row_of, device, moved)
        return placed

    def take(self, index: np.ndarray, span: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, id) of every element of the rows `index`, the rows numbered from 0 in `index`'s order:
        RecBole's `torch.cat([torch.full_like(ids, i) ...])` and `torch.cat(ids)`, where the flat tensor
        is. `span`: (first, stop) where `index` is the rows first..stop-1 (two slices, nothing sent)."""
        if span is not None:
            a, b = self.starts[span[0]], self.starts[span[1]]
            return self.row_of[a:b] - span[0], self.flat[a:b].clone()  # a copy, as torch.cat makes
        lengths = self.starts[index + 1] - self.starts[index]
        rows = np.repeat(np.arange(len(index), dtype=np.int64), lengths)
        at = np.repeat(self.starts[index] - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
        device = self.flat.device
        return to_device(torch.from_numpy(rows), device), self.flat[to_device(torch.from_numpy(at), device)]


def consecutive_span(index) -> tuple[int, int] | None:
    """(first, stop) where `index` (row numbers: a list, an array or a tensor) is the rows
    first..stop-1, as RecBole's evaluation loaders draw them, else None (pure)."""
    values = np.asarray(index, dtype=np.int64)
    if not len(values):
        return None
    first = int(values[0])
    return (first, first + len(values)) if np.array_equal(values, np.arange(first, first + len(values))) else None


class UserTables:
    """Where a full-sort evaluation of a general model gathers its batches: its users' rows with their
    features (`users`: RecBole's `user_df`) and each user's history and positive items (`Ragged`), in
    the loader's order of users, all on `device`."""

    def __init__(self, users: Rows, history: Ragged, positive: Ragged):
        self.users, self.history, self.positive, self.device = users, history, positive, torch.device("cpu")

    @classmethod
    def of(cls, loader) -> "UserTables | None":
        """A FullSortEvalDataLoader's users, histories and positives on the host (None: not plain tensors)."""
        if not _plain(loader.user_df):
            return None
        order = np.asarray(loader.uid_list, dtype=np.int64)  # user_df's rows are these users, in order
        return cls(Rows(loader.user_df.interaction), Ragged(loader.uid2history_item[order]),
                   Ragged(loader.uid2positive_item[order]))

    def tensors(self) -> list:
        return self.users.tensors() + self.history.tensors() + self.positive.tensors()

    def to(self, device, moved: dict, ids=None) -> "UserTables":
        """These tables on `device` (`ids` is for `Tables.to`'s callers: no sampler reads these)."""
        placed = UserTables(self.users.to(device, moved), self.history.to(device, moved), self.positive.to(device, moved))
        placed.device = torch.device(device)
        return placed

    def batch(self, index):
        """RecBole's (users, (history users, history items), positive users, positive items) of the users
        at positions `index`, on the tables' device."""
        from recbole.data.interaction import Interaction

        span, index = consecutive_span(index), np.asarray(index, dtype=np.int64)
        rows = torch.arange(*span, device=self.device) if span else to_device(torch.from_numpy(index), self.device)
        return (Interaction(self.users.take(rows)), self.history.take(index, span), *self.positive.take(index, span))


def _plain(table) -> bool:
    columns = table.interaction  # a WindowedColumns (not a dict) would make every window if iterated
    return type(columns) is dict and all(isinstance(column, torch.Tensor) for column in columns.values())
