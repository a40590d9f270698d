"""Where a run continues from, or how it starts over: decisions about what is already on disk.

`check_request` checks a --resume-from / --restart request against the run on disk before
anything is touched; `resume_point` finds this run's newest intact last.pth (falling back past
corrupt files to the newest epoch-NNNN.pth); `bring_best_checkpoint` copies the best weights
beside a --resume-from file into the new run; `StartOver` replaces a run only once the new one
has begun.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import NamedTuple

from ..training.checkpoints.files import load as load_checkpoint
from ..training.checkpoints.files import load_training_state
from ..core.errors import CheckpointError, ConfigError
from ..core.layout import CheckpointPaths, RunPaths

logger = logging.getLogger("recrunner")


def check_request(paths: RunPaths, previous_status, model: str, dataset: str, *, restart: bool,
                  resume_from: Path | None) -> dict | None:
    """The training state of --resume-from (None without it), once the request is known to be
    safe for the run at `paths`; a ConfigError (exit 2) otherwise, with nothing touched."""
    if resume_from is None:
        return None
    resume_from = Path(resume_from)
    if restart and resume_from.resolve().is_relative_to(paths.run_dir.resolve()):
        raise ConfigError(f"--resume-from {resume_from} lies inside the run --restart replaces; copy it "
                          "elsewhere first, or drop --restart to continue that run")
    if previous_status is not None and previous_status.finished and not restart:
        raise ConfigError(f"{paths.run_dir} is finished (ok); --resume-from would replace it: add --restart "
                          "to replace it, or give other settings or --name for a new run")
    try:
        state = load_training_state(resume_from)
    except CheckpointError as exc:
        raise ConfigError(f"--resume-from: {exc}") from None
    written_for = (state.get("model"), (state.get("config") or {}).get("dataset", dataset))
    if written_for != (model, dataset):
        raise ConfigError(f"--resume-from {resume_from} was written by {written_for[0]} on {written_for[1]}, "
                          f"not {model} on {dataset}; give a last.pth of this model and dataset")
    return state


class StartOver:
    """--restart: the run's folder moves aside (into `aside`); it comes back whole if the new run
    never begins, and is deleted once it has (`begun()`, called before the first training epoch)."""

    def __init__(self, paths: RunPaths, aside: Path, enabled: bool = True):
        self.run_dir, self.aside, self.enabled, self.moved = paths.run_dir, Path(aside), enabled, False

    def __enter__(self):
        if self.enabled and self.aside.exists():  # a start-over killed before it began
            shutil.rmtree(self.run_dir, ignore_errors=True)
            os.replace(self.aside, self.run_dir)
        if self.enabled and self.run_dir.exists():
            self.aside.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.run_dir, self.aside)
            self.moved = True
        return self

    def begun(self) -> None:
        if self.moved:
            shutil.rmtree(self.aside, ignore_errors=True)
            self.moved = False

    def __exit__(self, *exc_info):
        if self.moved:
            logger.warning(f"the new run never began: {self.run_dir} is back as it was")
            shutil.rmtree(self.run_dir, ignore_errors=True)
            os.replace(self.aside, self.run_dir)
            self.moved = False
        return False


class ResumePoint(NamedTuple):
    path: Path
    epoch: int  # the newest epoch done
    step: int   # the optimizer steps done (within the next epoch too, for a step checkpoint)


def resume_point(paths: RunPaths) -> ResumePoint | None:
    """This run's checkpoint to continue from, its epoch and step; falls back past corrupt files."""
    for candidate in [paths.last, *paths.epoch_copies()]:
        if not candidate.exists():
            continue
        try:
            state = load_checkpoint(candidate)
        except CheckpointError as exc:
            logger.warning(f"{exc}; trying an older checkpoint")
            continue
        return ResumePoint(candidate, int(state["epoch"]), int(state.get("global_step") or 0))
    if paths.last.exists() or paths.epoch_copies():
        logger.warning("no intact checkpoint to resume from: starting this run over")
    for stale in paths.event_files():  # curves of an attempt that left no checkpoint
        stale.unlink()
    return None


def bring_best_checkpoint(resume_from: Path, best_epoch, paths: RunPaths) -> None:
    """A run continued in another directory needs the best weights seen before the resume point."""
    import shutil

    source = CheckpointPaths(Path(resume_from).parent).best
    if paths.best.exists() or source.resolve() == paths.best.resolve():
        return
    if source.is_file() and load_checkpoint(source)["epoch"] == best_epoch:
        shutil.copy2(source, paths.best)
        logger.info(f"copied {source} (the best weights as of {resume_from.name}) into this run")
    elif best_epoch is not None:
        logger.warning(f"the best weights as of {resume_from} (epoch {best_epoch}) are not beside it; "
                       "test scoring will use the best epoch trained from here on")
