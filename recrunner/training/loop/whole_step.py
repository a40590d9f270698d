"""The whole training step replayed from one CUDA graph: forward, backward and the optimizer's step
(`cuda_graph_optimizer`).

`cuda_graph_step` (graphs.py) replays a batch's forward and backward; around each replay the host
still runs `zero_grad`, autograd's engine handing each parameter its gradient, and the optimizer's
step, in Python. On an H200 (the fast step's profile of 2026-11-30, 30 batches) those took 2.25 ms of
the 4.46 ms a profiled batch spent on the host: the optimizer's step 1.04 ms (torch's `foreach` Adam),
the recorded backward with 36 `AccumulateGrad` 1.06 ms, `ones_like` and `zero_grad` 0.15 ms; the
GPU's kernels took 1.99 ms. With `cuda_graph_optimizer: true` a batch is one replay of a graph
holding all three, the host's work the batch's copy into the graph's inputs.

How a shape of batch is recorded (at most `MAX_GRAPHS` shapes, as graphs.py):

1. its first batch runs the eager step: it compiles (fast mode) and makes the optimizer's state
   (Adam's moments and step counts, on the device), which the graph then reads and writes in place;
2. its second batch is recorded: two forward and backward passes on a side stream warm up (inside
   `fork_rng`, the buffers put back, the gradients dropped), each gradient is set to None so the
   recorded backward writes it rather than adds to it, then forward, backward and `optimizer.step()`
   are recorded; the graph is replayed for that batch;
3. every later batch of that shape: its tensors copied into the graph's inputs, one replay.

The same kernels on the same memory as the eager step, so the same numbers; dropout draws from the
run's generator at the offsets eager kernels would have used (graphs.py). If the learning rate
changed since a graph was recorded (an LR schedule by epoch), the graphs are dropped and recorded
again; an optimizer with step hooks (an LR schedule by batch) is not recorded: a replay would not
call them. A batch's loss is read after its step, not before: a non-finite loss is found as with
`read_loss_every` (loop/losses.py), one step later at most.

Refused, with one line, the step as before: what `cuda_graph_step` refuses (graphs.refusal), an
optimizer other than a fused Adam or AdamW (fast mode's `fast_fused_optimizer`: the step counts on
the device, where a replay can raise them), `clip_grad_norm`, and a loss function of the trainer's
own (KG trainers). `auto` is off: not measured on a GPU yet (the GPU check's `fast` step).
"""

from __future__ import annotations

import logging

import torch

from ...config.checks import SWITCH
from ...config.params import setting
from ...core.errors import ConfigError
from . import graphs
from .graphs import MAX_GRAPHS, signature

logger = logging.getLogger("recrunner")

WARM_UPS = 2  # forward and backward passes on a side stream before a recording


def optimizer_refusal(optimizer, clip) -> str | None:
    """Why the optimizer's step cannot be recorded with the loss (pure over its type and groups), or None."""
    fused = type(optimizer) in (torch.optim.Adam, torch.optim.AdamW) and \
        all(group.get("fused") for group in optimizer.param_groups)
    if not fused:
        return (f"the optimizer's step is recorded only as a fused Adam or AdamW (fast mode's fast_fused_optimizer), "
                f"not {type(optimizer).__name__}{' unfused' if type(optimizer).__name__ in ('Adam', 'AdamW') else ''}")
    if clip:
        return "not with clip_grad_norm"
    return None


def hooked(optimizer) -> bool:
    """Whether stepping `optimizer` calls hooks in Python (an LR schedule by batch), which a replay would not."""
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    return bool(optimizer._optimizer_step_pre_hooks or optimizer._optimizer_step_post_hooks
                or _global_optimizer_pre_hooks or _global_optimizer_post_hooks)


class WholeStep:
    """A training batch's step as the epoch asks for it: `step(interaction)` replays the graph of its shape
    and gives the batch's loss (the graph's output: copy it before the next replay), or None where the
    epoch runs the eager step for this batch (the first of a shape, a shape beyond MAX_GRAPHS, validation)."""

    def __init__(self, model, optimizer, record=None):
        self.model, self.optimizer = model, optimizer
        self.record = record or record_on_cuda  # tests record on a CPU with a stand-in
        self.graphs: dict[tuple, tuple] = {}    # shape -> (replay, the graph's inputs, its loss)
        self.seen: set[tuple] = set()           # shapes whose first batch ran eagerly
        self.lrs: list[float] | None = None     # the learning rates the graphs were recorded with
        self.failed: str | None = None

    def __call__(self, interaction) -> torch.Tensor | None:
        key = signature(interaction) if self.failed is None and self.model.training else None
        if key is None:
            return None
        if self.lrs is not None and self.lrs != self._lrs():  # a schedule moved it: record again
            self.graphs.clear()
            self.seen.clear()
            self.lrs = None
        graph = self.graphs.get(key)
        if graph is None:
            if key not in self.seen or len(self.graphs) >= MAX_GRAPHS:
                self.seen.add(key)
                return None
            graph = self._record(key, interaction)
            if graph is None:
                return None
        replay, inputs, loss = graph
        for static, name in zip(inputs, (name for name, *_ in key)):
            static.copy_(interaction[name])
        replay()
        return loss

    def _lrs(self) -> list[float]:
        return [float(group["lr"]) for group in self.optimizer.param_groups]

    def _record(self, key, interaction):
        from recbole.data.interaction import Interaction

        if hooked(self.optimizer):
            return self._refuse("the optimizer has step hooks (an LR schedule by batch), which a replay would not call")
        names = tuple(name for name, *_ in key)
        inputs = tuple(interaction[name].clone() for name in names)  # copied into at each replay

        def loss():
            return self.model.calculate_loss(Interaction(dict(zip(names, inputs))))

        try:
            with graphs.rehearsal(self.model, inputs):
                replay, output = self.record(loss, self.optimizer)
        except Exception as exc:  # noqa: BLE001 - any failure to record means: train this model eagerly
            return self._refuse(graphs.first_line(exc))
        self.graphs[key], self.lrs = (replay, inputs, output), self._lrs()
        logger.info(f"cuda_graph_optimizer: recorded {type(self.model).__name__}'s step (forward, backward, "
                    f"{type(self.optimizer).__name__}'s step) for batches of {key[0][1][0] if key[0][1] else '?'} rows "
                    f"({len(self.graphs)} of at most {MAX_GRAPHS} shapes)")
        return self.graphs[key]

    def _refuse(self, reason: str):
        self.failed = reason
        logger.warning(f"cuda_graph_optimizer: {type(self.model).__name__}'s step could not be recorded ({reason}); "
                       "its batches run the step as before")
        return None


def record_on_cuda(loss, optimizer):
    """(replay, loss): `loss()` backpropagated and the optimizer stepped, recorded as one CUDA graph after
    WARM_UPS forward and backward passes on a side stream (no step: the weights stay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARM_UPS):
            optimizer.zero_grad(set_to_none=True)
            loss().backward()
    torch.cuda.current_stream().wait_stream(side)
    optimizer.zero_grad(set_to_none=True)  # the recorded backward writes each gradient, never adds to a stale one
    graph = torch.cuda.CUDAGraph()
    groups = optimizer.param_groups
    for group in groups:  # a fused step is the same kernel either way; torch refuses to record it otherwise
        group["capturable"] = True
    try:
        with torch.cuda.graph(graph):
            output = loss()
            output.backward()
            optimizer.step()
    finally:
        for group in groups:
            group["capturable"] = False  # eager steps (a shape's first batch) without torch's warning
    return graph.replay, output


def whole_step(trainer) -> WholeStep | None:
    """The trainer's whole recorded step, or None (the step as before), with one line where asked and refused."""
    asked = setting(trainer.config, "cuda_graph_optimizer")
    if asked not in SWITCH:
        raise ConfigError(f"cuda_graph_optimizer must be auto, true or false, got {asked!r}")
    if asked is not True:  # auto: off until a GPU measures it
        return None
    reason = graphs.trainer_refusal(trainer) or optimizer_refusal(trainer.optimizer, trainer.clip_grad_norm)
    if reason:
        logger.warning(f"cuda_graph_optimizer: {reason}")
        return None
    return WholeStep(trainer.model, trainer.optimizer)
