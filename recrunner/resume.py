"""Where a run continues from: decisions about the checkpoints already on disk.

`resume_point` finds this run's newest intact last.pth (falling back past corrupt files to the
newest epoch-NNNN.pth); `resumable_state` checks an explicit --resume-from file;
`bring_best_checkpoint` copies the best weights beside a --resume-from file into the new run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .checkpoint import load as load_checkpoint
from .checkpoint import load_training_state
from .errors import CheckpointError
from .rundir import RunPaths

logger = logging.getLogger("recrunner")


def resumable_state(path: Path) -> dict:
    """An explicit --resume-from file: it must open and hold a full training state."""
    return load_training_state(path)


def resume_point(paths: RunPaths) -> tuple[Path, int] | None:
    """This run's checkpoint to continue from and its epoch; falls back past corrupt files."""
    for candidate in [paths.last, *paths.epoch_copies()]:
        if not candidate.exists():
            continue
        try:
            state = load_checkpoint(candidate)
        except CheckpointError as exc:
            logger.warning(f"{exc}; trying an older checkpoint")
            continue
        return candidate, int(state["epoch"])
    if paths.last.exists() or paths.epoch_copies():
        logger.warning("no intact checkpoint to resume from: starting this run over")
    for stale in paths.event_files():  # curves of an attempt that left no checkpoint
        stale.unlink()
    return None


def bring_best_checkpoint(resume_from: Path, best_epoch, paths: RunPaths) -> None:
    """A run continued in another directory needs the best weights seen before the resume point."""
    import shutil

    source = resume_from.parent / "best.pth"
    if paths.best.exists() or source.resolve() == paths.best.resolve():
        return
    if source.is_file() and load_checkpoint(source)["epoch"] == best_epoch:
        shutil.copy2(source, paths.best)
        logger.info(f"copied {source} (the best weights as of {resume_from.name}) into this run")
    elif best_epoch is not None:
        logger.warning(f"the best weights as of {resume_from} (epoch {best_epoch}) are not beside it; "
                       "test scoring will use the best epoch trained from here on")
