"""The trainer's side of a data-parallel run (recrunner.training.distributed.world), as functions of
its `World`. With no process group (every run without `nproc`) the world is None and each of them
passes straight through: the exact single-process loop is unchanged.
"""

from __future__ import annotations

import contextlib
import math

from . import world as distributed

# events after which rank 0's requests are broadcast: every event but the per-batch one (no
# callback requests anything there) and the exception's (the processes are no longer in step)
_UNAGREED = frozenset({"on_train_batch", "on_exception"})


def join(model) -> distributed.World | None:
    """This process's place in its run, if the run has several: the same weights everywhere (rank 0's
    weights and buffers); the optimizer step averages the gradients (recrunner.training.loop.optimizer)."""
    world = distributed.current()
    if world is not None:
        world.broadcast(model.state_dict().values())
    return world


def agree(event: str, control, world) -> None:
    """After a callback event: every process takes rank 0's requests."""
    if world is not None and event not in _UNAGREED:
        distributed.agree(control, world)


def non_finite(loss: float, world) -> bool:
    """Whether a batch loss (its value) is non-finite, here or on any other process of the run."""
    bad = not math.isfinite(loss)
    return bad if world is None else world.any(bad)


def mean_loss(loss, world):
    """The epoch's loss as every process reports it: the mean over the processes."""
    if world is None:
        return loss
    parts = list(loss) if isinstance(loss, tuple) else [loss]
    mean = world.mean([float(part) for part in parts])
    return tuple(mean) if isinstance(loss, tuple) else mean[0]


@contextlib.contextmanager
def evaluation(trainer, eval_data):
    """Around one evaluation: each process scores its block of batches (world.evaluation_split), with
    rank 0's buffers (batch norm's running statistics are not averaged like gradients: as DDP does)."""
    world = trainer.world
    if world is None or not eval_data:
        yield
        return
    world.broadcast(trainer.model.buffers())
    with distributed.evaluation_split(trainer, eval_data, world):
        yield
