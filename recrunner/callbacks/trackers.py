"""External experiment trackers: Weights & Biases and MLflow, as optional extras.

    trackers: [mlflow]        # pip install 'recrunner[mlflow]'
    trackers: [wandb]         # pip install 'recrunner[wandb]'; project from wandb_project

Each logs what TensorBoard gets (the run's hparams, Train/Loss, Train/LR, every Valid/ metric,
Best_Valid/ and Test/ metrics) and closes its run with the run's status. The package is
imported only when the tracker is enabled; a missing package is a one-line error at start.
RecBole's own `log_wandb` keeps working as in RecBole.
"""

from __future__ import annotations

import importlib
import re

from ..errors import ConfigError
from .. import tags
from .base import Callback

TRACKERS = ("wandb", "mlflow")


class _Tracker(Callback):
    package = ""
    order = 60

    def __init__(self, run_name: str | None = None):
        self.run_name = run_name
        self.module = None

    # -- what a tracker implements
    def start(self, trainer, params: dict): ...
    def log(self, metrics: dict, step: int): ...
    def finish(self, ok: bool): ...

    # -- events
    def on_fit_start(self, trainer, control):
        try:
            self.module = importlib.import_module(self.package)
        except ImportError:
            raise ConfigError(f"trackers: {self.package} is not installed; pip install 'recrunner[{self.package}]' "
                              f"or remove it from trackers") from None
        self.start(trainer, {k: _param(v) for k, v in trainer.hparams.items()})

    def on_train_epoch_end(self, trainer, control, losses):
        self.log(tags.train(losses, trainer.optimizer.param_groups[0]["lr"]), trainer.epoch)

    def on_validation_end(self, trainer, control, metrics, score):
        self.log(tags.validation(metrics, score), trainer.epoch)

    def on_fit_end(self, trainer, control):
        best = trainer.best_valid_result or {}
        self.log(tags.validation(best, prefix="Best_Valid"), max(trainer.best_epoch or 0, 0))

    def on_test_end(self, trainer, control, metrics):
        self.log(tags.test(metrics), max(trainer.best_epoch or 0, 0))
        self._finish(ok=True)

    def on_exception(self, trainer, control, exception):
        self._finish(ok=False)

    def _finish(self, ok):
        if self.module is not None:
            self.finish(ok)
            self.module = None


class WandbLogger(_Tracker):
    package = "wandb"

    def __init__(self, project: str, run_name: str | None = None, directory=None):
        super().__init__(run_name)
        self.project, self.directory, self.run = project, directory, None

    def start(self, trainer, params):
        kwargs = {"dir": str(self.directory)} if self.directory else {}
        self.run = self.module.init(project=self.project, name=self.run_name, config=params, reinit=True, **kwargs)

    def log(self, metrics, step):
        if self.run is not None and step >= 0:
            self.run.log(metrics, step=step)

    def finish(self, ok):
        self.run.finish(exit_code=0 if ok else 1)
        self.run = None


class MLflowLogger(_Tracker):
    package = "mlflow"

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None, run_name: str | None = None):
        super().__init__(run_name)
        self.tracking_uri, self.experiment = tracking_uri, experiment

    def start(self, trainer, params):
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
