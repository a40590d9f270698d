"""A sequential training set's rows as windows over the sorted interactions, made per batch.

RecBole's split copies every training row's history lists (`item_id_list` and one per listed
field, rows x MAX_ITEM_LIST_LENGTH each): at 20M interactions and width 50, 12 GB of a SASRec run's
14.7 GB; the main job's tables on a GPU were 595 MiB with them, 41 MiB without. Here the training part stays what
`recrunner.data.augmentation` made it, a `WindowedColumns` (each row's base row and history
length), and a batch's lists are made for its rows only, where its tables are (`WindowRows.take`,
which `recrunner.seams.batch_tables.Tables` gathers from): a window is a copy of the interactions
before the row, zero-padded, so each batch holds RecBole's values element for element.

Reading a whole column of the part (`part.inter_feat["item_id_list"]`: FEARec's same-target
sequences) still makes it once, as before; user and item ids (the samplers') are plain columns.
"""

from __future__ import annotations

import torch

from ..seams import batch_tables
from ..seams.batch_tables import Rows
from .compact import LENGTHS, TAKE, VALUE, WINDOW


def window_positions(ends: torch.Tensor, lengths: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Where rows' windows read (pure): (the source positions, flat, padding pointed at 0; where each row is
    padding [rows, width]). Made once per batch for all its lists (3 operations on a batch's [rows, width]),
    each list then a gather and a fill: a batch of the main job ran 7 of them for its 2 lists, not 16."""
    offsets = torch.arange(width, device=ends.device)
    padding = offsets >= lengths[:, None]
    positions = ((ends - lengths)[:, None] + offsets).masked_fill_(padding, 0)  # padding reads row 0, zeroed after
    return positions.view(-1), padding


def gather_windows(source: torch.Tensor, positions: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """Row r: source[ends[r] - lengths[r] : ends[r]], then zeros up to the width, on `source`'s device, from
    `window_positions` (what `compact.windows` makes on the host, for a batch of rows)."""
    out = source.index_select(0, positions).view(*padding.shape, *source.shape[1:])
    return out.masked_fill_(padding.view(*padding.shape, *([1] * (source.dim() - 1))), 0)


class WindowRows(Rows):
    """The rows of a `WindowedColumns` (augmentation.py, whose `as_rows` makes one): `take(index)` makes
    each column at `index` only. `columns` is the lazy mapping itself (a column read whole is made
    once: the user and item ids)."""

    def __init__(self, windowed):
        self.columns = windowed

    def tensors(self) -> list:
        w = self.columns
        values = [how[1] for how in w.specs.values() if how[0] == VALUE]
        lengths = [] if w.lengths is None else [w.lengths]
        return [w.base[name] for name in _sources(w)] + [w.rows] + lengths + values

    def to(self, device, moved: dict) -> "WindowRows":
        w = self.columns
        base = {name: batch_tables.moved_to(w.base[name], device, moved) for name in _sources(w)}
        specs = {name: (VALUE, batch_tables.moved_to(how[1], device, moved)) if how[0] == VALUE else how
                 for name, how in w.specs.items()}
        lengths = None if w.lengths is None else batch_tables.moved_to(w.lengths, device, moved)
        return WindowRows(type(w)(base, batch_tables.moved_to(w.rows, device, moved), lengths, specs))

    def take(self, index) -> dict:
        """Each column's rows `index` (a 1-d int64 tensor on the rows' device, or what indexes a tensor)."""
        w = self.columns
        if not (isinstance(index, torch.Tensor) and index.dim() == 1 and index.dtype == torch.int64):
            index = torch.arange(len(w.rows), device=w.rows.device)[index]
        rows = w.rows.index_select(0, index)
        lengths = None if w.lengths is None else w.lengths.index_select(0, index)
        out, windows = {}, {}  # width -> window_positions: the batch's lists share them
        for name, how in w.specs.items():
            if how[0] == VALUE:
                out[name] = how[1].index_select(0, index)
            elif how[0] == LENGTHS:
                out[name] = lengths
            elif how[0] == TAKE:
                out[name] = w.base[how[1]].index_select(0, rows)
            else:
                if how[2] not in windows:
                    windows[how[2]] = window_positions(rows, lengths, how[2])
                out[name] = gather_windows(w.base[how[1]], *windows[how[2]])
        return out


def _sources(windowed) -> list[str]:
    """The base columns the part's columns are made from."""
    return list(dict.fromkeys(how[1] for how in windowed.specs.values() if how[0] in (TAKE, WINDOW)))
