"""The HParams columns of every run under an output folder: `<output>/hparams-columns/`.

TensorBoard takes the HParams table's columns (the Experiment proto) from whichever run it finds
that has them, so they live once, in a run of their own, and hold the union of every run's
hparams and metrics (`write_experiment`), whatever models the runs are and whatever order they
were written in. Every run's end rewrites them, and a sweep's start and end.

What the columns depend on is kept as counts (`ColumnStats`: per hparam, each value and how many
runs have it; per metric, how many runs report it), beside each run's row:

    hparams-columns/events.out.tfevents.0000000000.hparams   the columns, for TensorBoard
    hparams-columns/index.json      {"runs": {run: row id}, "stats": ColumnStats}
    hparams-columns/rows/<id>.json  one run's row: its hparams and metric names

so a run's update reads that run's files and takes its old row out of the counts and its new one
in: its cost does not grow with the runs beside it (800 runs: 63 ms a run before, a few now).
A row file is named by its content and removed only once the index no longer names it, so a
kill at any instant leaves an index whose rows all exist; an unreadable index or row, or a call
without `changed`, reads every run again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..training.logging import tensorboard
from ..core.files import file_lock, write_text_atomic
from ..core.layout import HPARAMS_ROW, OutputPaths
from ..training.logging.tensorboard import hparam_value, plugin_summary, write_event_file

INDEX_FILE = "index.json"
ROWS_DIR = "rows"
_ALWAYS_SHOWN = ("model", "dataset", "status")


def columns_file(logdir: Path) -> Path:
    """Where the HParams columns of every run under `logdir` are (TensorBoard's run "hparams-columns")."""
    return OutputPaths(Path(logdir)).hparams_columns / HPARAMS_ROW


# ------------------------------------------------------------------------- the columns (pure)
@dataclass
class ColumnStats:
    """What the columns depend on, as counts, so that one run's row can be taken out or put in."""

    rows: int = 0
    values: dict[str, dict[str, list]] = field(default_factory=dict)  # hparam -> repr(value) -> [value, runs]
    metrics: dict[str, int] = field(default_factory=dict)            # metric tag -> runs

    @classmethod
    def of(cls, rows, metrics=()) -> ColumnStats:
        """The counts of these hparams rows (and of these metric tags, one list per run)."""
        stats = cls()
        for row in rows:
            stats.add({"hparams": row, "metrics": []})
        for tags in metrics:
            stats.add({"hparams": None, "metrics": tags})
        return stats

    def add(self, row: Mapping, sign: int = 1) -> None:
        """Count a run's row {"hparams": {...}, "metrics": [...]} in (`sign` -1: out)."""
        if row.get("hparams") is not None:
            self.rows += sign
            for key, raw in row["hparams"].items():
                value = hparam_value(raw)
                counted = self.values.setdefault(key, {}).setdefault(repr(value), [value, 0])
                counted[1] += sign
                if counted[1] <= 0:
                    del self.values[key][repr(value)]
                    if not self.values[key]:
                        del self.values[key]
        for tag in row.get("metrics") or ():
            self.metrics[tag] = self.metrics.get(tag, 0) + sign
            if self.metrics[tag] <= 0:
                del self.metrics[tag]

    def remove(self, row: Mapping) -> None:
        self.add(row, -1)

    def shown(self) -> list[str]:
        """The columns worth showing: model, dataset, every hparam whose value differs across the
        runs (or that only some runs have), seed and status; a lone run shows all it has."""
        keys = sorted(self.values)
        if self.rows > 1:
            def varies(key):
                counted = self.values[key]
                return len(counted) + (sum(runs for _, runs in counted.values()) < self.rows) > 1
            keys = [key for key in keys if key in _ALWAYS_SHOWN or varies(key)]
        return sorted(keys, key=_column_order)

    def summary(self):
        """The Experiment proto: the shown columns, typed by all their values, and the metric columns."""
        from tensorboard.plugins.hparams import metadata
        from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName

        infos = []
        for key in self.shown():
            seen = [value for value, _ in self.values[key].values()]
            if all(isinstance(v, bool) for v in seen):
                kind = "DATA_TYPE_BOOL"
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
                kind = "DATA_TYPE_FLOAT64"
            else:
                kind = "DATA_TYPE_STRING"
            # TensorBoard (2.21) orders columns by `differs`, then by name; the trial name comes first
            info = HParamInfo(name=key, type=DataType.Value(kind), differs=len(seen) > 1)
            if kind == "DATA_TYPE_STRING":
                info.domain_discrete.extend(sorted({str(v) for v in seen}))
            infos.append(info)
        tags = sorted(self.metrics, key=lambda t: (not t.startswith("Best"), t))
        experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=t)) for t in tags])
        return plugin_summary(metadata.EXPERIMENT_TAG, experiment=experiment)


def shown_columns(rows: list[Mapping]) -> list[str]:
    """The HParams columns worth showing for these hparams rows (`ColumnStats.shown`)."""
    return ColumnStats.of(rows).shown()


def _column_order(key: str):
    """model, dataset, the parameters (alphabetical), seed, status: the order written (TensorBoard 2.21
    re-sorts the columns by name, varied ones first; its first column, the trial name, says
    dataset/model/what the sweep varies)."""
    rank = {"model": 0, "dataset": 1, "seed": 3, "status": 4}.get(key, 2)
    return rank, key


# ------------------------------------------------------------------------- the folder
def write_experiment(logdir: Path, changed: Path | None = None) -> Path | None:
    """The columns for every run under `logdir` (`tensorboard --logdir <logdir>`); with `changed`
    (the run just written), only that run is read again. Under a lock shared by every process
    writing into `logdir`, so the last file written holds the columns of every run finished
    before it, and concurrent writers never collide."""
    with file_lock(Path(logdir) / ".hparams.lock"):
        return _Columns(Path(logdir)).update(changed)


class _Columns:
    """`hparams-columns/` of one output folder: the index, the row files, the columns file."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.folder = OutputPaths(logdir).hparams_columns
        self.rows_dir = self.folder / ROWS_DIR

    def update(self, changed: Path | None) -> Path | None:
        index = self._read_index() if changed is not None else None
        stale: list[str] = []
        if index is not None:
            stale = self._update(index, changed)
        if index is None or stale is None:  # no index, or a row it names is gone: read every run
            index, stale = self._rebuild(), None
        (self.logdir / HPARAMS_ROW).unlink(missing_ok=True)  # where older recrunner wrote them: a run "."
        (self.folder / "rows.json").unlink(missing_ok=True)   # the index of recrunner before 2026-11
        if not index["runs"]:
            return None
        stats = ColumnStats(**index["stats"])
        write_event_file(columns_file(self.logdir), [stats.summary()])
        write_text_atomic(self.folder / INDEX_FILE, json.dumps(index))
        if stale is None:  # after a rebuild, every row file the index does not name
            names = {f"{row_id}.json" for row_id in index["runs"].values()}
            stale = [name for name in os.listdir(self.rows_dir) if name not in names]
        for name in stale:
            (self.rows_dir / name).unlink(missing_ok=True)
        return columns_file(self.logdir)

    def _update(self, index: dict, changed: Path) -> list[str] | None:
        """Take the rows of deleted runs and the changed run's old row out, put its new one in;
        returns the row files no longer named (None: a row could not be read)."""
        stats = ColumnStats(**index["stats"])
        runs: dict[str, str] = index["runs"]
        fresh = {self._key(path): path for path in _session_files(self.logdir, Path(changed))}
        gone = self._gone(runs, fresh)
        stale = []
        for key in [*gone, *(key for key in fresh if key in runs)]:
            old = self._read_row(runs[key])
            if old is None:
                return None
            stats.remove(old)
            stale.append(f"{runs.pop(key)}.json")
        for key, path in fresh.items():
            row = _row(path)
            runs[key] = self._write_row(key, row)
            stats.add(row)
        current = {f"{runs[key]}.json" for key in fresh}  # a row unchanged keeps its file
        stale = [name for name in stale if name not in current]
        index["stats"] = vars(stats)
        return stale

    def _gone(self, runs: dict[str, str], fresh) -> list[str]:
        """The runs of the index whose directory is gone (deleted, or set aside by a restart): one
        listing per folder of runs rather than a stat per run."""
        listed: dict[str, set[str]] = {}
        gone = []
        for key in runs:
            if key in fresh:
                continue
            parent, _, run = key.rpartition("/")[0].rpartition("/")  # "<parent>/<run>/<session file>"
            if parent not in listed:
                try:
                    listed[parent] = set(os.listdir(os.path.join(self.logdir, parent)))
                except OSError:
                    listed[parent] = set()
            if run not in listed[parent]:
                gone.append(key)
        return gone

    def _rebuild(self) -> dict:
        stats, runs = ColumnStats(), {}
        for path in _session_files(self.logdir, self.logdir):
            row = _row(path)
            runs[self._key(path)] = self._write_row(self._key(path), row)
            stats.add(row)
        return {"runs": runs, "stats": vars(stats)}

    def _key(self, session_file: Path) -> str:
        return session_file.relative_to(self.logdir).as_posix()

    def _write_row(self, key: str, row: dict) -> str:
        """The row's file, named by its content (a run's new row never overwrites its old one)."""
        text = json.dumps({"run": key, **row}, sort_keys=True)
        row_id = hashlib.sha1(text.encode()).hexdigest()[:16]
        path = self.rows_dir / f"{row_id}.json"
        if not path.exists():
            self.rows_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(text)  # no fsync: a row cut short is unreadable, and that reads every run
        return row_id

    def _read_row(self, row_id: str) -> dict | None:
        try:
            row = json.loads((self.rows_dir / f"{row_id}.json").read_text())
        except (OSError, ValueError):
            return None
        return row if isinstance(row, dict) and "hparams" in row else None

    def _read_index(self) -> dict | None:
        try:
            index = json.loads((self.folder / INDEX_FILE).read_text())
            ColumnStats(**index["stats"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return index if isinstance(index.get("runs"), dict) else None


def _row(session_file: Path) -> dict:
    """A run's row: the hparams of its session file, the metric columns of its metrics.json."""
    from ..training.logging import tags
    from .record import RunRecord

    recorded = RunRecord.read(session_file.parent) or RunRecord()
    metrics = sorted(tags.hparam_metrics(set(recorded.best_valid) | set(recorded.test)))
    return {"hparams": tensorboard.read_session(session_file)[0], "metrics": metrics}


def _session_files(logdir: Path, under: Path) -> list[Path]:
    """The runs' session files below `under`, leaving out the columns, the cache and set-aside runs."""
    found = []
    for path in sorted(Path(under).rglob(HPARAMS_ROW)):
        parts = path.parent.relative_to(logdir).parts
        if parts and parts[0] != OutputPaths(under).hparams_columns.name and not any(part.startswith(".") for part in parts):
            found.append(path)
    return found
