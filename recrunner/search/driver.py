"""A search: per (model, dataset) an Optuna study on disk that the sweep asks for trials.

    runs/<sweep>/search/study.journal     every study of the sweep (optuna's journal file), or --storage URL
    runs/<sweep>/<dataset>/<model>/<run>  each trial: a normal run (checkpoints, TensorBoard, resume)
    runs/<sweep>/final/<dataset>/<model>/<run>  --final-seeds K: the best trial's configuration, K seeds

Crash safety: a trial is asked for (and so stored, with its parameters) before its run starts,
and its run directory follows from its parameters. A command killed at any instant leaves each
trial either told (finished) or running in the study; the same command plans every running trial
again (the sweep record decides whether another live process owns it), its run resumes from
last.pth, and a run that finished before the kill is told without training. New trials are
asked only while a study has fewer than `trials`: none is lost, none runs twice.

Two sweep commands on one study: asks, tells and the reading of running trials to plan again are
under one lock (search/studies.py, so no trial is planned half-asked); the sampler is seeded by the
trial's number, so they never draw the same sequence; a run one leaves to the other (the same
values) tells both commands' trials when it ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..config.one_pass import unread_because
from ..core.layout import FINAL, SweepPaths
from ..training.callbacks import metric_bigger
from ..core.errors import ConfigError
from ..report.budget import save_asked
from ..run.record import RunRecord
from ..run.result import RunResult
from ..training.callbacks.pruning import TrialRef
from .studies import Studies
from ..sweep.grid import example_value
from ..sweep.space import SearchSpec

logger = logging.getLogger("recrunner")

METHODS = ("random", "tpe")
# Epochs before a trial can be pruned. BENCHMARKS.md (bench/bench_search.py, 200 replayed searches per
# setting): after 1 or 2 epochs ASHA prunes the slow starters that end best; after 5 it loses least.
PRUNE_AFTER = 5


@dataclass(frozen=True)
class SearchOptions:
    method: str = "tpe"          # random | tpe
    trials: int = 20             # per (model, dataset)
    prune: str = "none"          # none | median | asha | hyperband
    final_seeds: int = 0         # 0: off
    prune_after: int = PRUNE_AFTER  # epochs every trial trains before it can be pruned
    storage: str | None = None   # a database URL for a cluster; default: a journal file in the sweep folder
    seed: int = 0                # the samplers' seed


class Search:
    """Asks the studies for trials, plans them as sweep cells, and tells the studies how each ended."""

    def __init__(self, specs, planner, sweep_dir: Path, options: SearchOptions, selection=None):
        self.specs, self.plan_cell, self.options = list(specs), planner, options
        self.selection = selection  # sweep.selection.Selection: race the best trials over seeds, then finals
        self.sweep_dir = Path(sweep_dir)
        self.storage_url = options.storage or str(SweepPaths(self.sweep_dir).study_journal)
        self.studies = Studies(self.storage_url, options)  # Optuna's side: asks, tells, the lock (studies.py)
        self.epochs: dict[str, int] = {}
        self.directions: dict[str, str] = {}
        # cell id -> (spec, numbers of the trials its run answers: more than one when the sampler
        # drew a configuration again while its run was under way)
        self.cells: dict[str, tuple[SearchSpec, list[int]]] = {}
        self.finals_planned: set[str] = set()

    # ---------------------------------------------------------------- opening
    def check(self) -> None:
        """Plan an example cell of each study (nothing is written): a parameter the model does not
        have, a wrong type or an impossible value is a ConfigError before any trial."""
        for spec in self.specs:
            probe = self.plan_cell(spec, {name: example_value(d) for name, d in spec.space.items()}, spec.seeds[0], None)
            if probe.error:
                raise ConfigError(f"the search space of {spec.model} on {spec.dataset}: {probe.error}")
            self.epochs[spec.study_name] = int(probe.config["epochs"])
            self.directions[spec.study_name] = "maximize" if metric_bigger(
                str(probe.config["valid_metric"]).lower()) else "minimize"

    def open(self) -> list:
        """Create or load every study; the trials a killed command left running, planned again (a trial
        whose run had ended is told how, and planned too: the sweep then finds its run finished)."""
        if not self.epochs:
            self.check()
        again = []
        for spec in self.specs:
            self.studies.open(spec, self.directions[spec.study_name], self.epochs[spec.study_name])
            for trial in self.studies.running(spec):
                item = self._plan_trial(spec, trial)
                record = RunRecord.read(item.run_dir) if item.run_dir else None
                if record is not None and record.status.finished:
                    self.tell(item.cell_id, RunResult.from_record(item.run_dir, record))
                again.append(item)
        self._save_asked()
        return again

    # ---------------------------------------------------------------- asking
    def more(self, wanted: int) -> list:
        """Up to `wanted` new cells: trials while a study's budget lasts, then its final seeds."""
        cells = []
        progress = True
        while len(cells) < wanted and progress:
            progress = False
            for spec in self.specs:  # round-robin: every study advances at the same pace
                if len(cells) >= wanted:
                    break
                trial = self.studies.ask(spec, self._budget(spec))
                if trial is not None:
                    cells.append(self._plan_trial(spec, trial))
                    progress = True
        if cells:
            self._save_asked()
        if len(cells) < wanted:
            cells += self._finals() if self.selection is None else self._races()
        return cells

    def exhausted(self) -> bool:
        """No trial left to ask, and no final seeds (or race runs) left to plan."""
        for spec in self.specs:
            if len(self.studies.trials(spec.study_name)) < self._budget(spec):
                return False
            if self.selection is not None and not self.selection.over(spec.study_name):
                return False
            if self.selection is None and self.options.final_seeds and spec.study_name not in self.finals_planned:
                return False
        return True

    def _save_asked(self) -> None:
        """search/trials.json: each study's trials asked so far (report/budget.py), under the ask lock, so
        two sweep processes on one study write what it holds in turn."""
        with self.studies.lock():
            save_asked(self.sweep_dir, {spec.study_name: {"model": spec.model, "dataset": spec.dataset,
                                                          **self.studies.asked(spec.study_name)} for spec in self.specs})

    def _budget(self, spec) -> int:
        """The trials the spec's study gets: the search's, or 1 where the model has nothing to tune."""
        return spec.trials or self.options.trials

    def _ended(self, spec) -> list | None:
        """The study's trials once all are asked and have ended, else None."""
        trials = self.studies.trials(spec.study_name)
        ended = len(trials) >= self._budget(spec) and all(t.state.name in ("COMPLETE", "PRUNED", "FAIL") for t in trials)
        return trials if ended else None

    def _races(self) -> list:
        """Racing: each study whose trials have all ended races its best (sweep/selection.py)."""
        for spec in self.specs:
            trials = self._ended(spec)
            if trials is None or spec.study_name in self.selection.groups:
                continue
            firsts = {}
            for t in trials:
                if t.state.name == "COMPLETE":
                    item = self.plan_cell(spec, dict(t.params), spec.seeds[0], {"role": "trial", "trial": t.number})
                    firsts.setdefault(item.cell_id, item)
            self.selection.add(spec.study_name, [item for item in firsts.values() if item.cell_id], spec.seeds)
        return self.selection.more()

    def _finals(self) -> list:
        cells = []
        if not self.options.final_seeds:
            return cells
        for spec in self.specs:
            trials = self._ended(spec)
            if spec.study_name in self.finals_planned or trials is None:
                continue
            self.finals_planned.add(spec.study_name)
            if not any(t.state.name == "COMPLETE" for t in trials):
                logger.warning(f"{spec.study_name}: no trial completed, so no final seeds")
                continue
            best = self.studies[spec.study_name].best_trial  # chosen on validation: the value each trial was told
            for seed in spec.seeds[:self.options.final_seeds]:
                cells.append(self.plan_cell(spec, dict(best.params), seed, {"role": FINAL, "trial": best.number}))
        return cells

    def _plan_trial(self, spec: SearchSpec, trial):
        ref = TrialRef(storage=self.storage_url, study=spec.study_name, trial_id=trial._trial_id, number=trial.number,
                       pruner=self.options.prune, max_epochs=self.epochs.get(spec.study_name, 1),
                       trials=self.options.trials, after=self.options.prune_after)
        item = self.plan_cell(spec, dict(trial.params), spec.seeds[0], {"role": "trial", "trial": trial.number}, ref)
        if item.error:  # RecBole refused these values (e.g. a hidden size its heads do not divide)
            self.studies.fail(spec.study_name, trial.number)
        else:
            self.cells.setdefault(item.cell_id, (spec, []))[1].append(trial.number)
        return item

    def budget_left(self) -> int:
        """Trials not asked yet and final runs not planned yet, over every study."""
        left = 0
        for spec in self.specs:
            left += max(0, self._budget(spec) - len(self.studies.trials(spec.study_name)))
            if self.selection is not None:
                waiting = spec.study_name not in self.selection.groups
                left += waiting * self.selection.options.top * (self.selection.options.seeds - 1)
            elif spec.study_name not in self.finals_planned:
                left += min(self.options.final_seeds, len(spec.seeds))
        return left

    # ---------------------------------------------------------------- telling
    def tell(self, cell_id: str, result: RunResult) -> None:
        """Tell each trial the run answers how it ended (a final seed's run tells nothing): this
        process's trials of the cell, and any other process's still running with the same values."""
        spec, numbers = self.cells.get(cell_id, (None, []))
        if spec is not None:
            self.studies.tell(spec.study_name, numbers, result)

    def left_out(self) -> list[str]:
        """A line per study that left settings out of its space, as its model does not read them (config/one_pass.py)."""
        return [f"{spec.study_name}: {_space_text(spec)}" for spec in self.specs if spec.unread]

    def describe(self) -> list[str]:
        """The space and the budget, for --dry-run."""
        after = (f" after {self.options.prune_after} epoch" + "s" * (self.options.prune_after != 1)
                 if self.options.prune != "none" else "")
        lines = [f"search: {self.options.method}, {self.options.trials} trials per model and dataset, pruning "
                 f"{self.options.prune}{after}, final seeds {self.options.final_seeds or 'off'}; study: "
                 f"{self.storage_url}"]
        lines += [f"  {spec.study_name}: {_space_text(spec)}" for spec in self.specs]
        if self.selection is not None:
            from ..sweep.selection import describe

            lines.append(describe(self.selection.options))
        return lines


def _space_text(spec: SearchSpec) -> str:
    """A study's space in words, and what it left out (pure)."""
    space = ", ".join(f"{name} {distribution.describe()}" for name, distribution in spec.space.items())
    return (space or "nothing to tune, 1 trial") + (
        f" ({spec.model} is {unread_because(spec.model)}: {', '.join(spec.unread)} left out)" if spec.unread else "")
