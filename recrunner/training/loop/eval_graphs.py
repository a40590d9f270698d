"""A validation's one-user batches scored from a CUDA graph, many users a replay (`cuda_graph_eval`).

A general model's full sort at RecBole's `eval_batch_size` is one batch per user (6,040 on ml-1m),
and each batch is a dozen small kernels launched from Python: RecBole's `_full_sort_batch_eval`
(`full_sort_predict`, the item-0 column and the user's history set to -inf) and the collector's
`torch.topk`. On an H200 a BPR epoch on ml-1m took 3.4-4.1 s, of which its training 0.7-1.0 s (the
GPU checks of 2026-11-27): the rest is mostly that validation, the GPU waiting for the host.
Scoring several users at once would change the scores' last bits (a matrix product of many rows is
another kernel: exact mode leaves `eval_batch_size` to the run), so this records `SLOTS` batches'
work one after the other, each with RecBole's own calls on a batch of its shape, as one CUDA graph,
and replays it for each group of batches: the same kernels on the same values, so the same top k
per user.

| RecBole 1.2.1, per batch                         | here, per group of up to SLOTS batches            |
|--------------------------------------------------|---------------------------------------------------|
| `_full_sort_batch_eval(batch)`: the scores, the  | the batches' users copied into the graph's inputs |
| history's (user, item) pairs set to -inf         | (`Slots`), each history padded with (0, 0) pairs  |
| the collector's `torch.topk(scores, k)`          | (item 0 is -inf already), one replay: every       |
| (seams/collector.py)                             | batch's RecBole calls and top k, in order         |

The validation's batches are the ones seams/replay.py keeps (the first validation builds them all
before scoring any); at every validation `Replay.regroup` hands RecBole's loop a `Group` where
graphed batches run (`plan`), and the trainer's batch function (`GroupScoring`) gives the collector
the group's top k at once (`TopkInGroups.add`); every other batch is RecBole's, as before. The graph
is recorded anew at each validation, after its first batch ran eagerly: a model that caches what it
computes for scoring (LightGCN's propagated embeddings, DMF's item vectors) makes its cache there,
and the graph reads that validation's. Refused (one line; RecBole's loop as before): a device other
than CUDA, a data-parallel run, metrics that need each batch's scores (AUC, value metrics: the
collector takes them from RecBole's own collect), and a model whose scoring reads values back to the
host or draws random numbers (`host_scoring`, read from its source). A group that cannot be recorded
(a synchronising operation) runs batch by batch, and so do the later ones of the run.

`auto` is off: not measured on a GPU yet (the GPU check's `eval` step).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable

import torch

from ...config.checks import SWITCH
from ...config.params import setting
from ...core.errors import ConfigError
from ...seams.collector import COLLECTED, TopkInGroups
from ...seams.replay import Replay
from .eval_groups import Group, Slots, plan, regrouped, signature
from .graphs import first_line

logger = logging.getLogger("recrunner")


def refusal(*, device_type: str, model: str, processes: bool, collects_topk: bool, host: list[str]) -> str | None:
    """Why a run's validation cannot be scored from CUDA graphs as RecBole scores it (pure), or None."""
    if device_type != "cuda":
        return f"CUDA graphs need a CUDA device; {model} is scored batch by batch on {device_type}"
    if processes:
        return "not in a data-parallel run; each batch is scored as RecBole scores it"
    if not collects_topk:
        return "the run's metrics need each batch's scores (AUC, value metrics); each batch is scored as RecBole scores it"
    if host:
        return (f"{model}'s scoring reads values back to the host or draws ({', '.join(host)}), which a replayed "
                "graph would not do again; each batch is scored as RecBole scores it")
    return None


_HOST = re.compile(r"\.(?:cpu|numpy|item|tolist)\(|\btorch\.(?:rand|randn|randint|randperm|multinomial)\b|"
                   r"\b(?:np|numpy|sp|scipy)\.\w+|(?<![\w.])random\.\w+")
SCORING = ("full_sort_predict", "predict")


def host_scoring(model_class) -> list[str]:
    """What `model_class`'s scoring (`full_sort_predict`, `predict` and the methods they call on
    `self`) does on the host or draws (pure over its source; sorted): EASE's and ItemKNN's
    `.cpu()`/`.numpy()`, Random's `torch.rand`. A replay would not read or draw again."""
    from ..fast.source import source_of_calls

    return sorted({match.group(0) for text in source_of_calls(model_class, SCORING) for match in _HOST.finditer(text)})


def tried(asked) -> bool:
    """Whether a run tries to score its validation from graphs (pure): `true`; `auto` and `false` not
    (`auto` stays off until the GPU check has measured it)."""
    if asked not in SWITCH:
        raise ConfigError(f"cuda_graph_eval must be auto, true or false, got {asked!r}")
    return asked is True


def record_on_cuda(score: Callable[[], torch.Tensor]):
    """(replay, first): `score()` run once on a side stream (its output, `first`, is the group's), then
    recorded as one CUDA graph; `replay()` gives the graph's output (copy it before the next replay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        first = score()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = score()

    def replay():
        graph.replay()
        return output
    return replay, first


class GroupScoring:
    """The trainer's `_full_sort_batch_eval` where validations are graphed: a `Group` is scored at once and
    collected (`TopkInGroups.add`; the collector then skips the loop's collect), any other batch goes to
    `inner` (RecBole's, split when out of memory: loop/evaluation.py)."""

    def __init__(self, trainer, inner):
        self.trainer, self.inner = trainer, inner  # records with record_on_cuda (tests stand in for it on a CPU)
        self.planned: tuple = (None, [], 0)  # (the validation's batches, their spans, the longest history)
        self.slots: Slots | None = None
        self.replay = None
        self.failed: str | None = None
        self.said = False  # the first recording is an info line, later ones debug lines

    def __call__(self, batch):
        if not isinstance(batch, Group):
            return self.inner(batch)
        collector = self.trainer.eval_collector.eval_batch_collect
        if self.failed is not None:
            for one in batch.batches:  # as RecBole's loop would have, batch by batch
                interaction, scores, positive_u, positive_i = self.inner(one)
                collector(scores, interaction, positive_u, positive_i)
            return None, COLLECTED, None, None
        self._score(batch.batches)
        return None, COLLECTED, None, None

    def regroup(self, batches: list):
        """A validation's kept batches as RecBole's loop gets them (`Replay.regroup`): where `plan` graphs
        some, in Groups, the graph recorded at the first (the plan worked out once for the batches kept)."""
        if self.planned[0] is not batches:
            spans = plan([signature(batch) for batch in batches])
            longest = max((len(batch[1][0]) for start, stop in spans for batch in batches[start:stop]
                           if batch[1] is not None), default=0)
            self.planned = (batches, spans, max(1, longest))
        _, spans, width = self.planned
        if not spans or self.failed is not None:
            return batches
        self.slots, self.replay = Slots(batches[spans[0][0]], max(stop - start for start, stop in spans), width), None
        return regrouped(batches, spans)

    def finish(self) -> None:
        self.slots = self.replay = None  # the graph's memory goes back with it

    def _score(self, batches: list) -> None:
        slots = self.slots
        slots.fill(batches)
        if self.replay is None:
            try:
                self.replay, topk = record_on_cuda(self._all_slots)
            except Exception as exc:  # noqa: BLE001 - any failure to record means: score batch by batch
                self.failed = first_line(exc)
                logger.warning(f"cuda_graph_eval: {type(self.trainer.model).__name__}'s scoring could not be "
                               f"recorded ({self.failed}); each batch is scored as RecBole scores it")
                self(Group(batches))
                return
            logger.log(logging.DEBUG if self.said else logging.INFO, f"cuda_graph_eval: recorded {slots.count} batches "
                       f"of {slots.rows} users' scoring in one graph (anew at each validation)")
            self.said = True
        else:
            topk = self.replay()
        topk = topk[:len(batches) * slots.rows].clone()  # the next replay writes over the graph's output
        adder = collector_of(self.trainer)
        for index, batch in enumerate(batches):
            _, _, positive_u, positive_i = batch
            adder.add(topk[index * slots.rows:(index + 1) * slots.rows], positive_u, positive_i, self.trainer.tot_item_num)

    def _all_slots(self) -> torch.Tensor:
        """Every slot's batch through RecBole's batch function and the collector's top k, in order."""
        full_sort = type(self.trainer)._full_sort_batch_eval  # RecBole's, not the instance's wrapper
        k = max(self.trainer.eval_collector.topk)
        tops = []
        for slot in range(self.slots.count):
            _, scores, _, _ = full_sort(self.trainer, self.slots.batch(slot))
            tops.append(torch.topk(scores, k, dim=-1)[1])  # TopkInGroups' call
        return torch.cat(tops)


def eval_graphs(trainer) -> GroupScoring | None:
    """Set `trainer` to score its validations from graphs where `cuda_graph_eval: true` asks and nothing
    refuses (one warning where something does); the GroupScoring, or None."""
    if not tried(setting(trainer.config, "cuda_graph_eval")):
        return None
    reason = trainer_refusal(trainer)
    if reason:
        logger.warning(f"cuda_graph_eval: {reason}")
        return None
    scoring = GroupScoring(trainer, trainer._full_sort_batch_eval)
    trainer._full_sort_batch_eval = scoring
    return scoring


def trainer_refusal(trainer) -> str | None:
    """`refusal` with what `trainer` has."""
    collector = collector_of(trainer)
    return refusal(device_type=trainer.device.type, model=type(trainer.model).__name__,
                   processes=trainer.world is not None,
                   collects_topk=isinstance(collector, TopkInGroups) and bool(collector.wanted),
                   host=host_scoring(type(trainer.model)))


def collector_of(trainer):
    """The collect function of `trainer`'s collector (seams/collector.py's TopkInGroups where it is one), under
    the wrapper loop/evaluation.py's CollectInParts puts over it."""
    collect = trainer.eval_collector.eval_batch_collect
    return getattr(collect, "collect", collect)


@contextlib.contextmanager
def grouped(scoring: GroupScoring | None, eval_data):
    """During one evaluation of `eval_data`: where its batches are kept (seams/replay.py: the first validation
    builds them all before handing them over), RecBole's loop gets those `plan` graphs as Groups."""
    replay = vars(eval_data).get("_get_iterator") if scoring is not None else None
    if not isinstance(replay, Replay):
        yield
        return
    replay.regroup = scoring.regroup
    try:
        yield
    finally:
        replay.regroup = None
        scoring.finish()
