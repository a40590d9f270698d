"""A sweep command's tables: results.csv and results.md from each cell's record (and the HParams
columns of every run under the output folder), rewritten as cells finish and at the end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..core.layout import SweepPaths
from ..report.budget import budgets, unequal
from ..report.racing import load_races, picked_runs
from ..run.hparams_columns import write_experiment
from ..run.record import RunRecord
from .results import cell_row, write_results


@dataclass
class TableSchedule:
    """When results.csv/.md are rewritten as cells finish: after a cell, unless the time since the
    last rewrite is under `1 / share` times what that rewrite took. Rewriting then costs at most
    about `share` of a sweep's time however many cells it has (a table of 800 rows takes 0.1 s to
    write, one of 50 takes 0.01 s: the tables then trail by at most 5 s and 0.5 s); the sweep's end
    and an interruption always rewrite them, and a killed sweep's next command does at its start."""

    share: float = 0.02
    last_end: float = float("-inf")
    cost: float = 0.0

    def due(self, now: float) -> bool:
        return (now - self.last_end) * self.share >= self.cost

    def written(self, started: float, ended: float) -> None:
        self.last_end, self.cost = ended, ended - started


class SweepTables:
    """The tables of one sweep command. Each cell's record is read once and again only when its cell
    finishes here (`forget`). A full write, at the command's start and end, also reads again every
    record not finished (another command on the same folder may have finished its cell, and the
    tables written last must match the disk) and rewrites the HParams columns of every run."""

    def __init__(self, name: str, paths: SweepPaths, output_dir: Path):
        self.name, self.paths, self.output_dir = name, paths, output_dir
        self.records: dict[Path, RunRecord | None] = {}  # each cell's metrics.json, read when it changes
        self.earlier: list[tuple[str, RunRecord, Path]] | None = None  # runs of earlier commands' other cells
        self.schedule = TableSchedule()
        self.tuning_warnings: list[str] = []  # models compared with less tuning (report/budget.py)
        self.results_md: Path | None = None

    def forget(self, run_dir: Path | None) -> None:
        self.records.pop(run_dir, None)

    def due(self) -> bool:
        return self.schedule.due(time.monotonic())

    def write(self, planned, swept, full: bool = True) -> None:
        """results.csv/.md; `full` at the start and the end (see the class), not as cells finish."""
        started = time.monotonic()
        if full:
            self.records = {d: r for d, r in self.records.items() if r is not None and r.status.finished}
        rows = [cell_row(p.cell_id or f"{p.cell.dataset}/{p.cell.model}/(invalid)", p.cell.model, p.cell.dataset,
                         dict(p.cell.params), swept, p.run_dir, error=p.error, record=self._record(p.run_dir))
                for p in planned]
        if self.earlier is None:
            self.earlier = self._earlier_runs(planned)
        rows += [cell_row(cell_id, record.model, record.dataset, record.params, swept, run_dir, record=record)
                 for cell_id, record, run_dir in self.earlier]
        picks = picked_runs(load_races(self.paths.sweep_dir))  # a race's pick, where one ran
        _, self.results_md = write_results(self.paths.sweep_dir, rows, swept, title=f"Sweep {self.name}", picks=picks)
        self.tuning_warnings = unequal(budgets(rows))
        if full:
            write_experiment(self.output_dir)
        self.schedule.written(started, time.monotonic())

    def _record(self, run_dir: Path | None) -> RunRecord | None:
        if run_dir is None:
            return None
        if run_dir not in self.records:
            self.records[run_dir] = RunRecord.read(run_dir)
        return self.records[run_dir]

    def _earlier_runs(self, planned) -> list[tuple[str, RunRecord, Path]]:
        """Runs in this sweep folder from earlier commands with other cells: their rows stay."""
        ours = {p.run_dir for p in planned if p.run_dir is not None}
        return [("/".join(path.parent.relative_to(self.paths.sweep_dir).parts), RunRecord.read(path) or RunRecord(),
                 path.parent)
                for path in self.paths.run_records() if path.parent not in ours]
