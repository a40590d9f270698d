"""The training step's forward and backward replayed from CUDA graphs (`cuda_graph_step`).

A batch of RecBole's SASRec launches 264 kernels, one at a time from Python. Where launching them,
not running them, bounds a step, `torch.cuda.make_graphed_callables` helps: it records the model's
`calculate_loss`, forward and backward, once per batch shape and then replays both with two
launches: the same kernels on the same weights. Dropout draws from the run's generator at the
offsets eager kernels would have used (CUDA's graph-safe RNG), so the batches, their negatives and
their masks stay the run's; the recording's own warm-up passes draw inside `fork_rng` and leave
every generator and buffer as they found them. On an H200 (docs/fast.md) the test metrics stayed
equal and a deterministic run stayed bit-identical, but exact mode gained little (SASRec 1.07x,
GRU4Rec 1.03x, BPR's training 1.12x): its fp32 kernels themselves take 8.4 ms of a 9.2 ms batch.

What stays eager, as in RecBole's loop: building the batch, copying it into the graph's inputs,
`zero_grad`, the gradients' accumulation into `.grad`, clipping, the optimizer's step, reading the
losses (a copy of each, loop/losses.py: a replay overwrites its outputs).

In fast mode the loss recorded is fast mode's (compiled, in its precision: the compiler runs in
the recording's warm-up passes). There the host bounds the step (on the H200, SASRec's compiled
kernels take 2.8 ms of a 6.8 ms batch), and recording it pays: the main job's epoch trained in
1.48 s against 4.28 s with the eager step, the test metrics equal. So `cuda_graph_step: auto` (the
default, `tried`) records the step in fast mode on a GPU, and leaves exact mode's step RecBole's.

A batch of another shape (an epoch's last, shorter batch) runs eagerly; at most `MAX_GRAPHS`
shapes are recorded. The step is not graphed, and one line says why, where it cannot be the same
step: on a CPU, with `fast_cuda_graphs` (the compiled loss is replayed already), with RecBole's
autocast or a gradient scaler (fp16), with gradient accumulation (a replay writes each gradient
where the last one was kept), in a data-parallel run, for a model whose loss sets attributes in
Python (LightGCN drops its cached embeddings there; a replay runs no Python), and for one that draws
from Python's or numpy's generator (a replay keeps the recording's draws); both are read from the
model's source (recrunner.training.fast.source). A loss that cannot be recorded (it reads a value
back to the host) is found at its first recording: its batches then run eagerly.
"""

from __future__ import annotations

import contextlib
import logging

import torch

from ...config.checks import SWITCH
from ...config.params import setting
from ...core.errors import ConfigError
from ..fast.source import host_random, set_in_loss

logger = logging.getLogger("recrunner")

MAX_GRAPHS = 2  # batch shapes recorded per run: an epoch's full batches, and its last one


def refusal(*, device_type: str, model: str, fast_graphs: bool, amp: bool, accumulation: int, processes: bool,
            state_set: list[str], draws: list[str] = ()) -> str | None:
    """Why a run's training step cannot be replayed from CUDA graphs as the same step (pure), or None.
    `fast_graphs`: fast mode replays its compiled loss itself (fast_cuda_graphs); `amp`: RecBole's
    enable_amp or a gradient scaler (RecBole's enable_scaler, fast mode's fp16)."""
    if device_type != "cuda":
        return f"CUDA graphs need a CUDA device; {model} trains eagerly on {device_type}"
    if fast_graphs:
        return "fast_cuda_graphs replays the compiled loss already; the step is not recorded twice"
    if amp:
        return "not with RecBole's enable_amp, a gradient scaler (enable_scaler, fp16); the step runs eagerly"
    if accumulation > 1:
        return "not with gradient_accumulation_steps > 1 (a replay writes each gradient where the last was kept)"
    if processes:
        return "not in a data-parallel run; the step runs eagerly"
    if draws:
        return (f"{model} draws from Python's or numpy's generator in its source ({', '.join(draws)}), which a "
                "replayed graph would not draw again; the step runs eagerly")
    if state_set:
        return (f"{model}'s loss sets {', '.join('self.' + name for name in state_set)} in Python, "
                "which a replayed graph would not; the step runs eagerly")
    return None


def signature(interaction) -> tuple | None:
    """What a recorded graph is for: each field's name, shape, dtype and device, or None where a
    field is not a tensor (pure)."""
    fields = getattr(interaction, "interaction", None)
    if not isinstance(fields, dict) or not all(isinstance(value, torch.Tensor) for value in fields.values()):
        return None
    return tuple((name, tuple(value.shape), value.dtype, value.device) for name, value in fields.items())


class _Loss(torch.nn.Module):
    """`model.calculate_loss` over a batch's tensors in a fixed field order: what is recorded (its
    parameters are the model's, so the recorded backward computes their gradients)."""

    def __init__(self, model, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *tensors):
        from recbole.data.interaction import Interaction

        return self.model.calculate_loss(Interaction(dict(zip(self.names, tensors))))


class GraphedLoss:
    """The training loss as the epoch calls it (`loss_func(interaction)`): replayed from the graph
    recorded for the batch's shape, recorded at the first batch of a shape, eager otherwise."""

    def __init__(self, model, make=None):
        self.model = model
        self.make = make or torch.cuda.make_graphed_callables  # tests record on a CPU with a stand-in
        self.graphs: dict[tuple, torch.nn.Module] = {}
        self.failed: str | None = None

    def __call__(self, interaction):
        key = signature(interaction) if self.failed is None and self.model.training else None
        graphed = self.graphs.get(key) if key is not None else None
        if graphed is None and key is not None and len(self.graphs) < MAX_GRAPHS:
            graphed = self._record(key, interaction)
        if graphed is None:
            return self.model.calculate_loss(interaction)
        return graphed(*(interaction[name] for name, *_ in key))

    def _record(self, key, interaction):
        names = tuple(name for name, *_ in key)
        # the graph's inputs: copies, as each replay copies its batch into them (a batch may be a view of a table)
        step, args = _Loss(self.model, names), tuple(interaction[name].clone() for name in names)
        try:
            with rehearsal(self.model, args):
                graphed = self.make(step, args, allow_unused_input=True)
        except Exception as exc:  # noqa: BLE001 - any failure to record means: train this model eagerly
            self.failed = first_line(exc)
            logger.warning(f"cuda_graph_step: {type(self.model).__name__}'s loss could not be recorded "
                           f"({self.failed}); its batches run eagerly")
            return None
        self.graphs[key] = graphed
        logger.info(f"cuda_graph_step: recorded {type(self.model).__name__}'s loss for batches of "
                    f"{_rows(key)} rows ({len(self.graphs)} of at most {MAX_GRAPHS} shapes)")
        return graphed


@contextlib.contextmanager
def rehearsal(model, inputs: tuple):
    """Around a recording: its warm-up and recorded passes draw from forked generators (the inputs' GPU's
    and the CPU's), so the run's draws stay its own, and the running statistics they move are put back."""
    device = inputs[0].device if inputs else torch.device("cpu")
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    buffers = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)


def first_line(exc: BaseException) -> str:
    """`Type: first line of its message` (pure): why a recording failed, in a log line."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def _rows(key) -> str:
    return str(key[0][1][0]) if key and key[0][1] else "?"


def tried(asked, *, fast: bool) -> bool:
    """Whether a run tries to record its step (pure): `true` in every mode, `auto` in fast mode (where
    the host bounds a GPU's step: the main job's epoch trained 2.5-2.8x as fast on an H200), `false` never.
    Exact mode's step stays eager under `auto`: its fp32 kernels bound it, and recording gained it
    1.03-1.12x. `refusal` still decides whether the step can be recorded (a GPU, no scaler, ...)."""
    if asked not in SWITCH:
        raise ConfigError(f"cuda_graph_step must be auto, true or false, got {asked!r}")
    return asked is True or (asked == "auto" and fast)


def graphed_loss(trainer) -> GraphedLoss | None:
    """The trainer's graphed training loss, or None (eager), with one line where the step is not
    recorded: a warning where `cuda_graph_step: true` asked for it, an info line where `auto` would
    have recorded it on a GPU (nothing on a CPU: `auto` never records there)."""
    asked = setting(trainer.config, "cuda_graph_step")
    if not tried(asked, fast=trainer.fast is not None and not trainer.fast.changes_nothing):
        return None
    reason = trainer_refusal(trainer)
    if reason:
        if asked is True:
            logger.warning(f"cuda_graph_step: {reason}")
        elif trainer.device.type == "cuda":
            logger.info(f"cuda_graph_step (auto): {reason}")
        return None
    return GraphedLoss(trainer.model)


def trainer_refusal(trainer) -> str | None:
    """`refusal` with what `trainer` has: why its step cannot be recorded as the same step, or None (also
    loop/whole_step.py's first question)."""
    model = trainer.model
    return refusal(device_type=trainer.device.type, model=type(model).__name__,
                   fast_graphs=trainer.fast is not None and trainer.fast.cuda_graphs,
                   amp=bool(trainer.enable_amp or trainer.enable_scaler or trainer.grad_scaler is not None),
                   accumulation=trainer.accumulation_steps, processes=trainer.world is not None,
                   state_set=set_in_loss(type(model)), draws=host_random(*{type(layer) for layer in model.modules()}))
