"""A search's Optuna studies, one per (model, dataset), in one storage that every command on the sweep shares.

    storage   runs/<sweep>/search/study.journal (a journal file, with an ask lock) or a --storage URL
    ask       a new trial while a study's budget lasts; the sampler is seeded by the trial's number
    running   the trials a killed command left running, read under the ask lock
    tell      how a run ended, to every trial it answers

Asks, tells and the reading of running trials happen under one lock (`lock`), so two commands on one
study never ask more than its budget, never plan a trial half-asked, and never tell one twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from ..run.record import RunRecord, Status
from ..run.result import RunResult
from ..training.callbacks.pruning import make_pruner, storage_of

logger = logging.getLogger("recrunner")


def make_sampler(method: str, seed: int, trials: int):
    """Optuna's sampler for a `--search` method; TPE samples at random for its first third of the
    trials (2 to 10) before it models the space."""
    import optuna

    if method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, trials // 3)))


class Studies:
    """The studies of one search, by study name (`studies[name]` is optuna's Study)."""

    def __init__(self, storage_url: str, options):
        self.storage_url, self.options = storage_url, options
        self.journal = "://" not in storage_url  # a journal file (with an ask lock), not a database
        self._by_name: dict[str, object] = {}

    def __getitem__(self, name: str):
        return self._by_name[name]

    def open(self, spec, direction: str, epochs: int):
        """Create or load the spec's study (optuna's WARNING level: its INFO lines are per trial)."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if self.journal:
            Path(self.storage_url).parent.mkdir(parents=True, exist_ok=True)
        options = self.options
        self._by_name[spec.study_name] = optuna.create_study(
            study_name=spec.study_name, storage=storage_of(self.storage_url), load_if_exists=True, direction=direction,
            sampler=make_sampler(options.method, options.seed, options.trials),  # reseeded per ask
            pruner=make_pruner(options.prune, max_epochs=epochs, trials=options.trials, after=options.prune_after))
        return self._by_name[spec.study_name]

    def lock(self):
        """The lock two sweep processes on one journal take to ask or tell (a database has its own)."""
        from ..core.files import file_lock

        return file_lock(Path(self.storage_url + ".ask.lock")) if self.journal else contextlib.nullcontext()

    def trials(self, name: str) -> list:
        return self._by_name[name].get_trials(deepcopy=False)

    def running(self, spec) -> list:
        """The study's running trials, read under the ask lock: another command's trial being asked
        right now has no parameters yet (planned without them, it ran the defaults and told the
        trial their score). A journal's trial left without all its parameters was being asked by a
        command that died: it can never run, so it is told failed (a database has no ask lock: such
        a trial is left alone)."""
        import optuna

        study, whole = self[spec.study_name], []
        with self.lock():
            for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
                if set(spec.space) <= set(trial.params):
                    whole.append(trial)
                elif self.journal:
                    logger.warning(f"{spec.study_name}: trial {trial.number} was never given all its values "
                                   "(its command died while asking); told failed")
                    study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        return whole

    def ask(self, spec, budget: int | None = None):
        """A new trial of the spec's study while its `budget` of trials (default: the search's) lasts, else
        None. The count and the ask are under one lock, so two sweep processes on one study never ask more
        than the budget; the sampler is seeded by the trial's number, so they never draw the same sequence,
        and trial n draws from the same seed however many processes ask (and after a resume)."""
        study, options = self[spec.study_name], self.options
        with self.lock():
            asked = len(study.get_trials(deepcopy=False))
            if asked >= (budget or options.trials):
                return None
            study.sampler = make_sampler(options.method, options.seed + asked, options.trials)
            number = study.ask({name: d.to_optuna() for name, d in spec.space.items()}).number
        return study.get_trials(deepcopy=False)[number]

    def asked(self, name: str) -> dict:
        """{"asked": trials asked so far, "configurations": the distinct values they drew} (a trial being
        asked right now, without its values yet, counts as asked)."""
        trials = self.trials(name)
        drawn = {json.dumps(t.params, sort_keys=True, default=str) for t in trials if t.params}
        return {"asked": len(trials), "configurations": len(drawn)}

    def fail(self, name: str, number: int) -> None:
        import optuna

        self[name].tell(number, state=optuna.trial.TrialState.FAIL)

    def tell(self, name: str, numbers: list[int], result: RunResult) -> None:
        """How a run ended, to the trials `numbers` and to any other process's trial still running with the
        same values (it left the run to this one, and may have ended since)."""
        study = self[name]
        with self.lock():
            trials = study.get_trials(deepcopy=False)
            values = trials[numbers[0]].params
            same = [t.number for t in trials if t.number not in numbers and t.params == values
                    and t.state.name == "RUNNING"]
            for number in (*numbers, *same):
                _tell(study, number, result)


def _tell(study, number: int, result: RunResult) -> None:
    import optuna

    if study.get_trials(deepcopy=False)[number].state != optuna.trial.TrialState.RUNNING:
        return
    status = result.status
    if status is Status.OK:
        record = RunRecord.read(result.run_dir) if result.run_dir else None
        score = record.best_valid_score if record else None
        if score is None:
            study.tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(number, float(score))
    elif status is Status.PRUNED:
        study.tell(number, state=optuna.trial.TrialState.PRUNED)
    elif status is Status.FAILED:
        study.tell(number, state=optuna.trial.TrialState.FAIL)
    # interrupted: the trial stays running; the same command resumes it
