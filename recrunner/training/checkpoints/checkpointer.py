"""How CustomTrainer saves and restores itself: best.pth, last.pth, epoch copies, resume.

The one place that decides what goes into each checkpoint (docs/design.md: Checkpoints); the
file format itself (plain data, atomic writes, safe loading) is recrunner.training.checkpoints.files's.
Trainer families override `_weights_state` and `_restore_weights` (trees.py: a booster).
"""

from __future__ import annotations

from pathlib import Path
from time import time

from recbole.utils import set_color

from . import files as checkpoint, model_state, rng
from ...core.errors import CheckpointError
from ..fast.plan import plan_text, same_plan_key
from .state import TrainingState


class Checkpointing:
    """Mixed into CustomTrainer before RecBole's Trainer (whose _save_checkpoint and
    resume_checkpoint it replaces)."""

    def _save_checkpoint(self, epoch, verbose=True, **kwargs):
        """RecBole's name for saving the checkpoint that testing loads: best.pth here."""
        self._save_best_checkpoint(epoch, verbose)

    def _save_best_checkpoint(self, epoch, verbose=True):
        state = self._weights_state(kind="best", epoch=epoch)
        state["best_valid_score"] = _plain_score(self.best_valid_score)
        state["step"] = self.state.global_step  # the optimizer steps these weights had taken
        if self._writes:
            checkpoint.save_atomic(state, self.best_path)
        if verbose:
            at_step = f", step {self.state.global_step}" if self.steps.eval_every else ""
            self.logger.info(set_color("Saving best", "blue") + f": {self.best_path} (epoch {epoch}{at_step})")
        self._call("on_checkpoint_saved", path=self.best_path, kind="best")

    def save_training_state(self, epoch, epoch_rng=None):
        """last.pth: everything needed to continue exactly after `epoch` (not an export).

        Within an epoch (recrunner.training.loop.steps), `epoch` is the last epoch done, `batch_in_epoch`
        counts the batches of the next one trained, and `epoch_rng` is the RNG its order was drawn from.
        """
        state = self._weights_state(kind="last", epoch=epoch)
        state.update(self.state.to_checkpoint())  # every TrainingState field under its own name
        state.update(epoch=epoch, optimizer=self.optimizer.state_dict(), callbacks=self.callbacks.state_dict(),
                     rng=rng.capture(self._generators))
        if epoch_rng is not None:
            state["epoch_rng"] = epoch_rng
        if self.world is not None:  # every process's own: its RNG streams, its part of the epoch's loss
            state["processes"] = self.world.gather({"rng": state["rng"], "epoch_rng": epoch_rng,
                                                    "epoch_loss": self.state.epoch_loss})
        if self.fast is not None:
            state["fast"] = {"plan": self.fast.as_dict(),
                             "scaler": self.grad_scaler.state_dict() if self.grad_scaler is not None else None}
        if self._writes:
            checkpoint.save_atomic(state, self.last_path)
        self._last_checkpoint = time()
        if self._writes and self.save_total_limit and epoch_rng is None:
            self._keep_epoch_copy(epoch, state)
        self._call("on_checkpoint_saved", path=self.last_path, kind="last")

    def _keep_epoch_copy(self, epoch, state):
        checkpoint.save_atomic(state, self.checkpoint_files.epoch_copy(epoch))
        copies = self.checkpoint_files.epoch_copies()  # newest first
        for old in copies[int(self.save_total_limit):]:
            old.unlink(missing_ok=True)

    def _weights_state(self, kind, epoch):
        """The model's weights and state (model_state) with what identifies the checkpoint."""
        try:
            other = model_state.save(self.model, self.extra_state_names)
        except TypeError as exc:
            raise CheckpointError(f"{self.config['model']} keeps state recrunner cannot save safely: {exc}") from None
        return {**checkpoint.header(kind, epoch, self.config), "state_dict": self.model.state_dict(),
                "other_parameter": other}

    def _restore_weights(self, state):
        """The inverse of `_weights_state`, for resume and for test scoring."""
        self.model.load_state_dict(state["state_dict"])  # copied into the parameters, on their device
        model_state.restore(self.model, state.get("other_parameter"), device=self.device)

    def resume_checkpoint(self, resume_file):
        """Load a last.pth (or epoch-N.pth) and continue after its epoch, exactly."""
        state = checkpoint.load_training_state(resume_file)
        if state["model"] != self.config["model"]:
            raise CheckpointError(f"{resume_file} was written by {state['model']}, not {self.config['model']}")
        state = self._this_process(state, resume_file)
        self._restore_fast(state.get("fast"), resume_file)
        self._restore_weights(state)
        self.optimizer.load_state_dict(state["optimizer"])  # moved to its parameters' device
        self.state = TrainingState.from_checkpoint(state)
        self.start_epoch = self.epochs if self.finished else state["epoch"] + 1
        self.callbacks.load_state_dict(state["callbacks"])
        self._pending_rng = state["rng"]
        where = resumed_at(state["epoch"], self.start_epoch, self.state)
        self._resume_within_epoch(state)
        self.logger.info(f"Resumed from {resume_file}: {where} (best epoch {self.best_epoch}, "
                         f"best score {self.best_valid_score})")
        return state

    @property
    def _writes(self) -> bool:
        """Whether this process writes the run's files: always, but in a data-parallel run's rank 0."""
        return self.world is None or self.world.writes

    def _this_process(self, state, resume_file):
        """A data-parallel checkpoint as this process saved it (its RNG states, its loss so far); the
        same number of processes only."""
        saved = len(state.get("processes") or ()) or 1
        size = self.world.size if self.world is not None else 1
        if saved != size:
            raise CheckpointError(f"{resume_file} was trained in {saved} process(es), this run has {size}; "
                                  f"run it with --nproc {saved}, or pass --restart")
        if self.world is not None:
            mine = state["processes"][self.world.rank]
            state["rng"], state["epoch_loss"] = mine["rng"], mine["epoch_loss"]
            if mine["epoch_rng"] is not None:
                state["epoch_rng"] = mine["epoch_rng"]
        return state

    def _restore_pending_rng(self):
        """At the start of a resumed fit: the RNG state last.pth saved."""
        if self._pending_rng is not None:
            rng.restore(self._pending_rng, self._generators)
            self._pending_rng = None

    def _restore_fast(self, saved: dict | None, resume_file):
        """A fast run resumes only in the same fast plan, with its gradient scaler as it was."""
        then = same_plan_key((saved or {}).get("plan"))
        now = same_plan_key(self.fast.as_dict() if self.fast is not None else None)
        if then != now:
            raise CheckpointError(f"{resume_file} was trained {plan_text(then)}, this run would train {plan_text(now)}; "
                                  "set fast, fast_precision and fast_compile as the run had them, or pass --restart")
        if self.grad_scaler is not None and (saved or {}).get("scaler"):
            self.grad_scaler.load_state_dict(saved["scaler"])

    def load_best_weights(self, path=None):
        path = Path(path or self.best_path)
        state = checkpoint.load(path)
        self._restore_weights(state)
        self.logger.info(f"Loading model parameters from {path} (epoch {state['epoch']})")
        return state


def _plain_score(score):
    return float(score) if score is not None else None


def resumed_at(done_epoch: int, start_epoch: int, state) -> str:
    """Where a resume continues, for its log line (pure)."""
    if state.batch_in_epoch:
        return (f"continuing within epoch {start_epoch} at batch {state.batch_in_epoch} "
                f"(step {state.global_step})")
    return f"epoch {done_epoch} done, continuing at epoch {start_epoch}"
