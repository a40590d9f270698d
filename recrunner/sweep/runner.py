"""The sweep loop: plan the cells, claim them in the record, run them, keep the tables current.

    summary = run_sweep("bench", expand(load_grid(path)), workspace, SweepOptions(workers=2))

Every cell is validated (`prepare`) before anything runs; a cell whose configuration is
invalid fails alone with its reason. Re-running the same sweep skips finished cells, resumes
interrupted ones from their last.pth, retries failed ones up to `retries` times in all, and
reclaims cells whose worker died. results.csv and results.md are rewritten as cells finish, at a
rate that keeps their cost under 2% of the sweep's time, and at its end (sweep/tables.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..core.errors import RunInterrupted, is_usage_error
from ..run.experiment import Workspace
from ..core.layout import OutputPaths
from ..run.record import RunRecord, Status
from ..run.result import RunResult
from .console import cell_line, progress_line, refusal_line, summary_line
from .executors import cell_threads, executor_for
from .grid import swept_parameters
from .memory import SAMPLE_EVERY, Admission, memory_kind, recorded_peak_mb
from .planning import PlannedCell, dispatch_order
from .record import SweepRecord
from .tables import SweepTables
from .worker import Task


@dataclass(frozen=True)
class SweepOptions:
    workers: int = 1
    backend: str = "local"            # local | ray
    ray_address: str | None = None
    gpus: tuple[int, ...] = ()
    nproc: int = 1                    # processes per cell (--nproc): with --gpus, one GPU each
    threads: int | None = None        # CPU threads per cell; default: cores // workers
    retries: int = 0
    restart: bool = False
    stale_after: float = 300.0        # seconds without a heartbeat before a running cell is reclaimed
    heartbeat_every: float = 30.0
    console: bool = True              # in-process runs log to the console
    started: float | None = None      # time.perf_counter() when the command started: the summary counts start-up


@dataclass
class SweepSummary:
    name: str
    sweep_dir: Path
    counts: dict = field(default_factory=dict)   # ok, failed, skipped, busy, interrupted, repeated (a search's draw)
    seconds: float = 0.0
    results_md: Path | None = None
    interrupted: bool = False
    usage_failures: int = 0  # failed cells whose reason is bad input (errors.is_usage_error)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return RunInterrupted.exit_code
        if not self.counts.get("failed"):
            return 0
        return 2 if self.usage_failures == self.counts["failed"] else 1  # only bad input: a usage error

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def count_failure(self, error: str | None) -> None:
        self.count("failed")
        self.usage_failures += is_usage_error(error)


def run_sweep(name: str, planned: list[PlannedCell], workspace: Workspace, options: SweepOptions,
              out: Callable[[str], None] = print, search=None) -> SweepSummary:
    """Run the planned cells; with `search` (recrunner.search.Search), also the trials it asks for."""
    return _Sweep(name, planned, workspace, options, out, search).run()


class _Sweep:
    def __init__(self, name, planned, workspace, options, out, search=None):
        self.name, self.planned, self.workspace, self.options, self.out = name, planned, workspace, options, out
        self.search = search
        self.paths = OutputPaths(workspace.output_dir).sweep(name)
        self.sweep_dir = self.paths.sweep_dir
        self.record = SweepRecord(self.paths.record)
        self.swept = swept_parameters(p.cell for p in planned)
        self.by_id = {p.cell_id: p for p in planned if p.cell_id}
        self.summary = SweepSummary(name, self.sweep_dir)
        self.durations: list[float] = []
        self.warned: set[str] = set()  # protocol warnings already shown: once per sweep, not per cell
        self.total = len(planned)
        self.tables = SweepTables(name, self.paths, workspace.output_dir)
        self.admission = Admission(lambda cell_id: memory_kind(self.by_id[cell_id].cell), out)

    # ---------------------------------------------------------------- the loop
    def run(self) -> SweepSummary:
        started = self.options.started or time.perf_counter()
        self.sweep_dir.mkdir(parents=True, exist_ok=True)  # a search's first cell may come later
        if self.search is not None:
            self._add(self.search.open())  # trials a killed command left running
            self.total = len(self.planned) + self.search.budget_left()
        self._register_cells()
        queue = self._cells_to_run()
        self._write_tables()
        if queue or (self.search is not None and not self.search.exhausted()):  # nothing to run: no worker server
            self._run_queue(queue)
        self.summary.seconds = time.perf_counter() - started
        self.out(summary_line(self.summary))
        for warning in self.tables.tuning_warnings:
            self.out(f"warning: {warning}")
        return self.summary

    def _run_queue(self, queue):
        executor = executor_for(self.options)
        last_beat = time.monotonic()
        try:
            while queue or executor.running() or self._search_has_more():
                dispatched = 0
                while executor.free_slots() > 0 and not self.summary.interrupted:
                    if not queue:
                        queue += self._ask(executor.free_slots())
                    index = self.admission.next(queue, executor.running()) if queue else None
                    if index is None:
                        break  # nothing queued, or nothing that fits in memory beside the running cells
                    self._dispatch(queue.pop(index), executor)
                    dispatched += 1
                if dispatched:  # beside which cells each one starts, before any can end
                    self.admission.together(executor.running(), executor.gpus())
                finished = executor.wait(timeout=min(SAMPLE_EVERY, self.options.heartbeat_every))
                self.admission.watch(executor.resident(), executor.running(), executor.gpus())
                for cell_id, result in finished:
                    self._finish(cell_id, result, queue)
                if not (dispatched or finished or queue or executor.running()):
                    break  # the search has nothing to give and nothing runs here (trials owned elsewhere)
                if time.monotonic() - last_beat >= self.options.heartbeat_every:
                    for cell_id in executor.running():
                        self.record.append(cell_id, "heartbeat")
                    last_beat = time.monotonic()
                if self.summary.interrupted:
                    break
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM's RunInterrupted
            self.summary.interrupted = True
            running = executor.running()
            executor.stop()
            for cell_id in running:
                self.record.append(cell_id, Status.INTERRUPTED)
        finally:
            executor.stop()
            self._write_tables()

    # ---------------------------------------------------------------- steps
    def _register_cells(self):
        if self.options.restart and self.record.path.exists():
            self.record.path.unlink()
        known = self.record.states()
        for item in self.planned:
            if item.cell_id and item.cell_id not in known:
                self.record.append(item.cell_id, Status.PENDING)

    def _cells_to_run(self) -> list[str]:
        queue, known = [], self.record.states()
        for item in self.planned:
            if item.error:
                self.summary.count_failure(item.error)
                self.out(cell_line(item, RunResult.failed(item.error)))
                continue
            previous = None if self.options.restart else RunRecord.read(item.run_dir)
            if previous is not None and previous.status.finished:
                self.summary.count("skipped")
                self.admission.book.learn(memory_kind(item.cell), recorded_peak_mb(previous.device))
                if item.cell_id in known and not known[item.cell_id].state.finished:
                    self.record.append(item.cell_id, previous.status)  # killed between the run's end and its line
                continue
            queue.append((item.cell_id, item.data_key))
        return dispatch_order(queue)

    def _dispatch(self, cell_id, executor):
        def finished_on_disk() -> bool:  # read under the record's lock
            record = RunRecord.read(self.by_id[cell_id].run_dir)
            return record is not None and record.status.finished

        decision = self.record.claim(cell_id, stale_after=self.options.stale_after, retries=self.options.retries,
                                     finished_on_disk=finished_on_disk)
        if decision not in ("run", "reclaim"):
            error = self.record.states()[cell_id].error if decision == "failed" else None
            if decision == "failed":
                self.summary.count_failure(error)
            else:
                self.summary.count("busy" if decision == "busy" else "skipped")
            if refusal_line(cell_id, decision, error):
                self.out(refusal_line(cell_id, decision, error))
            return
        if decision == "reclaim":
            self.out(f"reclaim {cell_id}: its worker is gone; resuming from its last.pth")
        item = self.by_id[cell_id]
        executor.submit(cell_id, Task(cell=cell_id, experiment=item.experiment, workspace=self.workspace,
                                      threads=cell_threads(self.options), restart=self.options.restart, trial=item.trial))

    def _finish(self, cell_id, result, queue):
        alone = self.admission.ended(cell_id, result.error, result.device)
        if alone:  # the OOM killer's SIGKILL beside other cells: not the cell's failure
            self.record.append(cell_id, Status.INTERRUPTED, error=alone, seconds=result.seconds)
            self.out(f"alone   {cell_id}: {alone}")
            queue.insert(0, cell_id)
            return
        status = result.status
        self.record.append(cell_id, status, error=result.error, seconds=result.seconds)
        if status is Status.INTERRUPTED:
            self.summary.interrupted = True
            self.summary.count("interrupted")
            return
        failures = self.record.states()[cell_id].failures
        if status is Status.FAILED and failures <= self.options.retries and not is_usage_error(result.error):
            self.out(f"retry   {cell_id} after: {result.error} (failure {failures} of {self.options.retries + 1} allowed)")
            queue.append(cell_id)
            return
        if self.search is not None:
            self.search.tell(cell_id, result.at(self.by_id[cell_id].run_dir))
        if status is Status.FAILED:
            self.summary.count_failure(result.error)
        else:
            self.summary.count("skipped" if result.skipped else status.value)
        if not result.skipped:
            self.durations.append(result.seconds or 0.0)
        self.tables.forget(self.by_id[cell_id].run_dir)
        if self.tables.due():
            self._write_tables(full=False)  # each run has added its own HParams row
        self.out(progress_line(self.by_id[cell_id], result, sum(self.summary.counts.values()), self.total,
                               self.durations, self.options.workers, self.warned))

    def _search_has_more(self) -> bool:
        return self.search is not None and not self.summary.interrupted and not self.search.exhausted()

    def _ask(self, wanted: int) -> list[str]:
        """New cells from the search (trials, then final seeds), registered and ready to dispatch; empty
        only when the search has nothing to give now. A trial whose configuration has a finished run
        (the sampler drew it again) or that failed before its run is told at once, and asked past."""
        ready: list[str] = []
        while not ready and self.search is not None and not self.summary.interrupted:
            items = self.search.more(wanted)
            if not items:
                break
            ready = self._take(items)
        return ready

    def _take(self, items) -> list[str]:
        under_way = {item.cell_id for item in items if item.cell_id in self.by_id}  # queued or running here
        self._add(items)
        ready = []
        for item in items:
            record = None if item.error else RunRecord.read(item.run_dir)
            if item.error:  # the search has told its study
                self.summary.count_failure(item.error)
                self.out(cell_line(item, RunResult.failed(item.error)))
            elif record is not None and record.status.finished:  # drawn again after its run ended
                self.summary.count("repeated")
                self.search.tell(item.cell_id, RunResult.from_record(item.run_dir, record, skipped=True))
            elif item.cell_id in under_way:  # drawn again while its run is under way: its end tells both
                self.summary.count("repeated")
            else:
                self.record.append(item.cell_id, Status.PENDING)
                ready.append(item.cell_id)
                under_way.add(item.cell_id)  # the same cell later in this batch is a repeat
        return ready

    def _add(self, items) -> None:
        for item in items:
            if item.cell_id in self.by_id:
                continue
            self.planned.append(item)
            if item.cell_id:
                self.by_id[item.cell_id] = item
        self.swept = swept_parameters(p.cell for p in self.planned)

    # ---------------------------------------------------------------- helpers
    def _write_tables(self, full: bool = True):
        self.tables.write(self.planned, self.swept, full=full)
        self.summary.results_md = self.tables.results_md
