"""Data-parallel training on torch.distributed: what each process of a run does differently.

A run with `nproc: N` (docs/distributed.md) trains in N processes, one per device, that together
are one run. Every process builds the same model from the same seed; then

- training: each global batch of `train_batch_size` (drawn by every process from the same loader
  order) is split in N contiguous parts, one per process, built only there (negative sampling
  included); the gradients are averaged over the processes before every optimizer step
  (`OptimizerStep`'s `average`), then clipped once, so every process takes the same step;
- evaluation: the evaluation batches are split in N contiguous blocks, one per process; what each
  block collected (RecBole's DataStruct: top-k hits, ranks, scores, labels) is gathered in block
  order, so every process computes the metrics on exactly the data a single process would have:
  every user, or labeled row, counted once, none padded (RecBole's own `_map_reduce` averages
  per-process means weighted by a wrong count, and its sampler pads by repeating users);
- decisions: after every callback event, rank 0's requests (stop, save, failure, pruned) are
  broadcast, so no process waits in a collective another one left; a non-finite loss on any
  process is one on all of them;
- files: rank 0 alone writes (checkpoints, TensorBoard, history, records); a checkpoint holds
  every process's RNG state, and resumes only with the same number of processes.

RecBole's own distributed code is never switched on (`single_spec` stays True): it hard-codes NCCL
and wraps the model in DDP on `device_ids=[local_rank]`, which fails on a CPU.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass, fields

import torch

from ...core.errors import RecrunnerError
from .iteration import part_bounds, skip_batches

# what the collector gathers per evaluation batch (recbole.evaluator.collector.Collector)
PER_BATCH_KEYS = ("rec.items", "rec.topk", "rec.meanrank", "rec.score", "data.label")


class PeerLost(RecrunnerError):
    """Another process of the run stopped (killed, or failed): this one cannot go on alone."""


@dataclass(frozen=True)
class World:
    """This process's place in its run: `rank` of `size` (`local_rank` on its machine)."""

    rank: int
    size: int
    local_rank: int = 0

    @property
    def writes(self) -> bool:
        return self.rank == 0

    def share(self, value):
        """Rank 0's `value`, on every process."""
        box = [value if self.rank == 0 else None]
        with _collective("share"):
            torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value) -> list:
        """Every process's `value`, in rank order, on every process."""
        out = [None] * self.size
        with _collective("gather"):
            torch.distributed.all_gather_object(out, value)
        return out

    def any(self, flag: bool) -> bool:
        """Whether `flag` holds on any process."""
        tensor = torch.tensor([1.0 if flag else 0.0], device=_device())
        with _collective("all_reduce"):
            torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
        return bool(tensor.item())

    def mean(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=_device())
        with _collective("all_reduce"):
            torch.distributed.all_reduce(tensor)
        return (tensor / self.size).tolist()

    def broadcast(self, tensors) -> None:
        """Rank 0's values of these tensors, in place, on every process (dense ones: a sparse buffer is
        built the same everywhere from the data)."""
        with _collective("broadcast"):
            for tensor in tensors:
                if tensor.layout == torch.strided:
                    torch.distributed.broadcast(tensor.data, src=0)

    def average_gradients(self, params) -> None:
        """Every parameter's gradient becomes its mean over the processes (one flat all_reduce);
        a parameter without a gradient counts as zero where others have one, and stays None where
        no process has one."""
        params = [p for p in params if p.requires_grad]
        if not params:
            return
        device = params[0].device
        present = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=device)
        flat = torch.cat([present] + [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float()
                                      for p in params])
        with _collective("all_reduce"):
            torch.distributed.all_reduce(flat)
        flat /= self.size
        offset = len(params)
        for index, param in enumerate(params):
            size = param.numel()
            if flat[index] > 0:
                grad = flat[offset:offset + size].view_as(param).to(param.dtype)
                if param.grad is None:
                    param.grad = grad.clone()
                else:
                    param.grad.copy_(grad)
            offset += size


def current() -> World | None:
    """This process's World when it is one of several in an initialised group, else None."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return None
    size = torch.distributed.get_world_size()
    if size < 2:
        return None
    return World(torch.distributed.get_rank(), size, int(os.environ.get("LOCAL_RANK", 0)))


def _device():
    return torch.device("cuda", torch.cuda.current_device()) if torch.distributed.get_backend() == "nccl" \
        else torch.device("cpu")


@contextlib.contextmanager
def _collective(what: str):
    """A collective whose partner is gone fails as PeerLost (gloo: connection closed; a timeout)."""
    try:
        yield
    except (RuntimeError, torch.distributed.DistError) as exc:
        raise PeerLost(f"another process of this run stopped during {what} ({str(exc).splitlines()[0][:160]})") \
            from exc


def init_group(backend: str, timeout_seconds: float, init_method: str | None = None) -> World:
    """Join the run's process group: RANK, WORLD_SIZE and LOCAL_RANK from the environment (torchrun's,
    or recrunner's launcher's); the rendezvous at `init_method`, else torchrun's MASTER_ADDR/PORT."""
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    extra = {} if init_method is None else {"init_method": init_method, "rank": int(os.environ["RANK"]),
                                            "world_size": int(os.environ["WORLD_SIZE"])}
    torch.distributed.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_seconds), **extra)
    return current()


def leave_group() -> None:
    """Leave the run's process group, where this process is in one, before the interpreter exits: left to
    Python's exit, gloo's threads can outlive the group (a torchrun worker of CI's BPR test once aborted with
    "terminate called without an active exception", exit -6)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


# ---------------------------------------------------------------------- evaluation
@contextlib.contextmanager
def evaluation_split(trainer, eval_data, world: World):
    """During the block, `trainer.evaluate(eval_data)` scores this rank's block of batches and
    computes the metrics on every block's collected data, gathered in order.

    A loader that draws while it builds batches (sampled ranking: RecBole samples the negatives of
    each evaluation batch from numpy's global RNG) is built whole on every process, from rank 0's
    RNG state, so each block scores the candidates one process would have drawn for it; rank 0
    keeps the state those draws leave, as one process would, the others their own."""
    from ..checkpoints import rng

    collector = trainer.eval_collector
    original_class, original_struct = eval_data.__class__, collector.get_data_struct
    start, end = part_bounds(len(eval_data), world.rank, world.size)
    draws = type(eval_data).__name__ != "FullSortEvalDataLoader"
    own_rng = rng.capture(trainer._generators) if draws else None

    def gathered_struct():
        struct = original_struct()
        by_rank = world.gather([struct[key] if key in struct else None for key in PER_BATCH_KEYS])
        for index, key in enumerate(PER_BATCH_KEYS):
            present = [parts[index] for parts in by_rank if parts[index] is not None]
            if present:
                struct[key] = torch.cat(present, dim=0)
        return struct

    if draws:
        rng.restore(world.share(own_rng), trainer._generators)
    eval_data.__class__ = _block_class(original_class)
    eval_data._block = (start, end, draws)
    collector.get_data_struct = gathered_struct
    try:
        yield
    finally:
        eval_data.__class__ = original_class
        del collector.get_data_struct
        if draws and world.rank != 0:
            rng.restore(own_rng, trainer._generators)


_BLOCK_CLASSES: dict = {}


def _block_class(cls):
    """`cls` whose iteration yields only the batches [start, end) of its `_block`: the others are
    skipped without being built, or, where building draws random numbers, built and dropped."""
    if cls not in _BLOCK_CLASSES:
        def __iter__(self):
            start, end, draws = self._block
            iterator = cls.__iter__(self)
            if draws:
                yield from (batch for index, batch in enumerate(iterator) if start <= index < end)
                return
            skip_batches(iterator, start)
            for _ in range(end - start):
                batch = next(iterator, None)
                if batch is None:
                    return
                yield batch

        _BLOCK_CLASSES[cls] = type(cls.__name__, (cls,), {"__iter__": __iter__, "__module__": cls.__module__})
    return _BLOCK_CLASSES[cls]


# ---------------------------------------------------------------------- decisions
def agree(control, world: World) -> None:
    """Every process takes rank 0's requests (recrunner.training.callbacks.TrainerControl)."""
    values = world.share({f.name: getattr(control, f.name) for f in fields(control)})
    for name, value in values.items():
        setattr(control, name, value)
