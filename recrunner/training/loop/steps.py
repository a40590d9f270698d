"""Step schedules: validate, checkpoint and log every N optimizer steps, and resume within an epoch.

RecBole schedules everything by epochs. With these keys (docs/training-loop.md: Long epochs) a
run also acts between two optimizer steps:

    eval_every_steps: 500          validate every 500 steps (instead of every eval_step epochs)
    checkpoint_every_steps: 200    last.pth every 200 steps, within epochs too
    checkpoint_every_minutes: 30   last.pth when 30 minutes passed since the last one
    log_every_steps: 50            Train-step/Loss and Train-step/LR every 50 steps

How, with any trainer's epoch (RecBole's `_train_epoch` as loop/epoch.py runs it, or a model
trainer's own): `_train_epoch` loops over the training loader, and the trainer hands it `Batches`,
the same loader whose iterator stops at every step boundary (the previous optimizer step done, the
next batch not fetched yet) to let `StepBoundaries`, a component the trainer owns
(`trainer.steps`), act. It also counts each batch's loss (`batch_loss`), read from the device when
due (loop/losses.py) and always before a log line, a validation or a checkpoint. A checkpoint
taken there holds the RNG state at the epoch's start (which fixed the epoch's order) and at the
boundary, and the number of batches done: a resume draws the same order, skips those batches
without building them, restores the boundary's RNG and goes on, so data order, negative samples
and dropout are those of the run that never stopped. A step validation leaves every RNG as it
found it, so validating more often never changes what is trained.

Ctrl-C and SIGTERM that arrive while a batch trains wait for its step to end (a second one stops
at once): last.pth is saved at that step, then the run stops as `interrupted`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from time import time

from ...config.params import setting
from ...core.interrupts import HeldStops
from ..checkpoints import rng
from ..distributed import processes
from ..distributed.iteration import rank_batches, skip_batches
from .context import EpochProgress
from .losses import NonFiniteLoss, PendingLosses


@dataclass(frozen=True)
class StepSchedule:
    """What happens between optimizer steps (None: nothing of that kind)."""

    eval_every: int | None = None
    checkpoint_every: int | None = None
    checkpoint_minutes: float | None = None
    log_every: int | None = None

    @classmethod
    def from_config(cls, config) -> "StepSchedule":
        return cls(setting(config, "eval_every_steps"), setting(config, "checkpoint_every_steps"),
                   setting(config, "checkpoint_every_minutes"), setting(config, "log_every_steps"))

    @property
    def active(self) -> bool:
        return any(value is not None for value in (self.eval_every, self.checkpoint_every,
                                                   self.checkpoint_minutes, self.log_every))

    def validate_at(self, step: int) -> bool:
        return _every(step, self.eval_every)

    def log_at(self, step: int) -> bool:
        return _every(step, self.log_every)

    def checkpoint_at(self, step: int, seconds_since_checkpoint: float) -> bool:
        """Whether a step checkpoint is due (pure): every N steps, or M minutes after the last one."""
        timed = self.checkpoint_minutes is not None and seconds_since_checkpoint >= 60 * self.checkpoint_minutes
        return _every(step, self.checkpoint_every) or timed


def _every(step: int, every: int | None) -> bool:
    return every is not None and step > 0 and step % every == 0


def steps_unsupported(trainer) -> str | None:
    """Why `trainer` cannot act within an epoch, or None when it can (pure over its class)."""
    if getattr(trainer, "single_pass", False):
        return f"{trainer.config['model']} is fitted in one pass"
    base = own_epoch_loop(type(trainer))
    if base is not None:
        return f"{trainer.config['model']} trains its epochs with {base}, which recrunner cannot stop within an epoch"
    return None


def own_epoch_loop(trainer_class) -> str | None:
    """The name of the class whose own `_train_epoch` a trainer class runs instead of RecBole's
    Trainer's (pure), or None: then each batch is one pass of RecBole's loop (loop/epoch.py's
    `train_epoch`, marked `recbole_epoch`, is that loop)."""
    from recbole.trainer import Trainer

    epoch = trainer_class._train_epoch
    if epoch is Trainer._train_epoch or getattr(epoch, "recbole_epoch", False):
        return None
    return getattr(epoch, "__qualname__", "its trainer").split(".")[0]


def steps_in(batches: int, accumulation: int) -> int:
    """Optimizer steps taken by `batches` batches with gradient accumulation (pure; a last short group steps)."""
    return math.ceil(batches / accumulation)


class Batches:
    """The training loader as RecBole's `_train_epoch` sees it: everything is the loader's, but
    iterating it runs the step boundaries between batches."""

    def __init__(self, loader, steps: "StepBoundaries"):
        self.loader, self.steps = loader, steps

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.steps.live = self.steps.batches_with_boundaries(self.loader)
        return self.steps.live

    def __getattr__(self, name):
        return getattr(self.loader, name)


class StepBoundaries:
    """The step counter, and what happens at each step boundary of a trainer's epochs (`trainer.steps`)."""

    def __init__(self, trainer, schedule: StepSchedule):
        self.trainer, self.schedule = trainer, schedule
        self.start_batch = 0          # batches of `start_epoch` a mid-epoch last.pth had trained
        self.resume_rngs = None       # (RNG at that epoch's start, RNG at that step) of a mid-epoch last.pth
        self.epoch = EpochProgress()  # where the epoch being trained is (recrunner.training.loop.context)
        self.live = None              # the generator Batches handed RecBole's epoch (closed when it ends)
        self.interval = [0.0, 0]      # loss sum and batches since the last log_every_steps line
        self.losses = PendingLosses()  # batch losses not read from the device yet (loop/losses.py)
        self.clock = time()           # when train_seconds last accrued
        self.has_boundaries = False   # whether this trainer's epochs can stop between steps (fit decides)

    @property
    def eval_every(self) -> int | None:
        return self.schedule.eval_every

    def check_support(self):
        """Decided once per fit: whether the trainer's epochs have step boundaries (else schedules act at epoch ends)."""
        reason = steps_unsupported(self.trainer)
        self.has_boundaries = reason is None
        if reason and self.schedule.active:
            self.trainer.logger.warning(f"step schedules: {reason}; eval_every_steps, checkpoint_every_steps, "
                                        "checkpoint_every_minutes and log_every_steps act at epoch ends only")
            self.schedule = StepSchedule()

    def batches(self, train_data, epoch_idx):
        """What RecBole's epoch iterates: the loader itself, or Batches where the trainer can act in an epoch."""
        start, self.start_batch = self.start_batch, 0
        self.epoch = EpochProgress(index=epoch_idx, start_batch=start, batches_seen=start,
                                   steps_counted=start // self.trainer.accumulation_steps)
        if start == 0 and not self.has_boundaries and self.trainer.world is None:
            return train_data
        return Batches(train_data, self)

    def batches_with_boundaries(self, loader):
        trainer, epoch = self.trainer, self.epoch
        start, generators = epoch.start_batch, trainer._generators
        if start:
            rng.restore(self.resume_rngs[0], generators)
        epoch.rng = rng.capture(generators)  # before the iterator draws this epoch's order
        iterator = iter(loader)
        if start:
            skip_batches(iterator, start)
            rng.restore(self.resume_rngs[1], generators)
            epoch.running_loss = trainer.state.epoch_loss
        if trainer.world is not None:  # a data-parallel run: this process's part of each batch
            iterator = rank_batches(iterator, loader, trainer.world)
        total, steps = len(loader), trainer.accumulation_steps
        with HeldStops() as stops:
            for index in range(start, total):
                if index > start and index % steps == 0 and self._at_boundary(index, stops):
                    return
                batch = next(iterator, None)
                if batch is None:
                    return
                yield batch
            if self._held_anywhere(stops):  # a stop held through the epoch's last batch
                self._stop_after_last_batch(total, stops)

    def _at_boundary(self, index, stops) -> bool:
        """Between two steps of an epoch: log, validate, checkpoint when due; True: stop the epoch."""
        trainer, state = self.trainer, self.trainer.state
        state.global_step += 1
        self.epoch.steps_counted += 1
        step = state.global_step
        if self.schedule.log_at(step):
            self._log()
        if self.schedule.validate_at(step) and trainer.is_validating(trainer.call.valid_data):
            with stops.released():
                self._validate()
        due = self.schedule.checkpoint_at(step, time() - trainer.checkpoints.last_saved)
        stop = stops.pending is not None
        if trainer.world is not None:  # a data-parallel run's processes act together: rank 0's clock, anyone's stop
            due, stop = trainer.world.share(due), trainer.world.any(stop)
        if trainer.call.saved and (due or stop or trainer.control.should_save):
            self._save(index)
        if stop:
            stops.stop_now()
        return trainer.control.should_stop

    def _held_anywhere(self, stops) -> bool:
        held = stops.pending is not None
        return held if self.trainer.world is None else self.trainer.world.any(held)

    def _stop_after_last_batch(self, total, stops):
        """Save after the epoch's last batch, where that is a whole step (a resume then only ends the
        epoch: validation and last.pth as the run would have had them), then stop."""
        if total % self.trainer.accumulation_steps == 0 and self.trainer.call.saved:
            self.trainer.state.global_step += 1
            self.epoch.steps_counted += 1
            self._save(total)
        stops.stop_now()

    def end_epoch(self, loss):
        """After an epoch's last step: count its steps, log and validate when due; the epoch's loss."""
        trainer, state, epoch = self.trainer, self.trainer.state, self.epoch
        state.global_step += steps_in(epoch.batches_seen, trainer.accumulation_steps) - epoch.steps_counted
        if epoch.start_batch and not isinstance(loss, tuple) and epoch.running_loss is not None:
            loss = epoch.running_loss  # RecBole summed only the batches after the resume
        if not self.schedule.active or epoch.non_finite_batch is not None or trainer.control.should_stop:
            return loss
        step = state.global_step
        if self.schedule.log_at(step):
            self._log()
        last_epoch = epoch.index + 1 >= trainer.epochs
        if self.schedule.eval_every and trainer.is_validating(trainer.call.valid_data) and (
                self.schedule.validate_at(step) or (last_epoch and state.validated_step != step)):
            self._validate()
        return loss

    def close(self):
        """End the epoch's Batches generator, so its held stops are released even when the epoch raised."""
        if self.live is not None:
            self.live.close()
            self.live = None

    def batch_loss(self, loss, parts=None, read_now: bool = False):
        """A batch's loss is computed (a tensor; `parts`: its parts, where the model returns a tuple):
        kept until read, read with the pending ones when due (or `read_now`), then `on_train_batch`."""
        epoch = self.epoch
        epoch.batches_seen += 1
        self.losses.add(epoch.batches_seen - 1, loss, parts)
        if read_now or self.losses.due:
            self.read_losses()
        self.trainer._call("on_train_batch", batch=epoch.batches_seen - 1)

    def read_losses(self):
        """Read every pending batch loss and count it, in order; NonFiniteLoss at the first that is NaN
        or infinite (on any process of a data-parallel run)."""
        for batch, value, parts in self.losses.read():
            if processes.non_finite(value, self.trainer.world):
                raise NonFiniteLoss(value, batch, read_at=self.epoch.batches_seen - 1)
            self.epoch.count_loss(value, parts)
            self.interval[0] += value
            self.interval[1] += 1

    def _log(self):
        self.read_losses()
        total, batches = self.interval
        self.interval = [0.0, 0]
        if batches:
            self.trainer._call("on_train_log", loss=total / batches, lr=self.trainer.optimizer.param_groups[0]["lr"])

    def _validate(self):
        self.read_losses()  # a non-finite loss fails the run as such, not as the diverged weights' scores
        trainer = self.trainer
        with rng.preserved(trainer._generators):
            trainer._validate_and_track(self.epoch.index, trainer.call)
        trainer.model.train()  # RecBole's validation leaves the model in eval mode
        if trainer.state.best_step == trainer.state.global_step:
            self.accrue_time()
            trainer.seconds_to_best = trainer.train_seconds

    def _save(self, index):
        self.read_losses()  # the checkpoint holds the loss so far, and none of weights after a non-finite loss
        trainer, state = self.trainer, self.trainer.state
        self.accrue_time()
        state.batch_in_epoch, state.epoch_loss = index, self.epoch.running_loss
        try:
            trainer.save_training_state(self.epoch.index - 1, epoch_rng=self.epoch.rng)
        finally:
            state.batch_in_epoch, state.epoch_loss = 0, None
        trainer.control.should_save = False

    def accrue_time(self):
        """Add the time since the last accrual to train_seconds (so a checkpoint holds it all)."""
        now = time()
        self.trainer.train_seconds += now - self.clock
        self.clock = now

    def resume_within_epoch(self, state: dict):
        """From a mid-epoch last.pth: the batch to start at and the two RNG states to get there."""
        self.start_batch = int(self.trainer.state.batch_in_epoch or 0)
        self.resume_rngs = (state.get("epoch_rng"), state["rng"]) if self.start_batch else None
        self.trainer.state.batch_in_epoch = 0
