"""A trial's side of a search: the pruner for the CLI's names, the study storage, and the callback
through which each validation score goes to the trial's study, where the pruner may stop it (the
sampler, and asking and telling the studies, are recrunner.search.studies's).

The study lives on disk (or in a database) and is shared by every process of the search, so a
trial run in a worker process (or on a Ray node) reports to the same study the sweep asks for
trials. A pruned trial stops at once, is not tested (selection is on validation), and ends with
status `pruned` and the reason (experiment.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .base import Callback

logger = logging.getLogger("recrunner")

@dataclass(frozen=True)
class TrialRef:
    """Which trial of which study a run is: what a worker needs to report to it."""

    storage: str          # a journal file path, or a database URL
    study: str            # the study's name: <dataset>/<model>
    trial_id: int         # optuna's id of the trial in its storage
    number: int           # the trial's number in its study
    pruner: str = "none"  # median | asha | hyperband | none
    max_epochs: int = 1   # the epoch cap: Hyperband's largest budget
    trials: int = 1       # the study's number of trials (the median pruner's warm-up)
    after: int = 1        # epochs every trial trains before it can be pruned (--prune-after; the search's default is 5)


def make_pruner(name: str, *, max_epochs: int = 1, trials: int = 1, after: int = 1):
    """Optuna's pruner for a `--prune` name; a step is an epoch trained, and no trial is pruned
    before `after` epochs (early scores are noisy: the later, the safer and the dearer)."""
    import optuna

    if name == "median":  # prune below the median of earlier trials after as many epochs
        return optuna.pruners.MedianPruner(n_startup_trials=max(1, min(5, trials // 4)), n_warmup_steps=after - 1)
    if name == "asha":  # asynchronous successive halving: rungs at after, 3 x after, 9 x after epochs, top third on
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=after, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=after, max_resource=max(after, max_epochs),
                                              reduction_factor=3)
    return optuna.pruners.NopPruner()


def storage_of(url: str):
    """An optuna storage for a journal file path (one file, safe for processes on a shared disk) or a URL."""
    import optuna

    if "://" in url:
        return optuna.storages.RDBStorage(url)
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock, JournalStorage

    return JournalStorage(JournalFileBackend(url, lock_obj=JournalFileOpenLock(url)))


def _steps_per_epoch(loop) -> int:
    """1 where the run validates by epochs; its optimizer steps per epoch where it validates by steps."""
    return max(1, loop.steps_per_epoch or 1) if loop.eval_every_steps else 1


def _trained(loop) -> int:
    return loop.global_step if loop.eval_every_steps else loop.epoch + 1


class OptunaPruning(Callback):
    """Reports `valid_metric` at each validation (step = epochs trained, or optimizer steps where the
    run validates every `eval_every_steps`) and requests a stop when pruned."""

    order = 20  # after early stopping: a stop it requests is its own

    def __init__(self, ref: TrialRef):
        self.ref = ref
        self._trial = None

    def on_fit_start(self, loop, control):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        unit = _steps_per_epoch(loop)  # step validations report steps: budgets in epochs become steps
        study = optuna.load_study(study_name=self.ref.study, storage=storage_of(self.ref.storage),
                                  pruner=make_pruner(self.ref.pruner, max_epochs=self.ref.max_epochs * unit,
                                                     trials=self.ref.trials, after=self.ref.after * unit))
        self._trial = optuna.trial.Trial(study, self.ref.trial_id)

    def on_validation_end(self, loop, control, metrics, score):
        if self._trial is None or self.ref.pruner == "none":
            return
        import warnings

        with warnings.catch_warnings():  # a resumed trial reports its epochs again: optuna keeps the first
            warnings.simplefilter("ignore")
            self._trial.report(float(score), _trained(loop))  # step: epochs (or optimizer steps) trained
        if self._trial.should_prune():
            at_step = f" step {loop.global_step}" if loop.eval_every_steps else ""
            control.pruned = (f"pruned at epoch {loop.epoch}{at_step} by the {self.ref.pruner} pruner "
                              f"({loop.config['valid_metric'].lower()} {float(score):.4f})")
            control.should_stop = True
