"""RecBole's Collector does its per-batch work once per group of batches, with the same tensors.

| RecBole 1.2.1                                    | recrunner                                        |
|--------------------------------------------------|--------------------------------------------------|
| `DataStruct.update_tensor`: `torch.cat` of the   | `ConcatenatedOnRead`: each part kept in a list,  |
| whole so far and each batch's part               | concatenated once when the struct is read        |
| `Collector.eval_batch_collect` (`rec.topk`):     | `TopkInGroups`: each batch's `torch.topk` as     |
| per batch a top-k, a matrix of positives as      | RecBole takes it; the hits and the positives'    |
| large as the scores, its row sums, a gather, a   | counts from the positives' (row, item) pairs,    |
| `torch.cat`                                      | once per group of up to `GROUP_ROWS` users       |

A general model's full sort is one batch per user at RecBole's `eval_batch_size` (6,040 batches on
ml-1m, 35,598 on Amazon_Sports_and_Outdoors): RecBole's copy of the whole so far at every batch is
quadratic in them (28 GB of copies a validation on the latter), and the rest is a dozen small
operations a batch, each a kernel launch on a GPU. The top k of each batch's scores is taken as
RecBole takes it, on the batch alone, so its order among tied scores is RecBole's on every device;
what is done per group is integer bookkeeping (which of the top k are positives, how many distinct
positives each user has), whose results do not depend on how rows are grouped, and which needs
no matrix as large as the scores (RecBole fills and sums one for every batch). `collect_once(collector)`
sets both on a trainer's collector (every CustomTrainer does it); a collector that needs anything
else of a batch (`rec.meanrank`, `rec.score`, `data.label`: AUC, value metrics) collects it as
RecBole does.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from recbole.evaluator.collector import DataStruct

GROUP_ROWS = 4096  # the users (rows of scores) of a group of batches, at most
COLLECTED = "collected"  # scores a batch function has collected itself (TopkInGroups.add): the loop's collect skips them
_PER_BATCH = ("rec.meanrank", "rec.score", "data.label")  # collected batch by batch, as RecBole does


def collect_once(collector) -> None:
    """Make RecBole's `collector` concatenate once and collect top-k hits in groups of batches."""
    if not isinstance(collector.data_struct, ConcatenatedOnRead):
        collector.data_struct = ConcatenatedOnRead(collector.data_struct._data_dict)
    if not isinstance(collector.eval_batch_collect, TopkInGroups):
        collector.eval_batch_collect = TopkInGroups(collector)


class ConcatenatedOnRead(DataStruct):
    """RecBole's DataStruct whose `update_tensor` keeps each part in a list; reading the struct's
    dict first runs what was deferred to it (`on_read`), then concatenates each name's parts once,
    in order: RecBole's tensors, element for element."""

    def __init__(self, data: dict | None = None):
        self._read, self._parts, self._deferred = dict(data or {}), {}, []

    @property
    def _data_dict(self) -> dict:
        deferred, self._deferred = self._deferred, []
        for run in deferred:
            run()
        for name, parts in self._parts.items():
            whole = ([self._read[name]] if name in self._read else []) + parts
            self._read[name] = torch.cat(whole, dim=0) if len(whole) > 1 else whole[0]
        self._parts = {}
        return self._read

    @_data_dict.setter
    def _data_dict(self, data: dict) -> None:
        self._read, self._parts, self._deferred = data, {}, []

    def update_tensor(self, name: str, value: torch.Tensor) -> None:
        if name in self._read and not isinstance(self._read[name], torch.Tensor):
            raise ValueError(f"{name} is not a tensor.")  # RecBole's check
        self._parts.setdefault(name, []).append(value.clone().detach())

    def on_read(self, run) -> None:
        """Run `run()` before the struct is next read (once, however often it is asked for)."""
        if run not in self._deferred:
            self._deferred.append(run)


class TopkInGroups:
    """A collector's `eval_batch_collect`: RecBole's, with the top-k hits (`rec.topk`, `rec.items`) of
    full-sort and sampled rankings (a row of scores per user) built once per group of batches."""

    def __init__(self, collector):
        self.collector, self.group, self.rows = collector, [], 0
        self.recbole = collector.eval_batch_collect  # the class's method, bound
        register = collector.register  # what the run's metrics need, fixed by its config
        wanted = tuple(name for name in ("rec.topk", "rec.items") if register.need(name))
        self.wanted = () if any(register.need(name) for name in _PER_BATCH) else wanted  # none: RecBole's collect

    def __call__(self, scores, interaction, positive_u, positive_i):
        if scores is COLLECTED:  # a group of batches whose top k were added already (loop/eval_graphs.py)
            return None
        if not self.wanted or scores.dim() != 2 or not isinstance(self.collector.data_struct, ConcatenatedOnRead):
            self.flush()
            return self.recbole(scores, interaction, positive_u, positive_i)
        _, topk = torch.topk(scores, max(self.collector.topk), dim=-1)  # RecBole's call, on this batch alone
        return self.add(topk, positive_u, positive_i, scores.shape[1])

    def add(self, topk, positive_u, positive_i, items: int) -> None:
        """Collect one batch's top k (of `items` scores a row) and its positives, as `__call__` does."""
        if self.group and self.group[-1].items != items:
            self.flush()
        self.group.append(_Part(topk, positive_u, positive_i, self.rows, items))
        self.rows += len(topk)
        if self.rows >= GROUP_ROWS:
            self.flush()
        else:
            self.collector.data_struct.on_read(self.flush)

    def flush(self) -> None:
        """Put the group's top-k hits in the struct, as RecBole's collect of each batch would have."""
        if not self.group:
            return
        group, rows, self.group, self.rows = self.group, self.rows, [], 0
        topk, struct = torch.cat([part.topk for part in group]), self.collector.data_struct
        if "rec.items" in self.wanted:
            struct.update_tensor("rec.items", topk)
        if "rec.topk" in self.wanted:
            struct.update_tensor("rec.topk", top_k_hits(topk, group, rows))


class _Part(NamedTuple):
    """One batch's share of a group: its top k, its positives, its first row in the group."""

    topk: torch.Tensor
    positive_u: torch.Tensor
    positive_i: torch.Tensor
    first_row: int
    items: int


def top_k_hits(topk: torch.Tensor, group: list, rows: int) -> torch.Tensor:
    """RecBole's `rec.topk` of a group's batches: per row, whether each of its top k is a positive
    (int32, as RecBole's gather from its int32 matrix), then the row's count of distinct positives
    (int64, as its sum), concatenated (int64); from the positives' (row, item) pairs, without the
    matrix of every row's scores RecBole fills for each batch (pure). The positives may be on the host
    while the scores are on the device (RecBole's loaders give them so; it indexes with them): moved once
    per group."""
    items, device = group[0].items, topk.device
    lengths = torch.tensor([len(part.positive_u) for part in group])
    shift = torch.repeat_interleave(torch.tensor([part.first_row for part in group]), lengths).to(device)
    positive_u = torch.cat([part.positive_u for part in group]).to(device)
    positive_i = torch.cat([part.positive_i for part in group]).to(device)
    pairs = torch.unique((positive_u + shift) * items + positive_i)
    counts = torch.bincount(torch.div(pairs, items, rounding_mode="floor"), minlength=rows).unsqueeze(1)
    hits = torch.isin(torch.arange(rows, device=device).unsqueeze(1) * items + topk, pairs).to(torch.int)
    return torch.cat((hits, counts), dim=1)
