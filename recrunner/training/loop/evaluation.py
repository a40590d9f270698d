"""An evaluation batch that runs out of memory is split by users and retried, with the same metrics.

Full-sort evaluation scores every item for every user of a batch (`eval_batch_size` rows of the
item count) and RecBole's collector then builds a same-sized matrix of positives: on a large
catalogue that is what runs out of GPU memory (RecBole issues 829, 1866), after hours of training.
Every metric is a mean over users, computed from what the collector gathered per user, in order,
so scoring a batch's users in two parts, one after the other, gives the same metrics (and the same
per-user values) as scoring them at once:

    score_in_parts(score, batch, collect, ...)    RecBole's batch function (`_full_sort_batch_eval`,
                                                  `_neg_sample_batch_eval`); on running out of memory,
                                                  the first half is scored and collected at once,
                                                  the second half is returned for RecBole's loop
    CollectInParts                                 the collector's `eval_batch_collect`, split by rows
                                                  when it runs out of memory itself
    split_when_out_of_memory(trainer)              both, set on a trainer as instance attributes over
                                                  RecBole's methods (every CustomTrainer does it)

Halves are halved again until they fit; a single user that does not fit is one line (exit 2).
"""

from __future__ import annotations

import functools
import logging

import torch

from .device import OutOfMemory, is_out_of_memory, release

logger = logging.getLogger("recrunner")


def split_when_out_of_memory(trainer) -> None:
    """`trainer`'s evaluation scores and collects a batch in parts where the whole does not fit."""
    collect = CollectInParts(trainer.eval_collector.eval_batch_collect, trainer.device)
    trainer.eval_collector.eval_batch_collect = collect
    for name in ("_full_sort_batch_eval", "_neg_sample_batch_eval"):  # RecBole's batch functions
        setattr(trainer, name, functools.partial(score_in_parts, getattr(trainer, name), collect=collect,
                                                 device=trainer.device))


def users_in(batch) -> int:
    """The users of an evaluation batch (RecBole's loaders' 4-tuples) (pure)."""
    interaction, rows, positive_u, _ = batch
    if rows is None or isinstance(rows, tuple):  # full sort: one row per user; a value-type batch: per row
        return len(interaction)
    return int(rows.max()) + 1 if len(rows) else 0  # sampled ranking: rows[i] is the user of pair i


def part(batch, start: int, stop: int):
    """The users [start, stop) of an evaluation batch, with row indices renumbered from 0 (pure)."""
    interaction, rows, positive_u, positive_i = batch
    if rows is None:  # full sort of a sequential model (positives one per row) or a value-type batch
        picked = None if positive_u is None else (positive_u >= start) & (positive_u < stop)
        return (interaction[start:stop], None, None if picked is None else positive_u[picked] - start,
                None if picked is None else positive_i[picked])
    keep = (positive_u >= start) & (positive_u < stop)
    if isinstance(rows, tuple):  # full sort: (history users, history items) by row
        history_u, history_i = rows
        mine = (history_u >= start) & (history_u < stop)
        return (interaction[start:stop], (history_u[mine] - start, history_i[mine]),
                positive_u[keep] - start, positive_i[keep])
    pairs = torch.nonzero((rows >= start) & (rows < stop)).squeeze(1)  # sampled ranking: those users' pairs, in order
    return interaction[pairs], rows[pairs] - start, positive_u[keep] - start, positive_i[keep]


def score_in_parts(score, batch, collect, device, what: str = "evaluation"):
    """`score(batch)`, or, where it runs out of memory, the batch's first half scored and `collect`ed
    now and the second half's result returned (each half split again as needed)."""
    try:
        return score(batch)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        users = users_in(batch)
        release(device)
        if users < 2:
            raise OutOfMemory(f"{device} ran out of memory scoring one user in {what} "
                              f"({str(exc).splitlines()[0][:120]}): lower the model's size") from exc
    half = users // 2
    _once("score", f"{what}: a batch of {users} users ran out of memory on {device}; it is scored in parts, halved "
                   "until they fit (the metrics are the same; a lower eval_batch_size avoids the retries)")
    interaction, scores, positive_u, positive_i = score_in_parts(score, part(batch, 0, half), collect, device, what)
    collect(scores, interaction, positive_u, positive_i)
    return score_in_parts(score, part(batch, half, users), collect, device, what)


class CollectInParts:
    """The collector's `eval_batch_collect`, which collects the rows of a batch's scores in parts where
    the whole batch runs out of memory (set on a trainer's collector as an instance attribute)."""

    def __init__(self, collect, device):
        self.collect, self.device = collect, device

    def __call__(self, scores, interaction, positive_u, positive_i):
        try:
            return self.collect(scores, interaction, positive_u, positive_i)
        except Exception as exc:
            if not is_out_of_memory(exc) or len(scores) < 2:
                raise
            release(self.device)
        half = len(scores) // 2
        _once("collect", f"collecting {len(scores)} users' scores ran out of memory on {self.device}; they are "
                         "collected in parts, halved until they fit (the metrics are the same)")
        for start, stop in ((0, half), (half, len(scores))):
            self(scores[start:stop], *_rows(interaction, positive_u, positive_i, start, stop, len(scores)))


def _rows(interaction, positive_u, positive_i, start, stop, rows):
    """The collector's other arguments for score rows [start, stop) (pure)."""
    if interaction is not None and len(interaction) == rows:  # one interaction row per score row
        interaction = interaction[start:stop]
    if positive_u is None:
        return interaction, None, None
    keep = (positive_u >= start) & (positive_u < stop)
    return interaction, positive_u[keep] - start, positive_i[keep]


_said: set[str] = set()  # what this process has said: the first split of each kind is one warning


def _once(kind: str, message: str) -> None:
    if kind not in _said:
        _said.add(kind)
        logger.warning(message)
