"""CustomTrainer: RecBole's Trainer with the loop of docs/design.md.

What it adds to `recbole.trainer.Trainer.fit`, without changing a number RecBole reports:
an initial validation at epoch -1 (which leaves every RNG as it found it), every metric in
TensorBoard, `best.pth` and `last.pth` as different artifacts, full-state resume, callback
events, and the hparams row in the run's own event file.

`fit` is the flowchart; what it keeps lives in components the trainer owns: `state` (the
TrainingState last.pth saves whole), `steps` (step schedules and the epoch's progress:
loop/steps.py), `checkpoints` (checkpoints/checkpointer.py), `optimizer` (the one optimizer step:
loop/optimizer.py), `world` (a data-parallel run's processes: distributed/), `fast` (fast mode's
plan), `graph_loss` (the loss replayed from CUDA graphs: loop/graphs.py), `whole_step` (the loss, its
backward and the optimizer's step replayed at once: loop/whole_step.py). Behaviour beyond the
loop lives in callbacks (recrunner.training.callbacks): early stopping, the non-finite guard, the
progress bar, the LR schedule, the history file, trackers. The trainer tracks the best epoch (by
`valid_metric`, as RecBole) and carries out what callbacks request.
"""

from __future__ import annotations

import math
from pathlib import Path
from time import time

import torch
from recbole.trainer import Trainer
from recbole.utils import dict2str, set_color

from ...config.params import setting
from ...core.errors import TrainingFailed
from ...core.layout import CheckpointPaths
from ...seams.environment import prepare_environment
from ...seams.collector import collect_once
from ...seams.evaluator import capture_per_user
from ...seams.loaders import inner_loaders
from ...seams.tensorboard import recbole_loggers
from ..callbacks import CallbackHandler, LoopView, TrainerControl, default_callbacks, with_defaults
from ..callbacks.base import total_loss
from ..checkpoints.checkpointer import Checkpointer, restore_weights, weights_state
from ..checkpoints.state import TrainingState, with_state_attributes
from ..distributed import processes
from ..fast.apply import go_fast
from ..logging.tensorboard import RunWriter, default_hparams
from . import device, output, validation
from .eval_graphs import eval_graphs, grouped
from .graphs import graphed_loss
from .whole_step import whole_step
from .context import FitCall
from .epoch import train_epoch
from .evaluation import split_when_out_of_memory
from .losses import NonFiniteLoss, PendingLosses, read_every
from .optimizer import OptimizerStep, accumulation_steps
from .steps import StepBoundaries, StepSchedule

# A script of one's own (docs/training-loop.md) builds RecBole's Config after importing
# CustomTrainer: under numpy 2 it needs the names prepare_environment gives back by then.
prepare_environment()


@with_state_attributes  # every TrainingState field is a trainer attribute too (epoch, best_valid_score, ...)
class CustomTrainer(Trainer):
    """`fit(train_data, valid_data=None, verbose=True, saved=True, show_progress=False,
    callback_fn=None) -> (best_valid_score, best_valid_result)`, as RecBole's. Keyword arguments:
    `writer` (a RunWriter; default: one in `checkpoint_dir`), `callbacks` (added to the built-in ones,
    replacing one of the same class), `hparams` (the run's HParams row) and `run_dir` (history.jsonl's folder).
    """

    extra_state_names: tuple[str, ...] = ()  # model attributes that are state although RecBole never saves them
    reports_loss = True  # False: a trainer whose epochs have no loss (a booster; families/trees.py)
    reports_hparams = True  # False: a fit that is a stage of its run, not a row of its own (families/layers.py)
    single_pass = False  # True: the model is fitted in one pass by design (TraditionalTrainer: Pop, EASE...)

    def __init__(self, config, model, *, writer=None, callbacks=(), hparams=None, run_dir=None):
        self.state = TrainingState()  # first: RecBole's __init__ assigns some of its fields
        Path(config["checkpoint_dir"]).mkdir(parents=True, exist_ok=True)
        with recbole_loggers(writer or RunWriter(Path(config["checkpoint_dir"]))):
            super().__init__(config, model)
        self._init_loop_state(config, callbacks, hparams, run_dir)
        collect_once(self.eval_collector)  # top-k hits built per group of batches, concatenated once (seams/collector.py)
        split_when_out_of_memory(self)  # an evaluation batch that does not fit is scored in parts (loop/evaluation.py)
        self.fast = go_fast(self)  # fast mode (recrunner.training.fast); None: exact, as RecBole
        self.world = processes.join(self.model)  # one of a data-parallel run's processes, else None
        self.steps.losses = PendingLosses(read_every(  # batch losses read from the device in groups (loop/losses.py)
            setting(config, "read_loss_every"), self.device.type, processes=self.world is not None))
        self.optimizer = OptimizerStep.build(  # the run's one optimizer step (recrunner.training.loop.optimizer)
            self.optimizer, accumulation=self.accumulation_steps, clip=self.clip_grad_norm, scaler=self.grad_scaler,
            average=self.world.average_gradients if self.world is not None else None)
        if isinstance(self.optimizer, OptimizerStep):
            self.clip_grad_norm = None  # the step clips the mean gradient once, not RecBole's loop each batch
        self.whole_step = whole_step(self)  # cuda_graph_optimizer: forward, backward and step in one replay (loop/whole_step.py)
        self.graph_loss = None if self.whole_step else graphed_loss(self)  # cuda_graph_step: the loss replayed (loop/graphs.py)
        self.eval_graphs = eval_graphs(self)  # cuda_graph_eval: a validation's batches scored in groups (loop/eval_graphs.py)

    def _init_loop_state(self, config, callbacks, hparams, run_dir=None):
        """What recrunner's loop keeps beside RecBole's trainer attributes (also families/trees.py)."""
        self.checkpoints = Checkpointer(self, CheckpointPaths(Path(config["checkpoint_dir"])), config["save_total_limit"])
        self.saved_model_file = str(self.checkpoints.best)  # RecBole's name for what testing loads
        self.callbacks = CallbackHandler(with_defaults(default_callbacks(config, run_dir), callbacks))
        self.control, self.loop_view = TrainerControl(), LoopView(self)  # callbacks request; they see the loop view
        self.accumulation_steps = accumulation_steps(config)
        self.steps = StepBoundaries(self, StepSchedule.from_config(config))
        self.checkpoint_every = max(1, config["checkpoint_every"] or 1)
        self.hparams = dict(hparams) if hparams is not None else default_hparams(config)
        self.batches_per_epoch = self.steps_per_epoch = None  # known once fit sees the data
        self.call, self.test_per_user, self._generators = FitCall(), {}, {}
        self.fast, self.grad_scaler, self.world = None, None, None  # go_fast and processes.join set them
        self.graph_loss = self.whole_step = self.eval_graphs = None  # replayed from CUDA graphs, or None: eager

    # ------------------------------------------------------------------ the loop
    def fit(self, train_data, valid_data=None, verbose=True, saved=True, show_progress=False, callback_fn=None):
        started, call = time(), FitCall(valid_data, verbose, saved, show_progress, callback_fn)
        self.call, validating = call, self.is_validating(valid_data)
        self.steps.check_support()
        self._generators = _generators_of(train=train_data, valid=valid_data)
        self.batches_per_epoch = len(train_data)
        self.steps_per_epoch = math.ceil(self.batches_per_epoch / self.accumulation_steps)
        if saved and self.start_epoch >= self.epochs and not self.checkpoints.best.exists():
            self.checkpoints.save_best(-1, verbose)
        self.eval_collector.data_collect(train_data)
        if self.config["train_neg_sample_args"].get("dynamic", False):
            train_data.get_model(self.model)
        if verbose:
            output.log_start(self, validating)
        try:
            self._call("on_fit_start")
            device.check_deterministic_kernels(self, train_data, valid_data)  # deterministic: true only
            if validating and self.start_epoch == 0 and not self.steps.start_batch:
                self._initial_validation(valid_data, verbose, show_progress)
            self.checkpoints.restore_pending_rng()
            for epoch_idx in range(self.start_epoch, self.epochs):
                if self._run_epoch(epoch_idx, train_data, call):
                    if verbose:
                        output.log_stop(self)
                    break
        except BaseException as exc:
            self._call("on_exception", exception=exc)
            raise
        self._call("on_fit_end")
        if verbose:
            output.log_end(self, time() - started, validating)
        return self.best_valid_score, self.best_valid_result

    def _run_epoch(self, epoch_idx, train_data, call: FitCall) -> bool:
        """Train one epoch, validate when due, save; True when training should stop."""
        self.steps.clock, self.epoch = time(), epoch_idx
        self.epoch_start(epoch_idx)
        self._call("on_epoch_start")
        start = time()
        train_loss = self._train_epoch_to_first_non_finite(train_data, epoch_idx, call.show_progress)
        self.train_loss_dict[epoch_idx] = total_loss(train_loss)
        if call.verbose:
            self.logger.info(self._generate_train_loss_output(epoch_idx, start, time(), train_loss))
        self._call("on_train_epoch_end", losses=train_loss)
        if not self.is_validating(call.valid_data):
            if call.saved:  # no validation: RecBole tests the newest weights
                self.checkpoints.save_best(epoch_idx, call.verbose)
        elif not self.steps.eval_every and (epoch_idx + 1) % self.eval_step == 0:
            self._validate_and_track(epoch_idx, call)
        self._call("on_epoch_end")
        stop = self.control.should_stop
        self.finished, self.stopped_early = stop or epoch_idx + 1 >= self.epochs, stop
        self.steps.accrue_time()
        if self.best_epoch == epoch_idx and not self.steps.eval_every:  # step validations set it themselves
            self.seconds_to_best = self.train_seconds
        if call.saved and (self.finished or self.control.should_save or (epoch_idx + 1) % self.checkpoint_every == 0):
            self.save_training_state(epoch_idx)
        self.control.should_save = False
        return stop

    def _initial_validation(self, valid_data, verbose, show_progress):
        """Epoch -1: the untrained model's metrics, a baseline for every curve (loop/validation.py)."""
        validation.initial(self, valid_data, verbose, show_progress)

    def _train_epoch_to_first_non_finite(self, train_data, epoch_idx, show_progress):
        """RecBole's (or the model trainer's) epoch; a non-finite batch loss ends it with loss NaN."""
        batches = self.steps.batches(train_data, epoch_idx)  # the loader, with step boundaries (loop/steps.py)
        try:
            with device.out_of_memory_in_training(self):  # one line, exit 2 (recrunner.training.loop.device)
                loss = self._train_epoch(batches, epoch_idx, show_progress=show_progress)
        except NonFiniteLoss as exc:
            self.steps.epoch.non_finite_batch = exc.batch
            self.logger.warning(output.non_finite_line(epoch_idx, exc, self.steps.losses.every))
            loss = float("nan")
        finally:
            self.steps.close()
        if isinstance(self.optimizer, OptimizerStep):
            self.optimizer.flush()  # a last short group of accumulated batches steps too
        return processes.mean_loss(self.steps.end_epoch(loss), self.world)

    def _train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        """RecBole's epoch, batch for batch, each loss read from the device when due (loop/epoch.py)."""
        return train_epoch(self, train_data, epoch_idx, loss_func=loss_func, show_progress=show_progress)

    _train_epoch.recbole_epoch = True  # RecBole's loop (steps.own_epoch_loop); a model trainer's own replaces it

    def _check_nan(self, loss):
        """Called by RecBole's epoch (a model trainer's: KG, RecVAE...) for every batch, before
        backward, having read the loss itself: read here at once (RecBole raises ValueError on NaN)."""
        self.steps.batch_loss(loss, read_now=True)

    def _validate_and_track(self, epoch_idx, call: FitCall):
        """Validate; a new best saves best.pth (loop/validation.py); early stopping is a callback's request."""
        validation.validate_and_track(self, epoch_idx, call)

    def test(self, test_data, show_progress=False) -> dict:
        """Score `test_data` with the best weights; its per-user values in `self.test_per_user` (run/per_user.py)."""
        self.test_per_user = {}
        with capture_per_user(self, test_data, self.test_per_user):
            result = dict(self.evaluate(test_data, load_best_model=True, show_progress=show_progress))
        self.logger.info(set_color("test result", "yellow") + ": \n" + dict2str(result))
        self._call("on_test_end", metrics=result)
        return result

    # ------------------------------------------------------------------ hooks for trainer families
    def epoch_start(self, epoch_idx):
        """Before an epoch's training (NCL runs its E-step here; families/layers.py)."""

    def is_validating(self, valid_data) -> bool:
        """Whether this fit validates at all (a pre-training stage does not; families/layers.py)."""
        return bool(valid_data) and self.eval_step > 0

    def save_training_state(self, epoch, epoch_rng=None):  # last.pth (a pre-training stage adds its copies)
        self.checkpoints.save_last(epoch, epoch_rng)

    def _weights_state(self, kind, epoch):  # what holds the weights in a checkpoint (a booster's: families/trees.py)
        return weights_state(self, kind, epoch)

    def _restore_weights(self, state):
        restore_weights(self, state)

    # ------------------------------------------------------------------ RecBole's names
    def _save_checkpoint(self, epoch, verbose=True, **kwargs):  # what testing loads: best.pth
        self.checkpoints.save_best(epoch, verbose)

    def resume_checkpoint(self, resume_file):
        return self.checkpoints.resume(resume_file)

    def load_best_weights(self, path=None):
        return self.checkpoints.load_best(path)

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if load_best_model and eval_data:
            self.load_best_weights(model_file)
        with processes.evaluation(self, eval_data), grouped(self.eval_graphs, eval_data):  # (loop/eval_graphs.py)
            return super().evaluate(eval_data, load_best_model=False, show_progress=show_progress)

    def _call(self, event, **kwargs):
        """Run an event's callbacks, then carry out a failure request at once."""
        self.callbacks.call(event, self.loop_view, self.control, **kwargs)
        processes.agree(event, self.control, self.world)  # a data-parallel run's processes take rank 0's requests
        if self.control.failure and event != "on_exception":
            failure, self.control.failure = self.control.failure, None
            raise TrainingFailed(failure)


def _generators_of(**loaders) -> dict:
    """The generators that draw each loader's order, by name (a knowledge-graph loader's two: `train`
    and `train.kg`, seams/loaders.py), which checkpoints save and resume restores (pure)."""
    return {name + suffix: part.generator for name, loader in loaders.items() if loader is not None
            for suffix, part in inner_loaders(loader).items()
            if isinstance(getattr(part, "generator", None), torch.Generator)}
