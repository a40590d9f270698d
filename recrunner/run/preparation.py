"""Everything about a run that can be known before anything is written: `prepare`.

`prepare(experiment, workspace)` resolves the model and dataset, layers the configuration, checks
every key, type and value against RecBole's resolved configuration, checks the data files and the
callbacks' settings, and returns the run's id, paths, hparams, fingerprint and trainer class. It
writes nothing, so a sweep plans every cell with it (`--dry-run` included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..training.loop.optimizer import accumulation_steps
from ..training.callbacks import default_callbacks
from ..config.checks import check_values, plain_name, plain_sweep
from ..config.layers import layered_params
from ..config.params import (NOT_IDENTITY_KEYS, RECRUNNER_DEFAULTS, check_overrides, check_valid_metric, setting,
                             undeclared_keys)
from ..data.files import check_additional_files, check_atomic_files, check_labels, dataset_settings, resolve_data_path
from ..core.errors import ConfigError
from ..training.families.layers import pretraining_stages
from .models import check_model_settings, check_requirements, context_aware, resolve_model, trainer_class_for
from ..core.layout import OutputPaths, RunPaths
from ..config.run_id import fingerprint, make_run_id
from ..seams.config import honour_data_path, recbole_argv_cleared, recbole_model_defaults
from ..seams.device import check_device, run_gpu_id
from ..seams.environment import prepare_environment
from ..training.loop.device import deterministic_environment
from ..training.logging.tensorboard import default_hparams
from ..training.loop.trainer import CustomTrainer


@dataclass(frozen=True)
class Experiment:
    """What to run: a model on a dataset with the parameters that identify this run."""

    model: str
    dataset: str
    params: Mapping[str, Any] = field(default_factory=dict)  # grid, --config-file, --set
    sweep: str = "default"
    runtime: Mapping[str, Any] = field(default_factory=dict)  # where it runs (gpu_id, ...): not part of its identity
    id_keys: tuple[str, ...] | None = None  # parameters its run id shows (a sweep's swept ones); None: all
    command: str | None = None  # the command line that asked for it (provenance); not part of its identity
    search: Mapping[str, Any] = field(default_factory=dict)  # {"role": "trial" | "final", "trial": n}: a search's run


@dataclass(frozen=True)
class Workspace:
    """Where things are: every path explicit, nothing relative to the working directory."""

    output_dir: Path
    data_path: Path
    config_dir: Path | None = None

    @property
    def cache_dir(self) -> Path:
        """Preprocessed datasets shared by every run and sweep under output_dir (recrunner.data.cache)."""
        return OutputPaths(self.output_dir).data_cache

    def set_aside(self, run_dir: Path) -> Path:
        """Where `--restart` keeps the run at `run_dir` until its replacement trains (resume.StartOver)."""
        return OutputPaths(self.output_dir).set_aside(run_dir)


@dataclass
class PreparedRun:
    experiment: Experiment
    config: Any  # recbole.config.Config
    paths: RunPaths
    run_id: str
    hparams: dict
    fingerprint: str
    trainer_class: type
    stages: tuple[str, ...] = ()  # pre-training stages run before this run's own training (families)
    group: str = ""  # its HParams trial name: runs that differ only by seed share it


def prepare(experiment: Experiment, workspace: Workspace) -> PreparedRun:
    """Resolve and validate everything; raises ConfigError and touches no file."""
    prepare_environment()
    from recbole.config import Config

    for what, name in (("model", experiment.model), ("dataset", experiment.dataset)):
        plain_name(what, name)  # each names a folder: never a path out of the output or data folder
    plain_sweep(experiment.sweep)

    model = resolve_model(experiment.model)
    check_requirements(model)
    data_path = resolve_data_path(experiment.dataset, workspace.data_path)
    file_layers = {**recbole_model_defaults(model),
                   **layered_params(workspace.config_dir, model, experiment.dataset, {},
                                    dataset_settings(data_path, experiment.dataset, context_aware(model)))}
    params = dict(experiment.params)
    gpu = run_gpu_id(file_layers, params, experiment.runtime)  # every Config of the run sees its GPU (seams/device.py)

    # RecBole's defaults for this model and dataset, without the overrides: the keys and types to check them against
    defaults = _recbole_config(Config, model, experiment.dataset, {**file_layers, **gpu, "data_path": str(data_path)})
    known = {**defaults.internal_config_dict, **undeclared_keys(model, context_aware(model)), **RECRUNNER_DEFAULTS,
             **file_layers}
    params = check_overrides(params, known, source=f"{model}'s parameters (--set, --config-file, grid)", model=model)
    check_values({**file_layers, **params}, f"{model} on {experiment.dataset}")
    identity = {**_identifying(params), "seed": params.get("seed", defaults["seed"])}
    run_id = make_run_id(identity, shown=None if experiment.id_keys is None else (*experiment.id_keys, "seed"))
    paths = OutputPaths(workspace.output_dir).run(experiment.sweep, experiment.dataset, model, run_id)

    config_dict = {**RECRUNNER_DEFAULTS, **file_layers, **params, **experiment.runtime,
                   "data_path": str(data_path), "checkpoint_dir": str(paths.checkpoints)}
    config = _recbole_config(Config, model, experiment.dataset, config_dict)
    if setting(config, "deterministic"):
        deterministic_environment()  # before CUDA starts in this process (recrunner.training.loop.device)
    check_device({**file_layers, **params}, config)
    _check_config(model, config)
    trainer_class = trainer_class_for(model, config["MODEL_TYPE"], CustomTrainer)
    try:
        stages = pretraining_stages(model, config["train_stage"])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    hparams = {**default_hparams(config), **identity}
    settings = _identifying({"model": model, "dataset": experiment.dataset, **file_layers, **params})
    group = f"{experiment.dataset}/{model}/" + make_run_id({k: v for k, v in identity.items() if k != "seed"},
                                                          shown=experiment.id_keys)
    return PreparedRun(experiment, config, paths, run_id, hparams, fingerprint(settings), trainer_class, stages, group)


def _identifying(params: Mapping) -> dict:
    """`params` without the keys that never change a run's numbers (config.NOT_IDENTITY_KEYS)."""
    return {k: v for k, v in params.items() if k not in NOT_IDENTITY_KEYS}


def _check_config(model: str, config) -> None:
    """The resolved configuration's checks that need RecBole's Config: metrics, model settings, data files,
    labels, the callbacks' and the optimizer's settings (each raises ConfigError)."""
    check_valid_metric(config)
    check_model_settings(model, config)
    check_additional_files(config)
    check_atomic_files(config)
    check_labels(config)
    default_callbacks(config)  # its settings are checked here, before anything is written
    accumulation_steps(config)


def _recbole_config(config_class, model, dataset, config_dict):
    try:
        with recbole_argv_cleared():
            config = config_class(model=model, dataset=dataset, config_dict=config_dict)
        honour_data_path(config, config_dict["data_path"])
        return config
    except (ValueError, TypeError, KeyError, AttributeError, NotImplementedError) as exc:
        raise ConfigError(f"RecBole rejected the configuration of {model} on {dataset}: {exc}") from None
