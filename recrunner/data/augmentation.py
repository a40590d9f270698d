"""A sequential dataset's history lists as windows over its interactions, made only when read.

| RecBole 1.2.1                                         | recrunner                                        |
|-------------------------------------------------------|--------------------------------------------------|
| `SequentialDataset.data_augmentation` (run by         | `build_split`: the same rows from array          |
| `build()` through `_change_feat_format`): sorts the   | operations, kept as a `WindowedInteraction`: the |
| interactions by (user, time); each one after a        | sorted interactions (the base), each row's base  |
| user's first becomes a row whose `<field>_list` holds | row and history length. A column is made when    |
| that user's previous <= MAX_ITEM_LIST_LENGTH values,  | it is first read; the lists by `compact.windows` |
| zero-padded, filled one row at a time in Python       | (tested equal to RecBole's fill)                 |
| (about 25 s per million interactions)                 |                                                  |
| `Dataset.build` sorts `inter_feat` by time, then      | sorting reorders the row indices; the split      |
| indexes it into train, valid and test, while the      | selects row indices too: train stays windows,    |
| whole dataset's lists are alive (12 GB at 20M         | its lists made a batch at a time where the batch |
| interactions and width 50: the build does not fit in  | is (data/window_rows.py); valid and test (a row  |
| 24 GiB); train's lists are copies (12 GB more)        | per user) are made; the whole's lists never are  |
| the whole dataset's `inter_feat`, after `build()`,    | the data cache stores it as its recipe and reads |
| is only read for item ids (RepeatableSampler)         | it back as a WindowedInteraction (`from_recipe`) |

Where a dataset class changes the augmentation (DIENDataset), or a field's list would not have
the shape its windows give, RecBole's own `data_augmentation` runs instead.
"""

from __future__ import annotations

import functools
from collections.abc import MutableMapping

import numpy as np
import torch

from .compact import VALUE, WINDOW


def build_split(dataset):
    """(`dataset.build()`, base): RecBole's split, and the interactions sorted by (user, time) that a
    sequential dataset's history lists are windows of (None for other datasets and benchmark files)."""
    from recbole.data.dataset import SequentialDataset

    if not isinstance(dataset, SequentialDataset) or dataset.config["benchmark_filename"] is not None \
            or type(dataset)._change_feat_format is not SequentialDataset._change_feat_format:
        return dataset.build(), None
    found = {}

    def change_feat_format():  # what SequentialDataset.build -> Dataset.build calls first
        super(SequentialDataset, dataset)._change_feat_format()
        found["base"] = augment(dataset)
        if isinstance(dataset.inter_feat.interaction, WindowedColumns):
            dataset.inter_feat.split_keeps_windows = True  # the split's parts: windows too, nothing made

    dataset._change_feat_format = change_feat_format
    try:
        built = dataset.build()
    finally:
        del dataset._change_feat_format
        vars(dataset.inter_feat).pop("split_keeps_windows", None)
    for part, interaction in zip(built, settled([part.inter_feat for part in built])):
        vars(part).pop("_change_feat_format", None)  # copies of `dataset`, made while it had the attribute
        part.inter_feat = interaction
    return built, found["base"]


def settled(split: list) -> list:
    """The split's interactions (train, valid, test) as a run keeps them, from the build or the data
    cache: train as windows where it has history lists (data/window_rows.py makes them a batch at a
    time), the others made (a row per user)."""
    from recbole.data.interaction import Interaction

    def windowed(part) -> bool:
        columns = part.interaction
        return isinstance(columns, WindowedColumns) and any(how[0] == WINDOW for how in columns.specs.values())

    return [part if i == 0 and windowed(part) else
            part if type(part.interaction) is dict else Interaction(dict(part.interaction.items()))
            for i, part in enumerate(split)]


def augment(dataset) -> dict[str, torch.Tensor]:
    """`dataset.data_augmentation()`, windowed where it can be; the sorted interactions (the base)."""
    from recbole.data.dataset import SequentialDataset
    from recbole.data.interaction import Interaction

    if type(dataset).data_augmentation is not SequentialDataset.data_augmentation:
        base = Interaction(dict(dataset.inter_feat.interaction))
        base.sort(by=[dataset.uid_field, dataset.time_field], ascending=True)
        dataset.data_augmentation()
        return base.interaction
    dataset._aug_presets()
    dataset._check_field("uid_field", "time_field")
    dataset.sort(by=[dataset.uid_field, dataset.time_field], ascending=True)
    base = dict(dataset.inter_feat.interaction)
    columns = _augmented_columns(dataset, base)
    if columns is None:
        dataset.data_augmentation()  # sorts again: already in order
    else:
        dataset.inter_feat = windowed_interaction(columns)
    return base


def history_rows(uid: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, lengths) of `data_augmentation` over interactions sorted by user: every row but each
    user's first, and how many of the user's previous rows its history holds (at most `width`)."""
    position = np.arange(len(uid))
    first = np.ones(len(uid), dtype=bool)
    first[1:] = uid[1:] != uid[:-1]
    offset = position - np.maximum.accumulate(np.where(first, position, 0))
    rows = np.flatnonzero(offset > 0)
    return rows, np.minimum(offset[rows], width).astype(np.int64)


def _augmented_columns(dataset, base: dict) -> WindowedColumns | None:
    """The columns `data_augmentation` makes, as windows; None where one would differ from RecBole's."""
    from recbole.utils.enum_type import FeatureType

    from .compact import LENGTHS, TAKE, WINDOW

    width = dataset.config["MAX_ITEM_LIST_LENGTH"]
    rows, lengths = history_rows(base[dataset.uid_field].numpy(), width)
    if len(rows) == 0 or width < 1:
        return None
    specs = {name: (TAKE, name) for name in base}
    specs[dataset.item_list_length_field] = (LENGTHS,)
    for field, values in base.items():
        if field == dataset.uid_field:
            continue
        list_field = getattr(dataset, f"{field}_list_field")
        list_len = dataset.field2seqlen[list_field]
        shape = (list_len,) if isinstance(list_len, int) else tuple(list_len)
        if dataset.field2type[field] in (FeatureType.FLOAT, FeatureType.FLOAT_SEQ) \
                and field in (dataset.config["numerical_features"] or ()):
            shape += (2,)
        if shape != (width, *values.shape[1:]):  # RecBole would fail, or fill differently
            return None
        specs[list_field] = (WINDOW, field, width)
    return WindowedColumns(base, torch.from_numpy(rows), torch.from_numpy(lengths), specs)


def from_recipe(recipe, base: dict):
    """The part a data cache recipe describes, as a WindowedInteraction (columns made when read)."""
    from .compact import FULL, TAKE

    specs = {}
    for name, how in recipe.columns.items():
        if how[0] == FULL:
            specs[name] = (VALUE, torch.from_numpy(recipe.stored[name]))
        else:
            specs[name] = (TAKE, name) if how[0] == TAKE else how  # (LENGTHS,) and (WINDOW, ...) alike
    rows = torch.arange(recipe.length) if recipe.rows is None else torch.from_numpy(recipe.rows)
    lengths = None if recipe.lengths is None else torch.from_numpy(recipe.lengths)
    return windowed_interaction(WindowedColumns(base, rows, lengths, specs))


class WindowedColumns(MutableMapping):
    """An Interaction's columns as rows of a base: name -> (TAKE, base column), (LENGTHS,),
    (WINDOW, base column, width) or (VALUE, tensor); each made on first read, then kept."""

    def __init__(self, base: dict, rows: torch.Tensor, lengths: torch.Tensor | None, specs: dict):
        self.base, self.rows, self.lengths, self.specs = base, rows, lengths, specs
        self.made: dict[str, torch.Tensor] = {}

    def __getitem__(self, name):
        if name not in self.made:
            self.made[name] = _make(self.specs[name], self.base, self.rows, self.lengths)
        return self.made[name]

    def __setitem__(self, name, value):
        self.specs[name] = (VALUE, value)
        self.made[name] = value

    def __delitem__(self, name):
        del self.specs[name]
        self.made.pop(name, None)

    def __contains__(self, name):  # Mapping's would make the column
        return name in self.specs

    def __iter__(self):
        return iter(self.specs)

    def __len__(self):
        return len(self.specs)

    def select(self, positions) -> WindowedColumns:
        """The rows at `positions` (anything that indexes a tensor's rows); nothing made yet."""
        specs = {name: (VALUE, how[1][positions]) if how[0] == VALUE else how for name, how in self.specs.items()}
        lengths = None if self.lengths is None else self.lengths[positions]
        return WindowedColumns(self.base, self.rows[positions], lengths, specs)

    def as_rows(self):
        """These columns as rows a batch is gathered from, its history lists made for its rows only
        (`recrunner.seams.batch_tables.plain_tables` asks; data/window_rows.py)."""
        from .window_rows import WindowRows

        return WindowRows(self)

    def recipe(self):
        """These columns as a data cache recipe over `base` (data/compact.py: Recipe)."""
        from .compact import FULL, Recipe, TAKE

        recipe = Recipe(len(self.rows), self.rows.numpy(),
                        lengths=None if self.lengths is None else self.lengths.numpy())
        for name, how in self.specs.items():
            if how[0] == VALUE or (how[0] == TAKE and how[1] != name):
                recipe.columns[name] = (FULL,)
                recipe.stored[name] = self[name].numpy()
            else:
                recipe.columns[name] = (TAKE,) if how[0] == TAKE else how
        return recipe


def _make(how: tuple, base: dict, rows: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    from .compact import LENGTHS, column

    if how[0] == VALUE:
        return how[1]
    if how[0] == LENGTHS:  # the windows' own lengths: a copy, which the Interaction may change
        return lengths.clone()
    return column(how, how[1], base, rows, lengths)


def _positions(index):
    """`index` (what RecBole indexes an Interaction with) as something that indexes a tensor."""
    if isinstance(index, (slice, torch.Tensor)):
        return index
    if isinstance(index, range):
        return torch.arange(index.start, index.stop, index.step)
    array = np.asarray(index)
    return torch.from_numpy(array if array.dtype.kind in "bi" else array.astype(np.int64))


def windowed_interaction(columns: WindowedColumns):
    return _windowed_class()(columns)


@functools.lru_cache(maxsize=1)
def _windowed_class():
    from recbole.data.interaction import Interaction

    class WindowedInteraction(Interaction):
        """An Interaction over WindowedColumns: reading a column makes it; indexing rows makes a
        plain Interaction of those rows; sorting and shuffling reorder the row indices. Pickled,
        it is a plain Interaction."""

        def __init__(self, columns):  # noqa: super().__init__ would make every column
            self.interaction = columns
            self.length = len(columns.rows)

        def __getitem__(self, index):
            if isinstance(index, str):
                return self.interaction[index]
            if isinstance(index, (int, np.integer)):
                return Interaction({k: v[0] for k, v in self.interaction.select([int(index)]).items()})
            if vars(self).get("split_keeps_windows"):  # RecBole's split (build_split): a part of windows
                return windowed_interaction(self.interaction.select(_positions(index)))
            return Interaction(dict(self.interaction.select(_positions(index)).items()))

        def _reindex(self, index):  # sort() and shuffle() reorder through it
            self.interaction = self.interaction.select(_positions(index))

        def __reduce__(self):
            return Interaction, (dict(self.interaction.items()),)

    return WindowedInteraction
