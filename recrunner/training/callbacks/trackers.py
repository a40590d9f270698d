"""Where a run's scalars go: TensorBoard (always), Weights & Biases and MLflow (optional extras).

    trackers: [mlflow]        # pip install 'recrunner[mlflow]'
    trackers: [wandb]         # pip install 'recrunner[wandb]'; project from wandb_project

Every logger is a `MetricLogger`: one callback turns the loop's events into the scalars of
recrunner.training.logging.tags (Train/Loss and Train/LR per epoch, Valid/ per validation, step -1 for the
untrained model, Best_Valid/ at the end of fit, Test/ after testing), so every destination gets
the same tags at the same steps. A logger implements `start`, `log` and `finish`. The package of
an optional tracker is imported only when it is enabled; a missing package is a one-line error at
start. RecBole's own `log_wandb: true` enables the WandbLogger here (RecBole's logger is silenced
at the Trainer.__init__ seam, seams/tensorboard.py), so W&B is written by one path.
"""

from __future__ import annotations

import importlib
import re

from ...core.errors import ConfigError
from ..logging import tags
from .base import Callback

TRACKERS = ("wandb", "mlflow")


class MetricLogger(Callback):
    """Base class of the loggers: the loop's events as tagged scalars, sent to `log(scalars, step)`."""

    package = ""  # imported at fit start; "" imports nothing
    order = 60

    def __init__(self, run_name: str | None = None):
        self.run_name = run_name
        self.module = None
        self._epoch_lr = None
        self._epoch_valid = None  # with eval_every_steps: the epoch's newest validation, for the epoch axis

    # -- what a logger implements
    def start(self, loop, params: dict): ...
    def log(self, scalars: dict, step: int): ...
    def log_steps(self, scalars: dict, step: int):
        """Scalars on the optimizer-step axis (Valid-step/, Train-step/)."""
        self.log(scalars, step)
    def log_summary(self, scalars: dict, step: int):
        """Best_Valid/ and Test/: steps before the newest epoch's (W&B keeps them apart)."""
        self.log(scalars, step)
    def finish(self, ok: bool): ...

    # -- events
    def on_fit_start(self, loop, control):
        if self.package:
            try:
                self.module = importlib.import_module(self.package)
            except ImportError:
                raise ConfigError(f"trackers: {self.package} is not installed; pip install 'recrunner[{self.package}]' "
                                  f"or remove it from trackers") from None
        self.start(loop, {k: _param(v) for k, v in loop.hparams.items()})

    def on_initial_validation_end(self, loop, control, metrics, score):
        self.log(tags.validation(metrics, score), -1)

    def on_epoch_start(self, loop, control):
        if not (getattr(loop, "start_batch", 0) and self._epoch_lr is not None):  # resumed within it: kept
            self._epoch_lr = loop.optimizer.param_groups[0]["lr"]  # the rate this epoch trains with

    def on_train_epoch_end(self, loop, control, losses):
        reported = losses if getattr(loop, "reports_loss", True) else None  # a booster has no loss
        self.log(tags.train(reported, self._epoch_lr), loop.epoch)

    def on_validation_end(self, loop, control, metrics, score):
        if getattr(loop, "eval_every_steps", None) is None:
            self.log(tags.validation(metrics, score), loop.epoch)
            return
        self.log_steps(tags.validation(metrics, score, prefix="Valid-step"), loop.global_step)
        self._epoch_valid = tags.validation(metrics, score)

    def on_train_log(self, loop, control, loss, lr):
        self.log_steps(tags.train_steps(loss, lr), loop.global_step)

    def on_epoch_end(self, loop, control):
        if self._epoch_valid is not None:
            self.log(self._epoch_valid, loop.epoch)
            self._epoch_valid = None

    def state_dict(self) -> dict:
        """What the epoch in progress has gathered, for a resume within it."""
        return {"epoch_lr": self._epoch_lr, "epoch_valid": self._epoch_valid}

    def load_state_dict(self, state: dict) -> None:
        self._epoch_lr, self._epoch_valid = state.get("epoch_lr"), state.get("epoch_valid")

    def on_fit_end(self, loop, control):
        best_step = loop.best_epoch if loop.best_epoch is not None else -1
        scalars = tags.validation(loop.best_valid_result or {}, loop.best_valid_score, prefix="Best_Valid")
        self.log_summary(scalars, best_step)

    def on_test_end(self, loop, control, metrics):
        self.log_summary(tags.test(metrics), max(loop.best_epoch or 0, 0))
        self._finish(ok=True)

    def on_exception(self, loop, control, exception):
        self._finish(ok=False)

    def _finish(self, ok):
        if self.module is not None or not self.package:
            self.finish(ok)
            self.module = None


class TensorBoardLogger(MetricLogger):
    """The run's own event file (loop.writer, a recrunner.training.logging.tensorboard.RunWriter) and its
    hparams row, written at the end of fit; the run's status is added when the run ends."""

    def __init__(self):
        super().__init__()
        self.writer = None

    def start(self, loop, params):
        self.writer = loop.writer

    def log(self, scalars, step):
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)

    def log_steps(self, scalars, step):
        for tag, value in scalars.items():
            self.writer.add_step_scalar(tag, value, step)

    def on_fit_end(self, loop, control):
        super().on_fit_end(loop, control)
        if getattr(loop, "reports_hparams", True):  # a pre-training stage is part of its run, not a row
            metrics = list(loop.best_valid_result or {})
            self.writer.add_hparams(loop.hparams, tags.hparam_metrics(metrics) or ["Best_Valid/score"])


class WandbLogger(MetricLogger):
    package = "wandb"

    def __init__(self, project: str, run_name: str | None = None, directory=None):
        super().__init__(run_name)
        self.project, self.directory, self.run = project, directory, None

    def start(self, loop, params):
        kwargs = {"dir": str(self.directory)} if self.directory else {}
        self.run = self.module.init(project=self.project, name=self.run_name, config=params, reinit=True, **kwargs)

    def log(self, metrics, step):
        if self.run is not None and step >= 0:  # W&B steps start at 0
            self.run.log(metrics, step=step)

    def log_steps(self, metrics, step):
        """W&B has one step axis, the epochs: step scalars go to TensorBoard and MLflow only."""

    def log_summary(self, metrics, step):
        if self.run is not None:  # W&B drops a step older than the newest one it has
            self.run.summary.update(metrics)

    def finish(self, ok):
        self.run.finish(exit_code=0 if ok else 1)
        self.run = None


class MLflowLogger(MetricLogger):
    package = "mlflow"

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None, run_name: str | None = None):
        super().__init__(run_name)
        self.tracking_uri, self.experiment = tracking_uri, experiment

    def start(self, loop, params):
        if self.tracking_uri:
            self.module.set_tracking_uri(self.tracking_uri)
        if self.experiment:
            self.module.set_experiment(self.experiment)
        self.module.start_run(run_name=self.run_name)
        self.module.log_params({k: str(v)[:500] for k, v in params.items()})

    def log(self, metrics, step):
        self.module.log_metrics({_mlflow_name(k): v for k, v in metrics.items()}, step=step)

    def finish(self, ok):
        self.module.end_run(status="FINISHED" if ok else "FAILED")


def _mlflow_name(name: str) -> str:
    """MLflow metric names allow letters, digits, _ - . / and spaces: recall@10 -> recall_at_10."""
    return re.sub(r"[^\w\-./ ]", "_", name.replace("@", "_at_"))


def _param(value):
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
