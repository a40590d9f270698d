"""Selection by racing: the best configurations of a (model, dataset) re-run with more seeds until
a paired test over validation users tells them apart (report/racing.py decides; this plans the runs).

    runs/<sweep>/select/<dataset>/<model>/<run>   a contender's seed runs (role "select")
    runs/<sweep>/final/<dataset>/<model>/<run>    the pick's final seeds it has not run yet (role "final")
    runs/<sweep>/selection.json                   the races: contenders, seed means, why each was dropped

A group (a grid's cells of one model and dataset, or a search's study) races once every first
run has ended: its `top` configurations by validation score run the next seed, round by round.
The race is a pure function of the finished runs' validation scores (best score and
valid_per_user.npz; never test), recomputed whenever the sweep asks for cells. So a command killed
at any instant, run again, plans exactly the runs still missing; a run it already finished is found
finished, and a run another sweep process holds is left to it (the sweep record's claim).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.layout import FINAL, SELECT, RunPaths
from ..report.racing import ALPHA, Race, Run, race, save_races
from ..run import per_user
from ..run.record import RunRecord, Status
from ..training.callbacks import metric_bigger

logger = logging.getLogger("recrunner")


@dataclass(frozen=True)
class SelectOptions:
    top: int = 0                  # contenders per (model, dataset); 0: no racing
    seeds: int = 3                # the most seeds a contender gets, its first included
    final_seeds: int = 0          # seeds the pick's test numbers come from; 0: `seeds`
    alpha: float = ALPHA


@dataclass
class Group:
    """One race: the first runs of a (model, dataset) and the seeds contenders run in order."""

    name: str                     # <dataset>/<model>
    firsts: dict                  # key -> PlannedCell of the first seed (a grid cell, a search trial)
    seeds: tuple                  # seeds[0]: the first runs' seed; the race runs the first `seeds` of them
    metric: str
    bigger: bool
    race: Race | None = None
    pick: str | None = None


class Selection:
    """Races each group once it is added; `more` gives the runs the races need now, then the pick's
    missing final seeds. `planner(first_cell, seed, role)` plans a run of the first cell's
    configuration with another seed, in the select/ (role "select") or final/ folder."""

    def __init__(self, planner: Callable, options: SelectOptions, sweep_dir: Path):
        self.plan, self.options = planner, options
        self.sweep_dir = Path(sweep_dir)
        self.groups: dict[str, Group] = {}
        self.cells: dict = {}         # (group, key, seed, role) -> PlannedCell
        self.given: set = set()       # cell ids handed to the sweep by this process
        self.ended: dict = {}         # run dir -> Run of a run that has ended (it no longer changes)
        self.written: dict = {}       # selection.json as this process last wrote it

    def add(self, name: str, firsts: list, seeds: tuple) -> None:
        """A group whose first runs have all ended (failed and pruned ones are no contenders); with none,
        its race is over at once, with no pick."""
        if name in self.groups:
            return
        if not firsts:
            self.groups[name] = Group(name, {}, tuple(seeds), "", True)
            return
        config = firsts[0].config
        metric = str(config["valid_metric"]).lower()
        self.groups[name] = Group(name, {item.cell_id: item for item in firsts}, tuple(seeds), metric,
                                  metric_bigger(metric))

    def more(self) -> list:
        """Runs the races need now and the picks' missing final seeds, not handed out yet."""
        cells = []
        for group in self.groups.values():
            if not _decided(group):
                self._advance(group)
            needs = group.race.wanted if group.pick is None else self._finals(group)
            for key, seed, role in needs:
                item = self._cell(group, key, seed, role)
                if item.cell_id and item.cell_id not in self.given and not _finished(item):
                    self.given.add(item.cell_id)
                    cells.append(item)
        return cells  # all of them: a race's round is decided when its last run ends

    def over(self, name: str) -> bool:
        """The group's race is decided and its final seeds have all ended (at once when no configuration
        finished: nothing to race)."""
        group = self.groups.get(name)
        if group is None:
            return False
        if not _decided(group):
            self._advance(group)
        if not _decided(group):
            return False
        return group.pick is None or all(_finished(self._cell(group, k, s, r)) for k, s, r in self._finals(group))

    def left(self) -> int:
        """An upper bound on the runs still to plan: for the progress line's count."""
        return sum(0 if _decided(g) else self.options.top * (self.options.seeds - 1) for g in self.groups.values())

    # ---------------------------------------------------------------- the race
    def _advance(self, group: Group) -> None:
        first = {}
        for key, item in group.firsts.items():
            record = RunRecord.read(item.run_dir)
            if record is not None and record.status is Status.OK and record.best_valid_score is not None:
                first[key] = record.best_valid_score
        runs, seeds = {}, group.seeds[:self.options.seeds]
        contenders = sorted(first, key=lambda k: first[k], reverse=group.bigger)[:self.options.top]  # as race() orders
        for key in first:
            for seed in seeds if key in contenders else seeds[:1]:  # only contenders run more seeds
                item = group.firsts[key] if seed == group.seeds[0] else self._cell(group, key, seed, SELECT)
                run = self._run(item.run_dir, group.metric) if item.run_dir else Run(None)
                if run is not None:
                    runs[(key, seed)] = run
        if not first:
            logger.warning(f"{group.name}: no configuration finished, so no race")
        labels = {key: self._label(group, key) for key in first}
        group.race = race(first, runs, seeds, self.options.top, group.metric, group.bigger, self.options.alpha, labels)
        group.race.wanted = [(key, seed, SELECT) for key, seed in group.race.wanted]
        group.pick = group.race.pick
        self._write()  # the race as far as it has gone: also its decision after its last runs

    def _run(self, run_dir: Path, metric: str) -> Run | None:
        """validation_run, kept once the run has ended (it no longer changes)."""
        if run_dir not in self.ended:
            run = validation_run(run_dir, metric)
            if run is None:
                return None
            self.ended[run_dir] = run
        return self.ended[run_dir]

    def _finals(self, group: Group) -> list:
        """The pick's final seeds that no first or select run of it covers."""
        count = self.options.final_seeds or self.options.seeds
        ran = len(next(s for s in group.race.standings if s.key == group.pick).scores)
        return [(group.pick, seed, FINAL) for seed in group.seeds[ran:count]]

    def _cell(self, group: Group, key: str, seed: int, role: str):
        index = (group.name, key, seed, role)
        if index not in self.cells:
            self.cells[index] = self.plan(group.firsts[key], seed, role)
        return self.cells[index]

    def _write(self) -> None:
        """selection.json (report/racing.py): every race as far as it has gone."""
        races = {name: self._summary(group) for name, group in self.groups.items()
                 if group.race is not None and group.race.standings}
        if races and races != self.written:
            save_races(self.sweep_dir, races)
            self.written = races

    def _summary(self, group: Group) -> dict:
        model, dataset = group.firsts[next(iter(group.firsts))].cell.model, group.name.split("/")[0]
        summary = {"model": model, "dataset": dataset, "seeds": list(group.seeds[:self.options.seeds]),
                   "top": self.options.top, "metric": group.metric, "pick": group.pick,
                   "final_seeds": list(group.seeds[:self.options.final_seeds or self.options.seeds]),
                   "standings": [{"key": s.key, "label": self._label(group, s.key), "params": _params(group.firsts[s.key]),
                                  "first": s.first, "scores": s.scores, "mean": s.mean, "state": s.state,
                                  "reason": s.reason} for s in group.race.standings]}
        if group.pick is not None:
            seeds = summary["final_seeds"]
            ran = len(next(s for s in group.race.standings if s.key == group.pick).scores)
            summary["pick_runs"] = [group.firsts[group.pick].cell_id] + [
                self._cell(group, group.pick, seed, SELECT if i < ran else FINAL).cell_id
                for i, seed in enumerate(seeds) if i > 0]
        return summary

    @staticmethod
    def _label(group: Group, key: str) -> str:
        """The configuration in words: the parameters in which the group's contenders differ."""
        params = [_params(item) for item in group.firsts.values()]
        varying = [name for name in params[0] if len({json.dumps(p.get(name)) for p in params}) > 1]
        return ", ".join(f"{name}={_params(group.firsts[key]).get(name)}" for name in varying) or key


def describe(options: SelectOptions) -> str:
    """Racing's settings in words, for --dry-run."""
    return (f"racing: the {options.top} best configurations of each model and dataset on validation, up to "
            f"{options.seeds} seeds each; the pick's test numbers over {options.final_seeds or options.seeds} seeds")


def _decided(group: Group) -> bool:
    """The group's race has picked, or has nothing left to race."""
    return group.race is not None and group.race.over


def validation_run(run_dir: Path, metric: str) -> Run | None:
    """What a race reads of a run once it has ended: its per-user mean of `metric` where it kept
    per-user validation values (unrounded), else its best validation score; Run(None) when it
    failed or was pruned; None while it is under way. Never a test number."""
    record = RunRecord.read(run_dir)
    if not _ended(record):
        return None
    if record.status is not Status.OK or record.best_valid_score is None:
        return Run(None)
    path = RunPaths(Path(run_dir)).valid_per_user
    users = per_user.load(path) if path.is_file() else {}
    return Run(float(users[metric].mean()) if metric in users else float(record.best_valid_score), users)


def _ended(record: RunRecord | None) -> bool:
    """The run has ended: trained and tested, pruned, or failed (a failed contender is dropped)."""
    return record is not None and (record.status.finished or record.status is Status.FAILED)


def _finished(item) -> bool:
    return _ended(RunRecord.read(item.run_dir) if item.run_dir else None)


def _params(item) -> dict:
    return {k: v for k, v in item.cell.params.items() if k != "seed"}


class GridRacing:
    """What a grid sweep with racing hands the sweep loop (the `search` of run_sweep): once every cell
    of a (model, dataset) has ended, its race's runs, then the pick's missing final seeds."""

    def __init__(self, planned: list, selection: Selection, seeds: int):
        self.selection, self.seeds = selection, seeds
        self.groups: dict[str, list] = {}
        for item in planned:
            if item.cell_id:
                self.groups.setdefault(f"{item.cell.dataset}/{item.cell.model}", []).append(item)

    def open(self) -> list:
        return []

    def more(self, wanted: int) -> list:
        for name, cells in self.groups.items():
            if name not in self.selection.groups and all(_finished(item) for item in cells):
                first = int(cells[0].config["seed"])
                self.selection.add(name, cells, tuple(range(first, first + self.seeds)))  # race and final seeds
        return self.selection.more()

    def tell(self, cell_id, result) -> None:
        """A race reads its runs' records: nothing to tell."""

    def exhausted(self) -> bool:
        return all(self.selection.over(name) for name in self.groups)

    def budget_left(self) -> int:
        waiting = sum(name not in self.selection.groups for name in self.groups)
        return self.selection.left() + waiting * self.selection.options.top * (self.selection.options.seeds - 1)

    def describe(self) -> list[str]:
        return [describe(self.selection.options)]


def race_grid(planned: list, workspace, name: str, options: SelectOptions, command: str | None = None) -> GridRacing:
    """Racing for a grid sweep: contenders' seed runs in runs/<name>/select/, the pick's missing
    final seeds in runs/<name>/final/."""
    from .grid import Cell, swept_parameters
    from .planning import plan_one

    id_keys = (*swept_parameters(item.cell for item in planned), "seed")

    def planner(first, seed, role):
        cell = Cell(first.cell.model, first.cell.dataset, {**first.cell.params, "seed": seed},
                    swept=(*first.cell.swept, "seed"))
        return plan_one(cell, workspace, f"{name}/{role}", id_keys, command, search={"role": role, "of": first.cell_id})

    return GridRacing(planned, Selection(planner, options, workspace.output_dir / name),
                      max(options.seeds, options.final_seeds))
