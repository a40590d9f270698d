"""Step schedules: validate, checkpoint and log every N optimizer steps, and resume within an epoch.

RecBole schedules everything by epochs. With these keys (docs/training-loop.md: Long epochs) a
run also acts between two optimizer steps:

    eval_every_steps: 500          validate every 500 steps (instead of every eval_step epochs)
    checkpoint_every_steps: 200    last.pth every 200 steps, within epochs too
    checkpoint_every_minutes: 30   last.pth when 30 minutes passed since the last one
    log_every_steps: 50            Train-step/Loss and Train-step/LR every 50 steps

How, without replacing RecBole's epoch: `_train_epoch` loops over the training loader, and the
trainer hands it `Batches`, the same loader whose iterator stops at every step boundary (the
previous optimizer step done, the next batch not fetched yet) to let `StepLoop` act. A checkpoint
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
from ..distributed.iteration import rank_batches, skip_batches
from ..checkpoints.state import state_attribute


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
    Trainer's (pure), or None: then each batch is one pass of RecBole's loop."""
    from recbole.trainer import Trainer

    if trainer_class._train_epoch is Trainer._train_epoch:
        return None
    return next((c.__name__ for c in trainer_class.__mro__ if "_train_epoch" in vars(c)), "its trainer")


def steps_in(batches: int, accumulation: int) -> int:
    """Optimizer steps taken by `batches` batches with gradient accumulation (pure; a last short group steps)."""
    return math.ceil(batches / accumulation)


class Batches:
    """The training loader as RecBole's `_train_epoch` sees it: everything is the loader's, but
    iterating it runs the trainer's step boundaries between batches."""

    def __init__(self, loader, trainer, epoch_idx: int):
        self.loader, self.trainer, self.epoch_idx = loader, trainer, epoch_idx

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.trainer._live_batches = self.trainer._batches_with_steps(self.loader, self.epoch_idx)
        return self.trainer._live_batches

    def __getattr__(self, name):
        return getattr(self.loader, name)


class StepLoop:
    """Mixed into CustomTrainer: the step counter, and what happens at each step boundary."""

    # the step fields of the training state (recrunner.training.checkpoints.state)
    global_step = state_attribute("global_step")
    best_step = state_attribute("best_step")
    validated_step = state_attribute("validated_step")
    batch_in_epoch = state_attribute("batch_in_epoch")
    epoch_loss = state_attribute("epoch_loss")

    def _init_steps(self, config):
        self.steps = StepSchedule.from_config(config)
        self.start_batch = 0          # batches of `start_epoch` a mid-epoch last.pth had trained
        self._resume_rngs = None      # (RNG at that epoch's start, RNG at that step) of a mid-epoch last.pth
        self._epoch_rng = None        # the RNG when this epoch's iterator was made (step checkpoints keep it)
        self._epoch_start_batch = 0   # the batch this epoch's training began at (> 0: resumed within it)
        self._steps_counted = 0       # this epoch's optimizer steps already in state.global_step
        self._live_batches = None     # the generator Batches handed RecBole's epoch (closed when it ends)
        self._running_loss = None     # this epoch's loss so far, summed as RecBole sums it
        self._interval = [0.0, 0]     # loss sum and batches since the last log_every_steps line
        self._clock = self._last_checkpoint = time()
        self._fit_args = None         # (valid_data, verbose, saved, show_progress, callback_fn) of this fit
        self._has_boundaries = False  # whether this trainer's epochs can stop between steps (fit decides)

    def _check_step_support(self):
        reason = steps_unsupported(self)
        self._has_boundaries = reason is None  # decided once per fit: every epoch of it reads this
        if reason and self.steps.active:
            self.logger.warning(f"step schedules: {reason}; eval_every_steps, checkpoint_every_steps, "
                                "checkpoint_every_minutes and log_every_steps act at epoch ends only")
            self.steps = StepSchedule()

    def _step_batches(self, train_data, epoch_idx):
        """What RecBole's epoch iterates: the loader itself, or Batches where this trainer can act in an epoch."""
        self._epoch_start_batch, self.start_batch = self.start_batch, 0
        self._steps_counted = self._epoch_start_batch // self.accumulation_steps
        self._running_loss = None
        if self._epoch_start_batch == 0 and not self._has_boundaries and self.world is None:
            return train_data
        return Batches(train_data, self, epoch_idx)

    def _batches_with_steps(self, loader, epoch_idx):
        start = self._epoch_start_batch
        if start:
            rng.restore(self._resume_rngs[0], self._generators)
        self._epoch_rng = rng.capture(self._generators)  # before the iterator draws this epoch's order
        iterator = iter(loader)
        if start:
            skip_batches(iterator, start)
            rng.restore(self._resume_rngs[1], self._generators)
            self._running_loss = self.state.epoch_loss
        if self.world is not None:  # a data-parallel run: this process's part of each batch
            iterator = rank_batches(iterator, loader, self.world)
        total, steps = len(loader), self.accumulation_steps
        with HeldStops() as stops:
            for index in range(start, total):
                if index > start and index % steps == 0 and self._at_step_boundary(epoch_idx, index, stops):
                    return
                batch = next(iterator, None)
                if batch is None:
                    return
                yield batch
            if self._held_anywhere(stops):  # a stop held through the epoch's last batch
                self._stop_after_last_batch(epoch_idx, total, stops)

    def _at_step_boundary(self, epoch_idx, index, stops) -> bool:
        """Between two steps of an epoch: log, validate, checkpoint when due; True: stop the epoch."""
        self.state.global_step += 1
        self._steps_counted += 1
        step = self.state.global_step
        if self.steps.log_at(step):
            self._log_steps()
        if self.steps.validate_at(step) and self.is_validating(self._fit_args[0]):
            with stops.released():
                self._validate_at_step(epoch_idx)
        due = self.steps.checkpoint_at(step, time() - self._last_checkpoint)
        stop = stops.pending is not None
        if self.world is not None:  # a data-parallel run's processes act together: rank 0's clock, anyone's stop
            due, stop = self.world.share(due), self.world.any(stop)
        if self._fit_args[2] and (due or stop or self.control.should_save):
            self._save_step_checkpoint(epoch_idx, index)
        if stop:
            stops.stop_now()
        return self.control.should_stop

    def _held_anywhere(self, stops) -> bool:
        held = stops.pending is not None
        return held if self.world is None else self.world.any(held)

    def _stop_after_last_batch(self, epoch_idx, total, stops):
        """Save after the epoch's last batch, where that is a whole step (a resume then only ends the
        epoch: validation and last.pth as the run would have had them), then stop."""
        if total % self.accumulation_steps == 0 and self._fit_args[2]:
            self.state.global_step += 1
            self._steps_counted += 1
            self._save_step_checkpoint(epoch_idx, total)
        stops.stop_now()

    def _end_epoch_steps(self, epoch_idx, loss):
        """After an epoch's last step: count its steps, log and validate when due; the epoch's loss."""
        self.state.global_step += steps_in(self._batches_seen, self.accumulation_steps) - self._steps_counted
        if self._epoch_start_batch and not isinstance(loss, tuple) and self._running_loss is not None:
            loss = self._running_loss  # RecBole summed only the batches after the resume
        if not self.steps.active or self.non_finite_batch is not None or self.control.should_stop:
            return loss
        step = self.state.global_step
        if self.steps.log_at(step):
            self._log_steps()
        last_epoch = epoch_idx + 1 >= self.epochs
        if self.steps.eval_every and self.is_validating(self._fit_args[0]) and (
                self.steps.validate_at(step) or (last_epoch and self.state.validated_step != step)):
            self._validate_at_step(epoch_idx)
        return loss

    def _close_batches(self):
        """End the epoch's Batches generator, so its held stops are released even when the epoch raised."""
        if self._live_batches is not None:
            self._live_batches.close()
            self._live_batches = None

    def _count_loss(self, loss):
        """A batch's loss: the epoch's running sum (as RecBole sums it) and the log interval's."""
        value = loss.item()
        self._running_loss = value if self._running_loss is None else self._running_loss + value
        self._interval[0] += value
        self._interval[1] += 1

    def _log_steps(self):
        total, batches = self._interval
        self._interval = [0.0, 0]
        if batches:
            self._call("on_train_log", loss=total / batches, lr=self.optimizer.param_groups[0]["lr"])

    def _validate_at_step(self, epoch_idx):
        valid_data, verbose, saved, show_progress, callback_fn = self._fit_args
        with rng.preserved(self._generators):
            self._validate_and_track(valid_data, epoch_idx, verbose, saved, show_progress, callback_fn)
        self.model.train()  # RecBole's validation leaves the model in eval mode
        if self.state.best_step == self.state.global_step:
            self._accrue_time()
            self.seconds_to_best = self.train_seconds

    def _save_step_checkpoint(self, epoch_idx, index):
        self._accrue_time()
        self.state.batch_in_epoch, self.state.epoch_loss = index, self._running_loss
        try:
            self.save_training_state(epoch_idx - 1, epoch_rng=self._epoch_rng)
        finally:
            self.state.batch_in_epoch, self.state.epoch_loss = 0, None
        self.control.should_save = False

    def _accrue_time(self):
        """Add the time since the last accrual to train_seconds (so a checkpoint holds it all)."""
        now = time()
        self.train_seconds += now - self._clock
        self._clock = now

    def _resume_within_epoch(self, state: dict):
        """From a mid-epoch last.pth: the batch to start at and the two RNG states to get there."""
        self.start_batch = int(self.state.batch_in_epoch or 0)
        self._resume_rngs = (state.get("epoch_rng"), state["rng"]) if self.start_batch else None
        self.state.batch_in_epoch = 0
