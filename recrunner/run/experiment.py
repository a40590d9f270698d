"""One experiment end to end: validate, set up the run directory, train, test, record.

    result = run_experiment(Experiment("SASRec", "ml-100k", {"epochs": 2}),
                            Workspace(output_dir=Path("runs"), data_path=Path("datasets")))

Everything that can be wrong with the input is found before anything is written to disk
(`prepare`, in recrunner/run/preparation.py). A run that fails while training is recorded as `failed` with
its reason; one that is interrupted is recorded as `interrupted` and continues from last.pth when run again.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from .. import __version__
from . import building, per_user, pretraining, protocol
from ..training.checkpoints.files import to_plain
from ..config.params import setting
from ..core.errors import ConfigError, RecrunnerError, RunInterrupted, one_line
from ..core.interrupts import deferred
from ..core.layout import OutputPaths
from .models import logged_failure, model_caveat
from .preparation import Experiment, PreparedRun, Workspace, prepare
from .provenance import provenance
from .record import RunRecord, Status
from .result import RunResult
from ..training.loop import device
from ..training.distributed import world as distributed
from .distributed import check_processes, follower_config, tell
from .resume import ResumePoint, StartOver, bring_best_checkpoint, check_request, resume_point
from ..core.files import write_config
from .runlog import run_logging
from .hparams_columns import write_experiment
from ..training.fast.cache_keys import KeyBook, share_compile_cache
from ..training.fast.compile_clock import CompileClock
from ..training.logging.tensorboard import NullWriter, RunWriter

__all__ = ["Experiment", "PreparedRun", "RunResult", "Workspace", "prepare", "run_experiment"]

logger = logging.getLogger("recrunner")


def run_experiment(experiment: Experiment, workspace: Workspace, *, restart: bool = False,
                   resume_from: Path | None = None, callbacks: Sequence = (), console: bool = True) -> RunResult:
    """Run (or resume, or skip if finished) one experiment; see the module docstring.

    The request is checked against what is on disk before anything is written; a finished run
    is replaced only with `restart`, and only once the new run has begun (resume.StartOver).
    """
    prepared = prepare(experiment, workspace)
    world = distributed.current()  # one of a data-parallel run's processes (recrunner.run.distributed)
    check_processes(prepared, world)
    if world is not None and not world.writes:
        return follow(prepared, workspace, world, callbacks)
    paths = prepared.paths
    previous = RunRecord.read(paths.metrics)
    resume_state = check_request(paths, previous and previous.status, prepared.config["model"], experiment.dataset,
                                 restart=restart, resume_from=resume_from)
    if previous and not restart:
        if previous.fingerprint not in (None, prepared.fingerprint):
            raise ConfigError(
                f"{paths.run_dir} holds a run with other settings (were its configuration layers edited?); "
                "pass --restart to train it again, or --name for a new sweep"
            )
        if previous.status.finished and resume_from is None:
            tell(world, None)  # the other processes have nothing to train
            return RunResult.from_record(paths.run_dir, previous, skipped=True)
    with StartOver(paths, workspace.set_aside(paths.run_dir), enabled=restart) as start_over:
        paths.create()
        with run_logging(paths.log, console=console):
            return _execute(prepared, workspace, resume_from, resume_state, callbacks, begun=start_over.begun)


def _execute(prepared: PreparedRun, workspace: Workspace, resume_from, resume_state, callbacks, begun) -> RunResult:
    """The run's flowchart: record it, pre-train, load the data, build the trainer, resume, fit, test;
    every ending (ok, pruned, failed, interrupted) is written to its record."""
    config, paths = prepared.config, prepared.paths
    device.set_deterministic(setting(config, "deterministic"))
    device.start_measuring(config["device"])
    record = _initial_record(prepared, workspace)
    write_config(paths.config, to_plain(config.final_config_dict))
    record.write(paths.metrics)
    resume = _resume_point(paths, resume_from, resume_state)
    tell(distributed.current(), ("train", resume))  # the other processes resume from the same checkpoint
    writer = RunWriter(paths.run_dir, purge_step=resume.epoch + 1 if resume else None, group=prepared.group,
                       step_purge=resume.step + 1 if resume else None)
    status, error, trainer = Status.FAILED, None, None
    try:
        logger.info(f"recrunner {__version__}: {config['model']} on {config['dataset']}, run {paths.run_dir}")
        logger.info("configuration layers read from: " + ", ".join(record.provenance["config_layers"]))
        device.set_tf32(setting(config, "tf32"), config["device"])
        if setting(config, "fast"):
            share_compile_cache(OutputPaths(workspace.output_dir).compile_cache)
        pretraining.pretrain(prepared, workspace, callbacks, record, begun)
        train_data, valid_data, test_data = _load_data_recorded(prepared, workspace, record)
        trainer = building.trainer(prepared, paths.run_dir, train_data, writer, callbacks)
        record.provenance["fast"] = trainer.fast.as_dict() if getattr(trainer, "fast", None) else None
        if resume:
            trainer.resume_checkpoint(resume[0])
        begun()
        status, error = _fit_and_test(trainer, train_data, valid_data, test_data, record, paths)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM's RunInterrupted (recrunner.core.interrupts)
        status, error = Status.INTERRUPTED, interrupted_message(paths.last.exists())
        logger.warning(error)
        raise RunInterrupted(f"{config['model']} on {config['dataset']} interrupted; the same command resumes it")
    except distributed.PeerLost as exc:  # another process of the run stopped; the launcher names why
        status, error = Status.INTERRUPTED, one_line(exc)
        logger.error(f"run stopped: {error}")
    except RecrunnerError as exc:  # a failure recrunner understood: its message says it all
        error = one_line(exc)
        logger.error(f"run failed: {error}")
    except Exception as exc:  # a failing run is recorded, never lost; the sweep goes on
        error = logged_failure(config["model"], exc)
    finally:
        with deferred():  # a stop that arrives now waits until the record is whole
            _finish_record(prepared, workspace, record, writer, status, error, trainer)
    return RunResult.from_record(paths.run_dir, record)


def interrupted_message(checkpointed: bool) -> str:
    """What an interrupted run's log says the same command will do (pure): resume from last.pth, or,
    stopped before its first checkpoint, start again (nothing was trained to keep)."""
    if checkpointed:
        return "interrupted; run the same command again to resume from last.pth"
    return "interrupted before its first checkpoint; the same command starts the run again"


def follow(prepared: PreparedRun, workspace: Workspace, world, callbacks=()) -> RunResult | None:
    """A data-parallel run's process other than rank 0: rank 0's flowchart, every collective in the
    same order, writing nothing (rank 0 records the run; its result is rank 0's)."""
    decision = world.share(None)
    if decision is None:  # rank 0 found the run finished
        return None
    resume = decision[1]
    follower_config(prepared.config)
    device.set_deterministic(setting(prepared.config, "deterministic"))
    device.set_tf32(setting(prepared.config, "tf32"), prepared.config["device"])
    logging.getLogger().addHandler(logging.NullHandler())  # rank 0 logs the run; failures here are raised
    train_data, valid_data, test_data = _load_data_recorded(prepared, workspace, RunRecord())
    trainer = building.trainer(prepared, None, train_data, NullWriter(), callbacks)
    if resume:
        trainer.resume_checkpoint(resume[0])
    trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    if not trainer.control.pruned:
        trainer.test(test_data)
        per_user.of_validation(trainer, valid_data)  # rank 0's per-user validation: the same collective
    return None


def _resume_point(paths, resume_from, resume_state) -> ResumePoint | None:
    """Where to continue from: --resume-from's checkpoint, else the run's own newest, else None."""
    if resume_from is None:
        return resume_point(paths)
    bring_best_checkpoint(Path(resume_from), resume_state["best_epoch"], paths)
    return ResumePoint(Path(resume_from), int(resume_state["epoch"]), int(resume_state.get("global_step") or 0))


def _load_data_recorded(prepared: PreparedRun, workspace: Workspace, record: RunRecord):
    """The three data loaders, seeded as RecBole seeds them; the record gets their time and protocol card."""
    from recbole.utils import init_seed

    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    started = time.perf_counter()
    loaders = building.loaders(prepared, workspace)
    record.data_seconds = round(time.perf_counter() - started, 3)
    if distributed.current() is not None:
        record.provenance["processes"] = distributed.current().size
    record.protocol = protocol.card(config, *(loader and loader._dataset for loader in loaders))
    for warning in protocol.warnings(record.protocol):
        logger.warning(warning)
    return loaders


def _fit_and_test(trainer, train_data, valid_data, test_data, record: RunRecord, paths) -> tuple[Status, str | None]:
    show_progress = bool(trainer.config["show_progress"]) and sys.stderr.isatty()  # bars are for terminals
    plan = getattr(trainer, "fast", None)  # a tree model's trainer has no fast mode
    compiling = CompileClock(KeyBook()) if plan is not None and plan.compile else None  # KeyBook: why graphs compiled again
    trainer.fit(train_data, valid_data, saved=True, show_progress=show_progress)
    if trainer.control.pruned:  # a search trial its pruner stopped: no test, selection is on validation
        logger.info(f"pruned: {trainer.control.pruned}")
        return Status.PRUNED, trainer.control.pruned
    started = time.perf_counter()
    test_result = trainer.test(test_data, show_progress=show_progress)
    record.test_seconds = round(time.perf_counter() - started, 3)
    per_user.save(paths.test_per_user, trainer.test_per_user)
    per_user.save(paths.valid_per_user, per_user.of_validation(trainer, valid_data))
    record.test = {k: float(v) for k, v in test_result.items()}
    if compiling is not None:  # the compiler's cache makes a second run of the model compile in seconds
        reading = compiling.read()
        record.compile_seconds, record.compile_phases, record.compile_cache = reading
        logger.info(reading.line())
    return Status.OK, None


def _finish_record(prepared: PreparedRun, workspace: Workspace, record: RunRecord, writer, status, error,
                   trainer) -> None:
    config = prepared.config
    record.finish(status, error, trainer, _now())
    record.caveat = model_caveat(config["model"], config)
    record.device = device.usage(config["device"]).as_dict()
    for warning in filter(None, (record.under_trained, record.caveat)):
        logger.warning(f"{config['model']} on {config['dataset']} {warning}")
    writer.end_session(status.value, prepared.hparams)
    writer.close()
    record.write(prepared.paths.metrics)
    write_experiment(workspace.output_dir, changed=prepared.paths.run_dir)  # the HParams columns now include this run's


def _initial_record(prepared: PreparedRun, workspace: Workspace) -> RunRecord:
    config = prepared.config
    origin = provenance(Path(config["data_path"]), workspace.config_dir, prepared.experiment.command)
    origin["deterministic"] = bool(setting(config, "deterministic"))
    return RunRecord(
        status=Status.RUNNING, model=config["model"], dataset=config["dataset"], sweep=prepared.experiment.sweep,
        run_id=prepared.run_id, params=to_plain(dict(prepared.experiment.params)), seed=config["seed"],
        valid_metric=str(config["valid_metric"]).lower(), fingerprint=prepared.fingerprint, started=_now(),
        versions={k: origin["versions"][k] for k in ("recrunner", "recbole", "torch")}, provenance=origin,
        search=dict(prepared.experiment.search),
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
