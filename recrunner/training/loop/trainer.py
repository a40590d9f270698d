"""CustomTrainer: RecBole's Trainer with the loop of docs/design.md.

What it adds to `recbole.trainer.Trainer.fit`, without changing a number RecBole reports:
an initial validation at epoch -1 (which leaves every RNG as it found it), every metric in
TensorBoard, `best.pth` and `last.pth` as different artifacts, full-state resume, callback
events, and the hparams row in the run's own event file.

Behaviour beyond the loop itself lives in callbacks (recrunner.training.callbacks): early stopping, the
non-finite guard, the progress bar, the LR schedule, the history file, trackers. The trainer
tracks the best epoch (by `valid_metric`, as RecBole) and carries out what callbacks request.
"""

from __future__ import annotations

import math
from pathlib import Path
from time import time

import torch
from recbole.trainer import Trainer
from recbole.utils import dict2str, set_color

from ...core.layout import CheckpointPaths
from . import device
from ..checkpoints import rng
from ..fast.apply import go_fast
from .optimizer import OptimizerStep, accumulation_steps
from ..callbacks import CallbackHandler, TrainerControl, default_callbacks, with_defaults
from ..callbacks.early_stopping import Best, track
from ..callbacks.base import total_loss
from ..callbacks.loop import LoopView
from ...core.errors import TrainingFailed, one_line
from ..checkpoints.checkpointer import Checkpointing
from ..distributed.processes import DataParallel
from .evaluation import CollectInParts, score_in_parts
from .output import TrainerOutput
from ..checkpoints.state import TrainingState, state_attribute
from .steps import StepLoop
from ...seams.environment import prepare_environment
from ...seams.evaluator import capture_per_user
from ...seams.tensorboard import recbole_loggers
from ..logging.tensorboard import RunWriter, default_hparams

# A script of one's own (docs/training-loop.md) builds RecBole's Config after importing
# CustomTrainer: under numpy 2 it needs the names prepare_environment gives back by then.
prepare_environment()


class _NonFiniteLoss(Exception):
    """Ends an epoch at its first non-finite batch loss (caught in _train_and_log)."""


class CustomTrainer(DataParallel, StepLoop, Checkpointing, TrainerOutput, Trainer):
    """`fit(train_data, valid_data=None, verbose=True, saved=True, show_progress=False,
    callback_fn=None) -> (best_valid_score, best_valid_result)`, as RecBole's.

    Extra keyword arguments: `writer` (a RunWriter; default: one in `checkpoint_dir`),
    `callbacks` (added to the built-in ones the config asks for, replacing a built-in of the
    same class; see recrunner.training.callbacks), `hparams` (the run's identifying parameters) and
    `run_dir` (where the built-in history callback writes history.jsonl; None: none).
    """

    extra_state_names: tuple[str, ...] = ()  # model attributes that are state although RecBole never saves them
    reports_loss = True  # False: a trainer whose epochs have no loss (a booster; recrunner.training.families.trees)
    reports_hparams = True  # False: a fit that is a stage of its run, not a row of its own (recrunner.training.families.layers)
    single_pass = False  # True: the model is fitted in one pass by design (TraditionalTrainer: Pop, EASE...)

    # the training state (recrunner.training.checkpoints.state): RecBole's attribute names and recrunner's, one dataclass
    epoch = state_attribute("epoch")
    finished = state_attribute("finished")
    best_epoch = state_attribute("best_epoch")
    best_valid_score = state_attribute("best_valid_score")
    best_valid_result = state_attribute("best_valid_result")
    initial_valid_result = state_attribute("initial_valid_result")
    cur_step = state_attribute("cur_step")
    train_loss_dict = state_attribute("train_loss_dict")
    stopped_early = state_attribute("stopped_early")
    train_seconds = state_attribute("train_seconds")
    seconds_to_best = state_attribute("seconds_to_best")

    def __init__(self, config, model, *, writer=None, callbacks=(), hparams=None, run_dir=None):
        self.state = TrainingState()  # first: RecBole's __init__ assigns some of its fields
        checkpoint_dir = Path(config["checkpoint_dir"])
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        writer = writer or RunWriter(checkpoint_dir)
        with recbole_loggers(writer):
            super().__init__(config, model)
        self._init_loop_state(config, callbacks, hparams, run_dir)
        self.eval_collector.eval_batch_collect = CollectInParts(self.eval_collector.eval_batch_collect, self.device)
        self.fast = go_fast(self)  # fast mode (recrunner.training.fast); None: exact, as RecBole
        self._init_world()  # one of a data-parallel run's processes (recrunner.training.distributed.processes)
        self.optimizer = OptimizerStep.build(  # the run's one optimizer step (recrunner.training.loop.optimizer)
            self.optimizer, accumulation=self.accumulation_steps, clip=self.clip_grad_norm, scaler=self.grad_scaler,
            average=self.world.average_gradients if self.world is not None else None)
        if isinstance(self.optimizer, OptimizerStep):
            self.clip_grad_norm = None  # the step clips the mean gradient once, not RecBole's loop each batch

    def _init_loop_state(self, config, callbacks, hparams, run_dir=None):
        """What recrunner's loop keeps beside RecBole's trainer attributes (also trees.TreeTrainer)."""
        self.checkpoint_files = CheckpointPaths(Path(config["checkpoint_dir"]))
        self.best_path, self.last_path = self.checkpoint_files.best, self.checkpoint_files.last
        self.saved_model_file = str(self.best_path)
        self.callbacks = CallbackHandler(with_defaults(default_callbacks(config, run_dir), callbacks))
        self.control = TrainerControl()
        self.loop_view = LoopView(self)  # what callbacks see of this trainer
        self.accumulation_steps = accumulation_steps(config)
        self.steps_per_epoch = None  # optimizer steps per epoch, known once fit sees the data
        self.batches_per_epoch = None
        self.non_finite_batch = None  # batch index where this epoch's loss stopped being finite
        self.test_per_user: dict = {}
        self.hparams = dict(hparams) if hparams is not None else default_hparams(config)
        self.save_total_limit = config["save_total_limit"]
        self.checkpoint_every = max(1, config["checkpoint_every"] or 1)
        self._pending_rng = None
        self._generators = {}
        self._batches_seen = 0
        self.fast, self.grad_scaler = None, None  # fast mode's plan and fp16 gradient scaler (go_fast)
        self.world = None  # a data-parallel run's process group (_init_world; training.distributed)
        self._init_steps(config)  # step schedules and mid-epoch resume (recrunner.training.loop.steps)

    # ------------------------------------------------------------------ the loop
    def fit(self, train_data, valid_data=None, verbose=True, saved=True, show_progress=False, callback_fn=None):
        started = time()
        self._fit_args = (valid_data, verbose, saved, show_progress, callback_fn)
        self._check_step_support()
        self._generators = _generators_of(train=train_data, valid=valid_data)
        self.batches_per_epoch = len(train_data)
        self.steps_per_epoch = math.ceil(self.batches_per_epoch / self.accumulation_steps)
        if saved and self.start_epoch >= self.epochs and not self.best_path.exists():
            self._save_best_checkpoint(-1, verbose)
        self.eval_collector.data_collect(train_data)
        if self.config["train_neg_sample_args"].get("dynamic", False):
            train_data.get_model(self.model)
        if verbose:
            self._log_start(validating=self.is_validating(valid_data))
        try:
            self._call("on_fit_start")
            device.check_deterministic_kernels(self, train_data, valid_data)  # deterministic: true only
            if self.is_validating(valid_data) and self.start_epoch == 0 and not self.start_batch:
                self._initial_validation(valid_data, verbose, show_progress)
            self._restore_pending_rng()
            for epoch_idx in range(self.start_epoch, self.epochs):
                if self._run_epoch(epoch_idx, train_data, valid_data, verbose, saved, show_progress, callback_fn):
                    self._log_stop(verbose)
                    break
        except BaseException as exc:
            self._call("on_exception", exception=exc)
            raise
        self._call("on_fit_end")
        if verbose:
            self._log_end(time() - started, validating=self.is_validating(valid_data))
        return self.best_valid_score, self.best_valid_result

    def _run_epoch(self, epoch_idx, train_data, valid_data, verbose, saved, show_progress, callback_fn) -> bool:
        """Train one epoch, validate when due, save; True when training should stop."""
        self._clock = time()
        self.epoch = epoch_idx
        self.epoch_start(epoch_idx)
        self._call("on_epoch_start")
        self._train_and_log(train_data, epoch_idx, verbose, show_progress)
        if not self.is_validating(valid_data):
            if saved:  # no validation: RecBole tests the newest weights
                self._save_best_checkpoint(epoch_idx, verbose)
        elif not self.steps.eval_every and (epoch_idx + 1) % self.eval_step == 0:
            self._validate_and_track(valid_data, epoch_idx, verbose, saved, show_progress, callback_fn)
        self._call("on_epoch_end")
        stop = self.control.should_stop
        self.finished = stop or epoch_idx + 1 >= self.epochs
        self.stopped_early = stop
        self._accrue_time()
        if self.best_epoch == epoch_idx and not self.steps.eval_every:  # step validations set it themselves
            self.seconds_to_best = self.train_seconds
        if saved and (self.finished or self.control.should_save or (epoch_idx + 1) % self.checkpoint_every == 0):
            self.save_training_state(epoch_idx)
        self.control.should_save = False
        return stop

    # ------------------------------------------------------------------ hooks for trainer families
    def epoch_start(self, epoch_idx):
        """Before an epoch's training (NCL runs its E-step here; recrunner.training.families.layers)."""

    def is_validating(self, valid_data) -> bool:
        """Whether this fit validates at all (a pre-training stage does not; recrunner.training.families.layers)."""
        return bool(valid_data) and self.eval_step > 0

    # ------------------------------------------------------------------ steps
    def _initial_validation(self, valid_data, verbose, show_progress):
        """Epoch -1: the untrained model's metrics, a baseline for every curve."""
        start = time()
        try:
            with rng.preserved(self._generators):
                score, result = self._valid_epoch(valid_data, show_progress=show_progress)
        except Exception as exc:  # e.g. Pop cannot score anything before it has counted items
            self.logger.warning(f"no epoch -1 validation: {self.config['model']} cannot predict before training "
                                f"({one_line(exc)[:200]})")
            return
        device.release(self.device)  # RecBole's torch.cuda.empty_cache() after a validation
        self.train_seconds += time() - start  # the run's training time includes its epoch -1
        self.initial_valid_result = dict(result)
        if verbose:
            self._log_validation(-1, time() - start, score, result)
        self._call("on_initial_validation_end", metrics=self.initial_valid_result, score=score)

    def _train_and_log(self, train_data, epoch_idx, verbose, show_progress):
        start = time()
        train_loss = self._train_epoch_to_first_non_finite(train_data, epoch_idx, show_progress)
        self.train_loss_dict[epoch_idx] = total_loss(train_loss)
        if verbose:
            self.logger.info(self._generate_train_loss_output(epoch_idx, start, time(), train_loss))
        self._call("on_train_epoch_end", losses=train_loss)

    def _train_epoch_to_first_non_finite(self, train_data, epoch_idx, show_progress):
        """RecBole's (or the model trainer's) epoch; a non-finite batch loss ends it with loss NaN."""
        batches = self._step_batches(train_data, epoch_idx)  # the loader, with step boundaries (steps.py)
        self._batches_seen, self.non_finite_batch = self._epoch_start_batch, None
        try:
            with device.out_of_memory_in_training(self):  # one line, exit 2 (recrunner.training.loop.device)
                loss = self._train_epoch(batches, epoch_idx, show_progress=show_progress)
        except _NonFiniteLoss as exc:
            self.non_finite_batch = self._batches_seen - 1
            self.logger.warning(f"epoch {epoch_idx} stopped at batch {self.non_finite_batch}: the loss is {exc}")
            loss = float("nan")
        finally:
            self._close_batches()
        if isinstance(self.optimizer, OptimizerStep):
            self.optimizer.flush()
        return self._end_epoch_steps(epoch_idx, loss)

    def _check_nan(self, loss):
        """Called by RecBole's epoch for every batch, before backward (RecBole raises ValueError on NaN)."""
        self._batches_seen += 1
        if self._non_finite(loss):  # on any process of a data-parallel run
            raise _NonFiniteLoss(str(float(loss.detach().float().sum())))
        self._count_loss(loss)
        self._call("on_train_batch", batch=self._batches_seen - 1)

    def _validate_and_track(self, valid_data, epoch_idx, verbose, saved, show_progress, callback_fn):
        """Validate; a new best (by valid_metric, ties included, as RecBole) saves best.pth.

        Whether to stop is the EarlyStopping callback's request (RecBole's stopping_step rule
        by default), carried out in _run_epoch.
        """
        start = time()
        valid_score, valid_result = self._valid_epoch(valid_data, show_progress=show_progress)
        device.release(self.device)
        before = Best(None if self.best_epoch is None else self.best_valid_score, self.best_epoch, self.cur_step)
        after = track(before, valid_score, epoch_idx, bigger=self.valid_metric_bigger)
        is_best = after.since == 0
        self.cur_step = after.since  # RecBole's counter, kept for its readers
        self.state.validated_step = self.state.global_step
        if verbose:
            self._log_validation(epoch_idx, time() - start, valid_score, valid_result)
        if is_best:
            self.best_valid_score, self.best_epoch, self.best_valid_result = valid_score, epoch_idx, valid_result
            self.state.best_step = self.state.global_step
            if saved:
                self._save_best_checkpoint(epoch_idx, verbose)
        self._call("on_validation_end", metrics=valid_result, score=valid_score)
        if callback_fn:
            callback_fn(epoch_idx, valid_score)

    def test(self, test_data, show_progress=False) -> dict:
        """Score `test_data` with the best weights; Test/* scalars at the best epoch, on_test_end.

        The per-user values of the top-k metrics are kept in `self.test_per_user` (recrunner.run.per_user).
        """
        self.test_per_user = {}
        with capture_per_user(self, test_data, self.test_per_user):
            result = dict(self.evaluate(test_data, load_best_model=True, show_progress=show_progress))
        self.logger.info(set_color("test result", "yellow") + ": \n" + dict2str(result))
        self._call("on_test_end", metrics=result)
        return result

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if load_best_model and eval_data:
            self.load_best_weights(model_file)
        return super().evaluate(eval_data, load_best_model=False, show_progress=show_progress)

    def _full_sort_batch_eval(self, batched_data):  # out of memory: scored in parts (recrunner.training.loop.evaluation)
        return score_in_parts(super()._full_sort_batch_eval, batched_data, self.eval_collector.eval_batch_collect,
                              self.device)

    def _neg_sample_batch_eval(self, batched_data):
        return score_in_parts(super()._neg_sample_batch_eval, batched_data, self.eval_collector.eval_batch_collect,
                              self.device)

    # ------------------------------------------------------------------ small helpers
    def _call(self, event, **kwargs):
        """Run an event's callbacks, then carry out a failure request at once."""
        self.callbacks.call(event, self.loop_view, self.control, **kwargs)
        self._agree(event)  # a data-parallel run's processes take rank 0's requests
        if self.control.failure and event != "on_exception":
            failure, self.control.failure = self.control.failure, None
            raise TrainingFailed(failure)



def _generators_of(**loaders) -> dict:
    return {name: loader.generator for name, loader in loaders.items()
            if loader is not None and isinstance(getattr(loader, "generator", None), torch.Generator)}
