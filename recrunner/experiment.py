"""One experiment end to end: validate, set up the run directory, train, test, record.

    result = run_experiment(Experiment("SASRec", "ml-100k", {"epochs": 2}),
                            Workspace(output_dir=Path("runs"), data_path=Path("datasets")))

Everything that can be wrong with the input is found before anything is written to disk
(`prepare`, in recrunner/preparation.py). A run that fails while training is recorded as `failed`
with its reason; one that is interrupted is recorded as `interrupted` and continues from
last.pth when run again.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from . import __version__, per_user, protocol
from .checkpoint import load as load_checkpoint
from .checkpoint import to_plain
from .config import setting
from .datacache import load_data
from .errors import ConfigError, RecrunnerError, RunInterrupted, failure_reason, one_line
from .interrupts import deferred
from .models import failure_hint
from .preparation import Experiment, PreparedRun, Workspace, prepare
from .provenance import provenance
from .record import RunRecord, Status
from .resume import StartOver, bring_best_checkpoint, check_request, resume_point
from .rundir import RunPaths, write_config
from .runlog import run_logging
from .seams.models import model_class as recbole_model_class
from .seams.models import repair_model
from .hparams_columns import write_experiment
from .tensorboard import RunWriter

__all__ = ["Experiment", "PreparedRun", "RunResult", "Workspace", "prepare", "run_experiment"]

logger = logging.getLogger("recrunner")


@dataclass
class RunResult:
    run_dir: Path
    status: Status  # a str: "ok", "failed", "interrupted"
    best_epoch: int | None = None
    best_valid: dict | None = None
    test: dict | None = None
    error: str | None = None
    skipped: bool = False  # already finished: nothing was trained
    warnings: tuple[str, ...] = ()  # may be under-trained, leaks the future, sampled metrics


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
        if previous.status.finished and resume_from is None:
            return _result_from_record(paths.run_dir, previous, skipped=True)
    with StartOver(paths, workspace.set_aside(paths.run_dir), enabled=restart) as start_over:
        paths.create()
        with run_logging(paths.log, console=console):
            return _execute(prepared, workspace, resume_from, resume_state, callbacks, begun=start_over.begun)


def _execute(prepared: PreparedRun, workspace: Workspace, resume_from, resume_state, callbacks, begun) -> RunResult:
    from recbole.utils import init_seed

    config, paths = prepared.config, prepared.paths
    record = _initial_record(prepared, workspace)
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
        record.protocol = protocol.card(config, *(loader and loader._dataset for loader in
                                                  (train_data, valid_data, test_data)))
        for warning in protocol.warnings(record.protocol):
            logger.warning(warning)
        trainer = _build_trainer(prepared, paths.run_dir, train_data, writer, callbacks)
        if resume:
            trainer.resume_checkpoint(resume[0])
        begun()
        show_progress = bool(config["show_progress"]) and sys.stderr.isatty()  # bars are for terminals
        started = time.perf_counter()
        trainer.fit(train_data, valid_data, saved=True, show_progress=show_progress)
        record.train_seconds = round(time.perf_counter() - started, 3)
        if trainer.control.pruned:  # a search trial its pruner stopped: no test, selection is on validation
            status, error = Status.PRUNED, trainer.control.pruned
            logger.info(f"pruned: {error}")
        else:
            started = time.perf_counter()
            test_result = trainer.test(test_data, show_progress=show_progress)
            record.test_seconds = round(time.perf_counter() - started, 3)
            per_user.save(paths.run_dir / "test_per_user.npz", trainer.test_per_user)
            record.test = {k: float(v) for k, v in test_result.items()}
            status = Status.OK
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM's RunInterrupted (recrunner.interrupts)
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
        with deferred():  # a stop that arrives now waits until the record is whole
            record.finish(status, error, trainer, _now())
            if record.under_trained:
                logger.warning(f"{config['model']} on {config['dataset']} {record.under_trained}")
            writer.end_session(status.value, prepared.hparams)
            writer.close()
            record.write(paths.metrics)
            write_experiment(workspace.output_dir, changed=paths.run_dir)  # the HParams columns now include this run's
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


def _initial_record(prepared: PreparedRun, workspace: Workspace) -> RunRecord:
    config = prepared.config
    origin = provenance(Path(config["data_path"]), workspace.config_dir, prepared.experiment.command)
    return RunRecord(
        status=Status.RUNNING, model=config["model"], dataset=config["dataset"], sweep=prepared.experiment.sweep,
        run_id=prepared.run_id, params=to_plain(dict(prepared.experiment.params)), seed=config["seed"],
        valid_metric=str(config["valid_metric"]).lower(), fingerprint=prepared.fingerprint, started=_now(),
        versions={k: origin["versions"][k] for k in ("recrunner", "recbole", "torch")}, provenance=origin,
        search=dict(prepared.experiment.search),
    )




def _result_from_record(run_dir: Path, record: RunRecord, skipped: bool = False) -> RunResult:
    return RunResult(run_dir=Path(run_dir), status=record.status, best_epoch=record.best_epoch,
                     best_valid=record.best_valid, test=record.test, error=record.error, skipped=skipped,
                     warnings=tuple(record.warnings()))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
