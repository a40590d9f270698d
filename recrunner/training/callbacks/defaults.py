"""The built-in callbacks a run's configuration asks for (see docs/configuration.md).

`default_callbacks(config)` raises ConfigError for a setting it cannot honour, so `prepare`
calls it before anything is written. A callback passed by the caller replaces the default one
of the same class (`with_defaults`): passing `EarlyStopping("ndcg@10", 5)` overrides the
early stopping built from `stopping_step`.
"""

from __future__ import annotations

from pathlib import Path

from ...config.params import require_metric, setting
from ...core.errors import ConfigError
from ...core.layout import RunPaths, SweepPaths
from .early_stopping import EarlyStopping
from .guard import NonFiniteGuard
from .history import HistoryWriter
from .lr_schedule import LRScheduler
from .progress import ProgressBar
from .trackers import TRACKERS, MLflowLogger, TensorBoardLogger, WandbLogger


def default_callbacks(config, run_dir: Path | None = None) -> list:
    callbacks = [_early_stopping(config)]
    if setting(config, "nan_guard"):
        callbacks.append(NonFiniteGuard())
    if setting(config, "progress_bar"):
        callbacks.append(ProgressBar(every=setting(config, "progress_every")))
    if setting(config, "lr_scheduler") is not None:
        callbacks.append(_lr_scheduler(config))
    if run_dir is not None:
        callbacks.append(HistoryWriter(RunPaths(Path(run_dir)).history))
    callbacks.append(TensorBoardLogger())
    callbacks += _trackers(config, run_dir)
    return callbacks


def with_defaults(defaults, given) -> list:
    """`given` plus every default whose class is not among them."""
    given = list(given)
    kinds = {type(callback) for callback in given}
    return [callback for callback in defaults if type(callback) not in kinds] + given


def _early_stopping(config) -> EarlyStopping:
    watched = setting(config, "early_stop_metric") or config["valid_metric"]
    metric = require_metric(config, "early_stop_metric", str(watched).lower())
    min_delta = setting(config, "early_stop_min_delta")
    patience = config["stopping_step"]
    if not isinstance(patience, int) or patience < 0 or not isinstance(min_delta, (int, float)) or min_delta < 0:
        raise ConfigError(f"stopping_step must be a whole number >= 0 and early_stop_min_delta a number >= 0; "
                          f"got {patience!r} and {min_delta!r}")
    return EarlyStopping(metric, patience, float(min_delta))


def _lr_scheduler(config) -> LRScheduler:
    return LRScheduler(
        setting(config, "lr_scheduler"), warmup=setting(config, "lr_warmup"), interval=setting(config, "lr_interval"),
        step_size=setting(config, "lr_step_size"), gamma=setting(config, "lr_gamma"),
        patience=setting(config, "lr_patience"), min_lr=setting(config, "lr_min"),
    )


def _trackers(config, run_dir) -> list:
    names = setting(config, "trackers")
    names = [names] if isinstance(names, str) else list(names)
    if config["log_wandb"] and "wandb" not in names:  # RecBole's switch: W&B through the one WandbLogger
        names.append("wandb")
    unknown = [name for name in names if name not in TRACKERS]
    if unknown:
        raise ConfigError(f"trackers: unknown {', '.join(map(repr, unknown))}; available: {', '.join(TRACKERS)}")
    import importlib.util

    for name in names:
        if importlib.util.find_spec(name) is None:
            raise ConfigError(f"trackers: {name} is not installed; pip install 'recrunner[{name}]' or remove it from trackers")
    run_name = "/".join(Path(run_dir).parts[-3:]) if run_dir is not None else None
    made = []
    if "wandb" in names:
        made.append(WandbLogger(project=config["wandb_project"] or "recbole", run_name=run_name, directory=run_dir))
    if "mlflow" in names:
        # default store: runs/<sweep>/mlruns, beside the sweep's runs, never the working directory
        uri = setting(config, "mlflow_tracking_uri")
        if uri is None and run_dir is not None:
            uri = SweepPaths(Path(run_dir).parents[2]).mlruns.as_uri()
        made.append(MLflowLogger(tracking_uri=uri, experiment=setting(config, "mlflow_experiment"), run_name=run_name))
    return made
