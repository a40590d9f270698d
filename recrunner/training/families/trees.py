"""XGBoost and LightGBM (RecBole's DecisionTreeTrainer family) under recrunner's loop.

RecBole's `DecisionTreeTrainer` is not a torch Trainer: each "epoch" fits the booster on the
whole training set at once (`_train_at_once`; XGBoost continues from the previous epoch's trees,
LightGBM fits anew), and its checkpoints are booster files beside a pickled Config. LightGBM's
epochs are therefore one booster fitted again and again, its validation score tied each time, so
early stopping never ends it (RecBole fits it 300 times at its defaults): it trains one epoch, as
RecBole's TraditionalTrainer trains a model fitted in one pass (config/one_pass.py). TreeTrainer
keeps RecBole's tree code (data conversion, training, evaluation: the library trainer's own
methods) and runs it inside `CustomTrainer.fit`, so trees get what every model gets: validation
at epoch -1 (where the untrained booster can predict), TensorBoard, best.pth and last.pth as
plain data (the booster's own serialisation as bytes), exact resume, callbacks and test scoring
with the best booster. There is no loss: Train/Loss is not written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys

import numpy as np
import torch

from ..checkpoints.state import TrainingState
from ..loop.trainer import CustomTrainer


@contextlib.contextmanager
def library_lines_logged(logger: logging.Logger):
    """The boosters' own progress lines as log records, so they go to run.log and to the console only
    where the run has one (not under --quiet): XGBoost's evaluation lines (`xgb_verbose_eval`), which it
    prints, and LightGBM's, which it writes from C++ unless given a logger."""
    lightgbm = sys.modules.get("lightgbm")
    if lightgbm is not None:
        lightgbm.register_logger(logger)  # the process's: every booster of it logs there
    lines = _LinesLogged(logger)
    try:
        with contextlib.redirect_stdout(lines):
            yield
    finally:
        lines.write("\n")  # a last line without its end


class _LinesLogged(io.TextIOBase):
    """A text stream whose every whole line is an INFO record of `logger`."""

    def __init__(self, logger: logging.Logger):
        self.logger, self.pending = logger, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if line.strip():
                self.logger.info(line.rstrip())
        return len(text)


class _BoosterRate:
    """What the loop and callbacks read of an optimizer: the booster's learning rate, no state."""

    def __init__(self, rate):
        self.param_groups = [{"lr": rate}]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state) -> None:
        pass


class TreeTrainer(CustomTrainer):
    """Layered over RecBole's XGBoostTrainer or LightGBMTrainer (`for_library`)."""

    library_trainer: type  # set by for_library
    reports_loss = False

    def __init__(self, config, model, *, writer=None, callbacks=(), hparams=None, run_dir=None):
        from pathlib import Path

        from ...config.params import setting
        from ...seams.tensorboard import SilentWandb, recbole_loggers

        self.state = TrainingState()  # first: RecBole's __init__ assigns some of its fields
        with recbole_loggers(writer):
            self.library_trainer.__init__(self, config, model)  # RecBole's: conversion settings, evaluator
        self._init_loop_state(config, callbacks, hparams, run_dir)
        checkpoints = Path(config["checkpoint_dir"])
        checkpoints.mkdir(parents=True, exist_ok=True)
        # RecBole names these after the local time; the booster between epochs, never read back by recrunner.
        # Its extension is the library's format (XGBoost warns twice an epoch about any other, and guesses)
        suffix = ".ubj" if config["model"] == "XGBoost" else ".txt"
        self.temp_file = self.temp_best_file = str(checkpoints / f"booster{suffix}")
        self.start_epoch, self.clip_grad_norm = 0, None
        if self.single_pass:  # LightGBM: every epoch would fit the same booster anew
            self.epochs = 1
        self.device = torch.device("cpu")
        self.wandblogger = SilentWandb()
        params = config["xgb_params"] or config["lgb_params"] or {}
        self.optimizer = _BoosterRate(params.get("eta", params.get("learning_rate")))
        self._valid_data = None
        if setting(config, "fast"):
            self.logger.info(f"fast mode: exact ({config['model']} is a gradient-boosted tree, not a torch "
                             "model: it runs exactly)")

    @classmethod
    def for_library(cls, library_trainer: type, single_pass: bool = False) -> type:
        """`single_pass`: the library fits its booster anew each epoch (config/one_pass.py): one epoch."""
        return type(f"Custom{library_trainer.__name__}", (cls, library_trainer),
                    {"library_trainer": library_trainer, "single_pass": single_pass})

    # ------------------------------------------------------------------ the loop's steps, for a booster
    def fit(self, train_data, valid_data=None, verbose=True, saved=True, show_progress=False, callback_fn=None):
        self._valid_data = valid_data  # XGBoost watches the validation set while it trains
        return super().fit(train_data, valid_data, verbose, saved, show_progress, callback_fn)

    def _train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        # XGBoostTrainer passes `self.callbacks` (its own, None) to xgb.train: ours are not xgboost's
        handler, self.callbacks = self.callbacks, None
        try:
            with library_lines_logged(self.logger):
                self._train_at_once(train_data, self._valid_data)
        finally:
            self.callbacks = handler
        return 0.0

    def _valid_epoch(self, valid_data, show_progress=False):
        from recbole.utils import calculate_valid_score

        result = self.library_trainer.evaluate(self, valid_data, load_best_model=False)
        return calculate_valid_score(result, self.valid_metric), result

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if load_best_model and eval_data:
            self.load_best_weights(model_file)
        return self.library_trainer.evaluate(self, eval_data, load_best_model=False)

    # ------------------------------------------------------------------ the booster as checkpoint state
    def _weights_state(self, kind, epoch):
        from ..checkpoints import files as checkpoint

        booster = torch.from_numpy(np.frombuffer(self._booster_bytes(), dtype=np.uint8).copy())
        return {**checkpoint.header(kind, epoch, self.config), "booster": booster}

    def _restore_weights(self, state):
        self.model = self._booster_from(bytes(state["booster"].numpy().tobytes()))
        self.boost_model = self.model  # XGBoost continues from these trees

    def _booster_bytes(self) -> bytes:
        if self.config["model"] == "XGBoost":
            return bytes(self.model.save_raw(raw_format="ubj"))
        return self.model.model_to_string().encode()

    def _booster_from(self, raw: bytes):
        if self.config["model"] == "XGBoost":
            return self.xgb.Booster(model_file=bytearray(raw))
        return self.lgb.Booster(model_str=raw.decode())
