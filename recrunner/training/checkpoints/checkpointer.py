"""How a trainer saves and restores itself: best.pth, last.pth, epoch copies, resume (`Checkpointer`).

The one place that decides what goes into each checkpoint (docs/design.md: Checkpoints); the
file format itself (plain data, atomic writes, safe loading, the device boundary) is
recrunner.training.checkpoints.files's. The trainer owns a Checkpointer (`trainer.checkpoints`) and
keeps RecBole's method names as its doors (`_save_checkpoint`, `resume_checkpoint`); trainer
families override the trainer's `_weights_state` and `_restore_weights` (families/trees.py: a
booster), whose default is `weights_state` / `restore_weights` below.
"""

from __future__ import annotations

from pathlib import Path
from time import time

from recbole.utils import set_color

from . import files as checkpoint, model_state, rng
from ...core.errors import CheckpointError
from ...core.layout import CheckpointPaths
from ..fast.plan import plan_text, same_plan_key
from .state import TrainingState


class Checkpointer:
    """best.pth, last.pth and its epoch copies of one trainer's run, and resuming from them."""

    def __init__(self, trainer, files: CheckpointPaths, save_total_limit=None):
        self.trainer, self.files, self.save_total_limit = trainer, files, save_total_limit
        self.best, self.last = files.best, files.last
        self.pending_rng = None   # a resumed fit's RNG state, restored once its epoch -1 would have run
        self.last_saved = time()  # when last.pth was last written (checkpoint_every_minutes)

    @property
    def writes(self) -> bool:
        """Whether this process writes the run's files: always, but in a data-parallel run's rank 0."""
        return self.trainer.world is None or self.trainer.world.writes

    def save_best(self, epoch, verbose=True):
        trainer = self.trainer
        state = trainer._weights_state(kind="best", epoch=epoch)
        state["best_valid_score"] = _plain_score(trainer.best_valid_score)
        state["step"] = trainer.state.global_step  # the optimizer steps these weights had taken
        if self.writes:
            checkpoint.save_atomic(state, self.best)
        if verbose:
            at_step = f", step {trainer.state.global_step}" if trainer.steps.eval_every else ""
            trainer.logger.info(set_color("Saving best", "blue") + f": {self.best} (epoch {epoch}{at_step})")
        trainer._call("on_checkpoint_saved", path=self.best, kind="best")

    def save_last(self, epoch, epoch_rng=None):
        """last.pth: everything needed to continue exactly after `epoch` (not an export).

        Within an epoch (recrunner.training.loop.steps), `epoch` is the last epoch done, `batch_in_epoch`
        counts the batches of the next one trained, and `epoch_rng` is the RNG its order was drawn from.
        """
        trainer = self.trainer
        state = trainer._weights_state(kind="last", epoch=epoch)
        state.update(trainer.state.to_checkpoint())  # every TrainingState field under its own name
        state.update(epoch=epoch, optimizer=trainer.optimizer.state_dict(), callbacks=trainer.callbacks.state_dict(),
                     rng=rng.capture(trainer._generators))
        if epoch_rng is not None:
            state["epoch_rng"] = epoch_rng
        if trainer.world is not None:  # every process's own: its RNG streams, its part of the epoch's loss
            state["processes"] = trainer.world.gather({"rng": state["rng"], "epoch_rng": epoch_rng,
                                                       "epoch_loss": trainer.state.epoch_loss})
        if trainer.fast is not None:
            state["fast"] = {"plan": trainer.fast.as_dict(),
                             "scaler": trainer.grad_scaler.state_dict() if trainer.grad_scaler is not None else None}
        if self.writes:
            _flush_events(trainer)
            checkpoint.save_atomic(state, self.last)
        self.last_saved = time()
        if self.writes and self.save_total_limit and epoch_rng is None:
            self._keep_epoch_copy(epoch, state)
        trainer._call("on_checkpoint_saved", path=self.last, kind="last")

    def _keep_epoch_copy(self, epoch, state):
        checkpoint.save_atomic(state, self.files.epoch_copy(epoch))
        for old in self.files.epoch_copies()[int(self.save_total_limit):]:  # newest first
            old.unlink(missing_ok=True)

    def resume(self, resume_file):
        """Load a last.pth (or epoch-N.pth) and continue after its epoch, exactly."""
        trainer = self.trainer
        state = checkpoint.load_training_state(resume_file)
        if state["model"] != trainer.config["model"]:
            raise CheckpointError(f"{resume_file} was written by {state['model']}, not {trainer.config['model']}")
        state = self._this_process(state, resume_file)
        self._restore_fast(state.get("fast"), resume_file)
        trainer._restore_weights(state)
        trainer.optimizer.load_state_dict(state["optimizer"])  # moved to its parameters' device
        trainer.state = TrainingState.from_checkpoint(state)
        trainer.start_epoch = trainer.epochs if trainer.finished else state["epoch"] + 1
        trainer.callbacks.load_state_dict(state["callbacks"])
        self.pending_rng = state["rng"]
        where = resumed_at(state["epoch"], trainer.start_epoch, trainer.state)
        trainer.steps.resume_within_epoch(state)
        trainer.logger.info(f"Resumed from {resume_file}: {where} (best epoch {trainer.best_epoch}, "
                            f"best score {trainer.best_valid_score})")
        return state

    def _this_process(self, state, resume_file):
        """A data-parallel checkpoint as this process saved it (its RNG states, its loss so far); the
        same number of processes only."""
        world = self.trainer.world
        saved = len(state.get("processes") or ()) or 1
        size = world.size if world is not None else 1
        if saved != size:
            raise CheckpointError(f"{resume_file} was trained in {saved} process(es), this run has {size}; "
                                  f"run it with --nproc {saved}, or pass --restart")
        if world is not None:
            mine = state["processes"][world.rank]
            state["rng"], state["epoch_loss"] = mine["rng"], mine["epoch_loss"]
            if mine["epoch_rng"] is not None:
                state["epoch_rng"] = mine["epoch_rng"]
        return state

    def restore_pending_rng(self):
        """At the start of a resumed fit: the RNG state last.pth saved."""
        if self.pending_rng is not None:
            rng.restore(self.pending_rng, self.trainer._generators)
            self.pending_rng = None

    def _restore_fast(self, saved: dict | None, resume_file):
        """A fast run resumes only in the same fast plan, with its gradient scaler as it was."""
        trainer = self.trainer
        then = same_plan_key((saved or {}).get("plan"))
        now = same_plan_key(trainer.fast.as_dict() if trainer.fast is not None else None)
        if then != now:
            raise CheckpointError(f"{resume_file} was trained {plan_text(then)}, this run would train {plan_text(now)}; "
                                  "set fast, fast_precision, fast_compile, fast_dropout, fast_negatives, fast_last_layer, "
                                  "fast_fused_optimizer and fast_attention as the run had them, or pass --restart")
        if trainer.grad_scaler is not None and (saved or {}).get("scaler"):
            trainer.grad_scaler.load_state_dict(saved["scaler"])

    def load_best(self, path=None):
        path = Path(path or self.best)
        state = checkpoint.load(path)
        self.trainer._restore_weights(state)
        self.trainer.logger.info(f"Loading model parameters from {path} (epoch {state['epoch']})")
        return state


def _flush_events(trainer) -> None:
    """The TensorBoard points logged so far written to their files before last.pth is: a run SIGKILLed after
    its checkpoint resumes from it and does not log them again (a test's resumed step curve missed points
    the killed process still held in its writer's buffer)."""
    flush = getattr(getattr(trainer, "tensorboard", None), "flush", None)
    if flush is not None:
        flush()


def weights_state(trainer, kind, epoch) -> dict:
    """The model's weights and state (model_state) with what identifies the checkpoint."""
    try:
        other = model_state.save(trainer.model, trainer.extra_state_names)
    except TypeError as exc:
        raise CheckpointError(f"{trainer.config['model']} keeps state recrunner cannot save safely: {exc}") from None
    return {**checkpoint.header(kind, epoch, trainer.config), "state_dict": trainer.model.state_dict(),
            "other_parameter": other}


def restore_weights(trainer, state) -> None:
    """The inverse of `weights_state`, for resume and for test scoring."""
    trainer.model.load_state_dict(state["state_dict"])  # copied into the parameters, on their device
    model_state.restore(trainer.model, state.get("other_parameter"), device=trainer.device)


def _plain_score(score):
    return float(score) if score is not None else None


def resumed_at(done_epoch: int, start_epoch: int, state) -> str:
    """Where a resume continues, for its log line (pure)."""
    if state.batch_in_epoch:
        return (f"continuing within epoch {start_epoch} at batch {state.batch_in_epoch} "
                f"(step {state.global_step})")
    return f"epoch {done_epoch} done, continuing at epoch {start_epoch}"
