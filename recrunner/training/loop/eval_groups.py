"""Which of a validation's batches are scored together from one CUDA graph, and the graph's inputs.

Pure planning over the batches a validation replays (seams/replay.py): `signature` (what a graph is
recorded for), `plan` (the spans of batches scored as groups), `regrouped` (the batches as RecBole's
loop gets them, each span one `Group`); and `Slots`, the graph's inputs that each group's batches are
copied into. loop/eval_graphs.py records and replays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

SLOTS = 128  # batches recorded in one graph, each with its own kernels
MIN_BATCHES = 32  # batches of one shape that make recording pay: fewer run as RecBole runs them


class Group(NamedTuple):
    """Consecutive validation batches of one shape, scored at once (an item of RecBole's loop)."""

    batches: list

    def __len__(self) -> int:  # RecBole's loop adds len(batched_data) to a count only data-parallel runs read
        return len(self.batches)


def signature(batch) -> tuple | None:
    """What a batch's graph is for: its fields' names, shapes, dtypes and devices, and whether it has a
    history (pure), or None where it cannot be graphed (a field not a tensor, a history not (users, items))."""
    interaction, history, _, _ = batch
    fields = getattr(interaction, "interaction", None)
    if not isinstance(fields, dict) or not all(isinstance(value, torch.Tensor) for value in fields.values()):
        return None
    if history is not None and not (isinstance(history, tuple) and len(history) == 2):
        return None
    return tuple((name, tuple(value.shape), value.dtype, value.device) for name, value in fields.items()), history is None


def plan(signatures: list, slots: int = SLOTS, least: int = MIN_BATCHES) -> list[tuple[int, int]]:
    """The [start, stop) spans of batches scored as groups (pure): in each run of at least `least`
    consecutive batches of one signature, all but its first (which runs eagerly: caches, the first
    kernels' set-up), in spans of at most `slots`; every batch outside them runs as RecBole's."""
    spans, start = [], 0
    for stop in range(1, len(signatures) + 1):
        if stop < len(signatures) and signatures[stop] == signatures[start]:
            continue
        if signatures[start] is not None and stop - start >= least:
            spans += [(first, min(first + slots, stop)) for first in range(start + 1, stop, slots)]
        start = stop
    return spans


def regrouped(batches: list, spans: list[tuple[int, int]]):
    """`batches` in order, those of each span as one `Group` (pure)."""
    at = 0
    for start, stop in spans:
        yield from batches[at:start]
        yield Group(batches[start:stop])
        at = stop
    yield from batches[at:]


class Slots:
    """The graph's inputs: `count` batches' fields stacked (each batch's rows a slice) and their
    histories padded to `width` pairs, filled from a group's batches before each replay."""

    def __init__(self, first, count: int, width: int):
        interaction, history, _, _ = first
        self.count, self.width, self.rows = count, width, len(interaction)
        self.fields = {name: value.repeat(count, *([1] * (value.dim() - 1)))  # the first batch in every slot
                       for name, value in interaction.interaction.items()}
        device = next(iter(self.fields.values())).device
        self.history = None if history is None else \
            (torch.zeros(count, width, dtype=torch.int64, device=device), torch.zeros(count, width, dtype=torch.int64, device=device))

    def fill(self, batches: list) -> None:
        """Copy `batches` (at most `count`) into the inputs; slots past them keep what they held."""
        taken = len(batches) * self.rows
        for name, value in self.fields.items():
            torch.cat([batch[0].interaction[name] for batch in batches], out=value[:taken])
        if self.history is None:
            return
        lengths = np.array([len(batch[1][0]) for batch in batches], dtype=np.int64)
        where = padded_positions(lengths, self.width)
        where = torch.from_numpy(where).to(self.history[0].device)
        for padded, part in zip(self.history, (0, 1)):
            padded[:len(batches)].zero_()
            padded.view(-1).index_copy_(0, where, torch.cat([batch[1][part] for batch in batches]))

    def batch(self, slot: int):
        """RecBole's batch of slot `slot`, as views of the inputs: (interaction, history, None, None)."""
        from recbole.data.interaction import Interaction

        rows = slice(slot * self.rows, (slot + 1) * self.rows)
        interaction = Interaction({name: value[rows] for name, value in self.fields.items()})
        history = None if self.history is None else (self.history[0][slot], self.history[1][slot])
        return interaction, history, None, None


def padded_positions(lengths: np.ndarray, width: int) -> np.ndarray:
    """Where each batch's history pairs go in the flat [batches, width] padding (pure): batch b's
    pairs at b * width + 0..length-1."""
    starts = np.repeat(np.arange(len(lengths), dtype=np.int64) * width, lengths)
    return starts + np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
