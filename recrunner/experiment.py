"""One experiment end to end: validate, set up the run directory, train, test, record.

    result = run_experiment(Experiment("SASRec", "ml-100k", {"epochs": 2}),
                            Workspace(output_dir=Path("runs"), data_path=Path("datasets")))

Everything that can be wrong with the input is found before anything is written to disk
(`prepare`). A run that fails while training is recorded as `failed` with its reason; one that
is interrupted is recorded as `interrupted` and continues from last.pth when run again.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import __version__, per_user
from .accumulation import accumulation_steps
from .callbacks import default_callbacks
from .checkpoint import load as load_checkpoint
from .checkpoint import to_plain
from .config import NOT_IDENTITY_KEYS, RECRUNNER_DEFAULTS, check_overrides, check_valid_metric, layered_params, setting
from .checks import check_values
from .data import check_additional_files, check_atomic_files, resolve_data_path
from .datacache import load_data
from .errors import ConfigError, RecrunnerError, RunInterrupted, failure_reason, one_line
from .families import pretraining_stages
from .models import check_requirements, failure_hint, resolve_model, trainer_class_for
from .record import RunRecord, Status
from .resume import StartOver, bring_best_checkpoint, check_request, resume_point
from .rundir import RunPaths, fingerprint, make_run_id, run_paths, write_config
from .runlog import run_logging
from .seams.config import honour_data_path, recbole_argv_cleared, recbole_model_defaults
from .seams.environment import check_environment, quiet_known_warnings
from .seams.models import model_class as recbole_model_class
from .seams.models import repair_model
from .tensorboard import RunWriter, write_experiment
from .trainer import CustomTrainer, default_hparams

logger = logging.getLogger("recrunner")


@dataclass(frozen=True)
class Experiment:
    """What to run: a model on a dataset with the parameters that identify this run."""

    model: str
    dataset: str
    params: Mapping[str, Any] = field(default_factory=dict)  # grid, --config-file, --set
    sweep: str = "default"
    runtime: Mapping[str, Any] = field(default_factory=dict)  # where it runs (gpu_id, ...): not part of its identity
    id_keys: tuple[str, ...] | None = None  # parameters its run id shows (a sweep's swept ones); None: all


@dataclass(frozen=True)
class Workspace:
    """Where things are: every path explicit, nothing relative to the working directory."""

    output_dir: Path
    data_path: Path
    config_dir: Path | None = None

    @property
    def cache_dir(self) -> Path:
        """Preprocessed datasets shared by every run and sweep under output_dir (recrunner.datacache)."""
        return self.output_dir / ".cache" / "data"


@dataclass
class RunResult:
    run_dir: Path
    status: Status  # a str: "ok", "failed", "interrupted"
    best_epoch: int | None = None
    best_valid: dict | None = None
    test: dict | None = None
    error: str | None = None
    skipped: bool = False  # already finished: nothing was trained


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
    from recbole.config import Config

    check_environment()
    quiet_known_warnings()
    model = resolve_model(experiment.model)
    check_requirements(model)
    data_path = resolve_data_path(experiment.dataset, workspace.data_path)
    file_layers = {**recbole_model_defaults(model),
                   **layered_params(workspace.config_dir, model, experiment.dataset, {})}
    params = dict(experiment.params)

    # RecBole's defaults for this model and dataset, without the overrides: the keys and types to check them against
    defaults = _recbole_config(Config, model, experiment.dataset, {**file_layers, "data_path": str(data_path)})
    known = {**defaults.internal_config_dict, **RECRUNNER_DEFAULTS, **file_layers}
    params = check_overrides(params, known, source="parameters (--set, --config-file, grid)")
    check_values({**file_layers, **params}, f"{model} on {experiment.dataset}")
    identity = {**{k: v for k, v in params.items() if k not in NOT_IDENTITY_KEYS}, "seed": params.get("seed", defaults["seed"])}
    run_id = make_run_id(identity, shown=None if experiment.id_keys is None else (*experiment.id_keys, "seed"))
    paths = run_paths(workspace.output_dir, experiment.sweep, experiment.dataset, model, run_id)

    config_dict = {**RECRUNNER_DEFAULTS, **file_layers, **params, **experiment.runtime,
                   "data_path": str(data_path), "checkpoint_dir": str(paths.checkpoints)}
    config = _recbole_config(Config, model, experiment.dataset, config_dict)
    check_valid_metric(config)
    check_additional_files(config)
    check_atomic_files(config)
    default_callbacks(config)  # its settings are checked here, before anything is written
    accumulation_steps(config)
    trainer_class = trainer_class_for(model, config["MODEL_TYPE"], CustomTrainer)
    try:
        stages = pretraining_stages(model, config["train_stage"])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    hparams = {**default_hparams(config), **identity}
    settings = {k: v for k, v in {"model": model, "dataset": experiment.dataset, **file_layers, **params}.items()
                if k not in NOT_IDENTITY_KEYS}
    shown = None if experiment.id_keys is None else experiment.id_keys
    group = f"{experiment.dataset}/{model}/" + make_run_id({k: v for k, v in identity.items() if k != "seed"}, shown=shown)
    return PreparedRun(experiment, config, paths, run_id, hparams, fingerprint(settings), trainer_class, stages, group)


def _recbole_config(config_class, model, dataset, config_dict):
    try:
        with recbole_argv_cleared():
            config = config_class(model=model, dataset=dataset, config_dict=config_dict)
        honour_data_path(config, config_dict["data_path"])
        return config
    except (ValueError, TypeError, KeyError, AttributeError, NotImplementedError) as exc:
        raise ConfigError(f"RecBole rejected the configuration of {model} on {dataset}: {exc}") from None


def run_experiment(experiment: Experiment, workspace: Workspace, *, restart: bool = False,
                   resume_from: Path | None = None, callbacks: Sequence = (), console: bool = True) -> RunResult:
    """Run (or resume, or skip if finished) one experiment; see the module docstring.

    The request is checked against what is on disk before anything is written; a finished run
    is replaced only with `restart`, and only once the new run has begun (resume.StartOver).
    """
    prepared = prepare(experiment, workspace)
    paths = prepared.paths
    previous = RunRecord.read(paths.metrics)
    resume_state = check_request(paths, previous and previous.status, prepared.config["model"], experiment.dataset,
                                 restart=restart, resume_from=resume_from)
    if previous and not restart:
        if previous.fingerprint not in (None, prepared.fingerprint):
            raise ConfigError(
                f"{paths.run_dir} holds a run with other settings (were configs/*.yaml edited?); "
                "pass --restart to train it again, or --name for a new sweep"
            )
        if previous.status is Status.OK and resume_from is None:
            return _result_from_record(paths.run_dir, previous, skipped=True)
    aside = workspace.output_dir / ".cache" / "replaced" / paths.run_dir.relative_to(workspace.output_dir)
    with StartOver(paths, aside, enabled=restart) as start_over:
        paths.create()
        with run_logging(paths.log, console=console):
            return _execute(prepared, workspace, resume_from, resume_state, callbacks, begun=start_over.begun)


def _execute(prepared: PreparedRun, workspace: Workspace, resume_from, resume_state, callbacks, begun) -> RunResult:
    from recbole.utils import init_seed

    config, paths = prepared.config, prepared.paths
    record = _initial_record(prepared)
    write_config(paths.config, to_plain(config.final_config_dict))
    record.write(paths.metrics)
    if resume_from is not None:
        resume = Path(resume_from), int(resume_state["epoch"])
        bring_best_checkpoint(Path(resume_from), resume_state["best_epoch"], paths)
    else:
        resume = resume_point(paths)
    writer = RunWriter(paths.run_dir, purge_step=resume[1] + 1 if resume else None, group=prepared.group)
    status, error, trainer = Status.FAILED, None, None
    try:
        logger.info(f"recrunner {__version__}: {config['model']} on {config['dataset']}, run {paths.run_dir}")
        started = time.perf_counter()
        if prepared.stages:
            begun()  # a pre-training stage is the new run's first training
        _run_pretraining_stages(prepared, workspace, callbacks)
        if prepared.stages:
            record.pretrain_seconds = round(time.perf_counter() - started, 3)
        init_seed(config["seed"], config["reproducibility"])
        started = time.perf_counter()
        train_data, valid_data, test_data = _load_data(config, workspace)
        record.data_seconds = round(time.perf_counter() - started, 3)
        trainer = _build_trainer(prepared, paths.run_dir, train_data, writer, callbacks)
        if resume:
            trainer.resume_checkpoint(resume[0])
        begun()
        show_progress = bool(config["show_progress"]) and sys.stderr.isatty()  # bars are for terminals
        started = time.perf_counter()
        trainer.fit(train_data, valid_data, saved=True, show_progress=show_progress)
        record.train_seconds = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        test_result = trainer.test(test_data, show_progress=show_progress)
        record.test_seconds = round(time.perf_counter() - started, 3)
        per_user.save(paths.run_dir / "test_per_user.npz", trainer.test_per_user)
        record.test = {k: float(v) for k, v in test_result.items()}
        status = Status.OK
    except (KeyboardInterrupt, RunInterrupted):
        status, error = Status.INTERRUPTED, "interrupted; run the same command again to resume from last.pth"
        logger.warning(error)
        raise RunInterrupted(f"{config['model']} on {config['dataset']} interrupted; the same command resumes it")
    except RecrunnerError as exc:  # a failure recrunner understood: its message says it all
        error = one_line(exc)
        logger.error(f"run failed: {error}")
    except Exception as exc:  # a failing run is recorded, never lost; the sweep goes on
        error = failure_hint(config["model"], exc) or failure_reason(exc)
        logger.exception(f"run failed: {error}")
    finally:
        record.finish(status, error, trainer, _now())
        writer.end_session(status.value, prepared.hparams)
        writer.close()
        record.write(paths.metrics)
        write_experiment(workspace.output_dir)  # the HParams columns now include this run's
    return _result_from_record(paths.run_dir, record)


def _load_data(config, workspace: Workspace):
    cache_dir = workspace.cache_dir if setting(config, "data_cache") else None
    return load_data(config, cache_dir)


def _build_trainer(prepared: PreparedRun, run_dir: Path, train_data, writer, callbacks):
    """The model (seeded as RecBole seeds it) and its trainer, with the run's callbacks."""
    from recbole.utils import init_seed

    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    model_class = recbole_model_class(config["model"], detect_anomaly=setting(config, "detect_anomaly"))
    model = repair_model(model_class(config, train_data._dataset).to(config["device"]))
    logger.info(model, extra={"file_only": True})
    return prepared.trainer_class(config, model, writer=writer, callbacks=callbacks, hparams=prepared.hparams,
                                  run_dir=run_dir)


def _run_pretraining_stages(prepared: PreparedRun, workspace: Workspace, callbacks) -> None:
    """S3Rec's and RaCT's pre-training stages, each a resumable sub-run; then the config fine-tunes.

    Stage S lives in <run_dir>/S/ (checkpoints/, TensorBoard events), as RecBole would run it
    alone: seeded, fresh data loaders, `pretrain_epochs` without validation. Its best.pth (the
    newest weights) is the next stage's `pre_model_path`. A finished stage is not trained again.
    """
    from recbole.utils import init_seed

    config, pre_model_path = prepared.config, prepared.config["pre_model_path"]
    for stage in prepared.stages:
        stage_paths = RunPaths(prepared.paths.run_dir / stage)
        stage_paths.create()
        config["train_stage"], config["pre_model_path"] = stage, pre_model_path
        config["checkpoint_dir"] = str(stage_paths.checkpoints)
        resume = resume_point(stage_paths)
        done = resume is not None and load_checkpoint(resume[0]).get("finished") and stage_paths.best.is_file()
        if done:
            logger.info(f"pre-training stage {stage}: finished before, using {stage_paths.best}")
        else:
            logger.info(f"pre-training stage {stage}: {config['pretrain_epochs']} epochs, no validation")
            init_seed(config["seed"], config["reproducibility"])
            train_data, _, _ = _load_data(config, workspace)
            writer = RunWriter(stage_paths.run_dir, purge_step=resume[1] + 1 if resume else None)
            try:
                trainer = _build_trainer(prepared, stage_paths.run_dir, train_data, writer, callbacks)
                if resume:
                    trainer.resume_checkpoint(resume[0])
                trainer.fit(train_data, None, saved=True)
            finally:
                writer.close()
        pre_model_path = str(stage_paths.best)
    config["train_stage"], config["pre_model_path"] = "finetune", pre_model_path
    config["checkpoint_dir"] = str(prepared.paths.checkpoints)


def _initial_record(prepared: PreparedRun) -> RunRecord:
    import recbole
    import torch

    config = prepared.config
    return RunRecord(
        status=Status.RUNNING, model=config["model"], dataset=config["dataset"], sweep=prepared.experiment.sweep,
        run_id=prepared.run_id, params=to_plain(dict(prepared.experiment.params)), seed=config["seed"],
        valid_metric=str(config["valid_metric"]).lower(), fingerprint=prepared.fingerprint, started=_now(),
        versions={"recrunner": __version__, "recbole": recbole.__version__, "torch": torch.__version__},
    )




def _result_from_record(run_dir: Path, record: RunRecord, skipped: bool = False) -> RunResult:
    return RunResult(run_dir=Path(run_dir), status=record.status, best_epoch=record.best_epoch,
                     best_valid=record.best_valid, test=record.test, error=record.error, skipped=skipped)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
