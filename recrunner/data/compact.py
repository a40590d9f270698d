"""A built dataset's interactions as one base table plus, per part, the indices of its rows.

RecBole's split copies rows: the parent dataset holds every interaction and train, valid and test
each a copy of their share. A sequential dataset's rows also carry each user's recent history as
zero-padded lists (`item_id_list`, rows x MAX_ITEM_LIST_LENGTH, and one such list per field),
which is what made whole ml-1m's pickled split 1.2 GB for a 13 MB file. Here one part (an
Interaction: the parent's or a split's `inter_feat`) is a `Recipe`:

- `rows`: for each of its rows, the base row it was taken from;
- per column, how to rebuild it: `take` (base[column][rows]), `window` (the `width` base values
  before each row, `lengths` of them, zero-padded: RecBole's history lists), `lengths` (those
  lengths), or `full` (kept as it is, where nothing else gives it back).

`describe` finds a recipe and keeps each column's only if `rebuild` gives back exactly that column
(values, dtype and shape); so whatever the dataset class, `rebuild(describe(part))` equals `part`,
and a part that does not fit costs space, never correctness. Pure functions of arrays, no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

TAKE, WINDOW, LENGTHS, FULL = "take", "window", "lengths", "full"
VALUE = "value"  # not a recipe's: a column set on a WindowedColumns (augmentation.py), kept as it is
_BLOCK = 1 << 16  # rows per comparison when checking a history recipe
_FILL_BLOCK = 1 << 18  # rows per block when making a history list column


@dataclass
class Recipe:
    length: int
    rows: np.ndarray | None  # int64 indices into the base; None: the base rows in order
    columns: dict[str, tuple] = field(default_factory=dict)  # name -> (TAKE,), (WINDOW, source, width), (LENGTHS,), (FULL,)
    lengths: np.ndarray | None = None
    stored: dict[str, np.ndarray] = field(default_factory=dict)  # the FULL columns

    @property
    def full_columns(self) -> list[str]:
        return [name for name, how in self.columns.items() if how[0] == FULL]


def describe(part: dict[str, torch.Tensor], base: dict[str, torch.Tensor], *,
             window_sources: dict[str, str] | None = None, length_field: str | None = None) -> Recipe:
    """The recipe of `part` (column -> tensor) over `base`; see the module docstring.

    `window_sources` maps a history column to its base column (`item_id_list` -> `item_id`) and
    `length_field` names the column holding each row's history length.
    """
    length = _length(part)
    windows = {c: s for c, s in (window_sources or {}).items() if c in part and s in base}
    lengths = part[length_field] if windows and length_field in part else None
    if lengths is None:
        windows = {}
    rows = _locate_rows(part, base, windows, lengths, length)
    recipe = Recipe(length, None if rows is None or _is_identity(rows, _length(base)) else rows)
    if lengths is not None:
        recipe.lengths = lengths.numpy()
    for name, value in part.items():
        how = (FULL,) if rows is None else _how(name, value, base, windows, length_field if windows else None)
        if how != (FULL,) and not _rebuilds(value, recipe, name, how, base):
            how = (FULL,)
        if how == (FULL,):
            recipe.stored[name] = value.numpy()
        recipe.columns[name] = how
    return recipe


def rebuild(recipe: Recipe, base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The part `recipe` describes, column by column, in its original column order."""
    return {name: _column(recipe, name, how, base) for name, how in recipe.columns.items()}


def windows(source: torch.Tensor, ends: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """Row r: source[ends[r] - lengths[r] : ends[r]], then zeros up to `width` (RecBole's
    `SequentialDataset.data_augmentation` fills its lists this way, one row at a time).

    Made a block of rows at a time into the output, so no temporary is larger than a block; each
    row is a copy of one row of a sliding-window view of `source` (contiguous runs, not element by
    element), with what lies past its length zeroed.
    """
    out = torch.empty((len(ends), width, *source.shape[1:]), dtype=source.dtype)
    for i in range(0, len(ends), _FILL_BLOCK):
        out[i:i + _FILL_BLOCK] = _window_block(source, ends[i:i + _FILL_BLOCK], lengths[i:i + _FILL_BLOCK], width)
    return out


def _window_block(source: torch.Tensor, ends: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    values, starts = source.numpy(), (ends - lengths).numpy()
    out = _sliding(values, width)[np.minimum(starts, max(len(values) - width, 0))]
    near_end = starts > len(values) - width  # their windows run past the source: read from a padded tail
    if near_end.any():
        tail_start = max(len(values) - width, 0)
        tail = np.concatenate([values[tail_start:], np.zeros((width, *values.shape[1:]), dtype=values.dtype)])
        out[near_end] = _sliding(tail, width)[starts[near_end] - tail_start]
    out = torch.from_numpy(np.ascontiguousarray(np.moveaxis(out, -1, 1)) if values.ndim > 1 else out)
    past = torch.arange(width)[None, :] >= torch.arange(width + 1)[:, None]  # row l: False l times, then True
    mask = past[lengths]
    return out.masked_fill_(mask.view(*mask.shape, *([1] * (source.dim() - 1))), 0)


def _sliding(values: np.ndarray, width: int) -> np.ndarray:
    """Row s: values[s:s + width] (a view, the window axis last); zero-padded if values are shorter."""
    if len(values) < width:
        values = np.concatenate([values, np.zeros((width - len(values), *values.shape[1:]), dtype=values.dtype)])
    return np.lib.stride_tricks.sliding_window_view(values, width, axis=0)


def row_hash(columns: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each row of the given columns (equal rows, equal hashes)."""
    n = len(columns[0])
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            flat = np.ascontiguousarray(column).reshape(n, -1)
            for k in range(flat.shape[1]):
                h ^= _as_uint64(flat[:, k])
                h *= np.uint64(0x100000001B3)
                h ^= h >> np.uint64(29)
    return h


def locate(base_hash: np.ndarray, part_hash: np.ndarray) -> np.ndarray | None:
    """Indices i with base_hash[i] == part_hash for every part row; None if a row has no match."""
    if len(base_hash) == 0:
        return None if len(part_hash) else np.zeros(0, dtype=np.int64)
    order = np.argsort(base_hash, kind="stable")
    ordered = base_hash[order]
    position = np.minimum(np.searchsorted(ordered, part_hash), len(ordered) - 1)
    if not np.array_equal(ordered[position], part_hash):
        return None
    return order[position].astype(np.int64)


def _locate_rows(part, base, windows, lengths, length) -> np.ndarray | None:
    """Each part row's base row, matched on the columns both have (a sequential part's rows also
    on the last element of each history list: duplicates of one interaction then still differ)."""
    shared = [c for c in part if c in base and part[c].shape[1:] == base[c].shape[1:] and c not in windows]
    if not shared:
        return None
    part_keys = [part[c].numpy() for c in shared]
    base_keys = [base[c].numpy() for c in shared]
    if windows:
        last = (lengths - 1).clamp(min=0)
        for column, source in windows.items():
            part_keys.append(part[column][torch.arange(length), last].numpy())
            base_keys.append(torch.roll(base[source], 1, dims=0).numpy())  # base row t-1: the last of t's history
    return locate(row_hash(base_keys), row_hash(part_keys))


def _how(name, value, base, windows, length_field) -> tuple:
    if name in windows:
        return (WINDOW, windows[name], value.shape[1])
    if name == length_field:
        return (LENGTHS,)
    if name in base and base[name].shape[1:] == value.shape[1:] and base[name].dtype == value.dtype:
        return (TAKE,)
    return (FULL,)


def column(how: tuple, name: str, base: dict, rows: torch.Tensor | None, lengths: torch.Tensor | None):
    """A column made from rows of `base` (None: every row, in order), by its recipe:
    (TAKE,) or (TAKE, source): the base column `name` (or `source`) at those rows; (LENGTHS,):
    `lengths`; (WINDOW, source, width): each row's history list of `source`, `lengths` long,
    ending before the row (`windows`). The one place both the cache and seams.augmentation make
    columns."""
    kind = how[0]
    if kind == LENGTHS:
        return lengths
    if kind == TAKE:
        values = base[how[1] if len(how) > 1 else name]
        return values if rows is None else values[rows]
    _, source, width = how
    return windows(base[source], torch.arange(len(lengths)) if rows is None else rows, lengths, width)


def _column(recipe: Recipe, name: str, how: tuple, base) -> torch.Tensor:
    if how[0] == FULL:
        return torch.from_numpy(recipe.stored[name])
    rows = None if recipe.rows is None else torch.from_numpy(recipe.rows)
    lengths = None if recipe.lengths is None else torch.from_numpy(recipe.lengths)
    return column(how, name, base, rows, lengths)


def _rebuilds(value: torch.Tensor, recipe: Recipe, name: str, how: tuple, base) -> bool:
    """Whether `how` gives back `value` exactly; history lists are compared a block of rows at a
    time, so checking a recipe never holds a second copy of a part's largest columns."""
    if how[0] != WINDOW:
        return _same(value, _column(recipe, name, how, base))
    _, source, width = how
    ends = torch.arange(recipe.length) if recipe.rows is None else torch.from_numpy(recipe.rows)
    lengths = torch.from_numpy(recipe.lengths)
    if value.shape[:2] != (recipe.length, width) or value.dtype != base[source].dtype:
        return False
    return all(_same(value[i:i + _BLOCK], windows(base[source], ends[i:i + _BLOCK], lengths[i:i + _BLOCK], width))
               for i in range(0, recipe.length, _BLOCK))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _is_identity(rows: np.ndarray, base_length: int) -> bool:
    return len(rows) == base_length and bool(np.array_equal(rows, np.arange(base_length)))


def _first(columns: dict):
    return next(iter(columns.values()))


def _length(columns: dict) -> int:
    return len(_first(columns)) if columns else 0


def _as_uint64(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f":
        values = values.astype(np.float64).view(np.int64)
    elif values.dtype.kind == "b":
        values = values.astype(np.int64)
    return values.astype(np.int64).view(np.uint64)
