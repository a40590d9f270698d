"""TensorBoard output: every metric as a scalar, the hparams row in the run itself, the columns once.

torch's `SummaryWriter.add_hparams` writes the row into a new timestamped sub-run, always reports
success, and writes the columns (the Experiment proto) into every run, of which TensorBoard shows
one arbitrary run's: a BPR-vs-SASRec sweep silently loses columns. Here each run's directory has
its row (`hparams_summaries`: values, a seed group, the real status) and the output folder has the
columns for all runs beneath it (`write_experiment`: the union), rewritten after every run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

from .record import Status
from .rundir import atomic_file, file_lock, fingerprint, write_text_atomic

# an interrupted run is not finished (the same command resumes it): TensorBoard's "unknown", not a failure
STATUS = {Status.OK: "STATUS_SUCCESS", Status.FAILED: "STATUS_FAILURE", Status.INTERRUPTED: "STATUS_UNKNOWN",
          Status.RUNNING: "STATUS_RUNNING", Status.PRUNED: "STATUS_SUCCESS"}  # pruned: ended as designed


def hparam_value(value):
    """A value the HParams plugin can show: bool, number or string (pure)."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return str(value)


def _plugin_summary(tag, **content):
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    data = HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def session_group(hparams: Mapping) -> str:
    """Runs that differ only by seed share a group, which TensorBoard aggregates (pure); the name a
    run is given (`RunWriter(group=...)`: dataset/model/what identifies it) is more readable."""

    return fingerprint({k: str(v) for k, v in hparams.items() if k not in ("seed", "status")})


def hparams_summaries(hparams: Mapping, status: str | None, group: str | None = None):
    """A run's row: its session start (values, seed group) and, once known, its end (status).

    The columns (the Experiment proto) are not here: TensorBoard takes them from the first run
    it finds that has them, so they are written once for all runs by `write_experiment`.
    """
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import Status
    from tensorboard.plugins.hparams.plugin_data_pb2 import SessionEndInfo, SessionStartInfo

    start = SessionStartInfo(group_name=group or session_group(hparams))
    for key, raw in hparams.items():
        value = hparam_value(raw)
        if isinstance(value, bool):
            start.hparams[key].bool_value = value
        elif isinstance(value, (int, float)):
            start.hparams[key].number_value = value
        else:
            start.hparams[key].string_value = value
    protos = [_plugin_summary(metadata.SESSION_START_INFO_TAG, session_start_info=start)]
    if status is not None:
        end = SessionEndInfo(status=Status.Value(STATUS[status]))
        protos.append(_plugin_summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))
    return protos


def shown_columns(rows: list[Mapping]) -> list[str]:
    """The HParams columns worth showing (pure): model, dataset, every parameter whose value differs
    across `rows` (or that only some rows have), seed and status; a lone run shows all it has."""
    keys = sorted({key for row in rows for key in row})
    if len(rows) > 1:
        def varies(key):
            return len({repr(hparam_value(row[key])) if key in row else "<absent>" for row in rows}) > 1
        keys = [key for key in keys if key in _ALWAYS_SHOWN or varies(key)]
    return sorted(keys, key=_column_order)


def experiment_summary(rows: list[Mapping], metric_tags):
    """The HParams columns (`shown_columns`, typed by all their values) and the metric columns."""
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName

    values: dict[str, list] = {}
    for row in rows:
        for key, raw in row.items():
            values.setdefault(key, []).append(hparam_value(raw))
    infos = []
    for key in shown_columns(rows):
        seen = values[key]
        if all(isinstance(v, bool) for v in seen):
            kind = "DATA_TYPE_BOOL"
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
            kind = "DATA_TYPE_FLOAT64"
        else:
            kind = "DATA_TYPE_STRING"
        # TensorBoard (2.21) orders columns by `differs`, then by name; the trial name comes first
        info = HParamInfo(name=key, type=DataType.Value(kind), differs=len({repr(v) for v in seen}) > 1)
        if kind == "DATA_TYPE_STRING":
            info.domain_discrete.extend(sorted({str(v) for v in seen}))
        infos.append(info)
    experiment = Experiment(hparam_infos=infos,
                            metric_infos=[MetricInfo(name=MetricName(tag=tag)) for tag in metric_tags])
    return _plugin_summary(metadata.EXPERIMENT_TAG, experiment=experiment)


_ALWAYS_SHOWN = ("model", "dataset", "status")


def _column_order(key: str):
    """model, dataset, the parameters (alphabetical), seed, status: the order written (TensorBoard 2.21
    re-sorts the columns by name, varied ones first; its first column, the trial name, says
    dataset/model/what the sweep varies)."""
    rank = {"model": 0, "dataset": 1, "seed": 3, "status": 4}.get(key, 2)
    return rank, key


def read_session(path: Path) -> tuple[dict, str | None]:
    """(hparams, status name) of a run's hparams event file."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import api_pb2, metadata

    hparams, status = {}, None
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            content = value.metadata.plugin_data.content
            if value.tag == metadata.SESSION_START_INFO_TAG:
                start = metadata.parse_session_start_info_plugin_data(content)
                hparams = {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items() if v.WhichOneof("kind")}
            elif value.tag == metadata.SESSION_END_INFO_TAG:
                status = api_pb2.Status.Name(metadata.parse_session_end_info_plugin_data(content).status)
    return hparams, status


def _write_experiment(logdir: Path, changed: Path | None = None) -> Path | None:
    """Columns for every run under `logdir` (`tensorboard --logdir <logdir>`), rewritten whole.

    Hparams come from each run's session file, metric columns from its metrics.json
    (Best_Valid/<metric>, Best_Valid/score, Test/<metric>): whatever models the runs are and in
    whatever order they were written, the table gets the union. Each run's row is kept in
    `hparams-columns/rows.json`; with `changed` (the run just written) only that run is read
    again and the others are only checked to exist, so a run's cost does not grow with the
    number of runs beside it. Without it (or with no readable rows.json) every run is read.
    """
    logdir = Path(logdir)
    index_path = logdir / COLUMNS_DIR / ROWS_FILE
    index = _read_rows(index_path) if changed is not None else None
    if index is None:
        index, scan = {}, _session_files(logdir, logdir)
    else:
        index = {key: row for key, row in index.items() if (logdir / key).is_file()}
        scan = _session_files(logdir, Path(changed))
    for path in scan:
        key = path.relative_to(logdir).as_posix()
        index[key] = {"hparams": read_session(path)[0], "metrics": _metric_names(path.parent)}
    if not index:
        return None
    metrics = set().union(*(row["metrics"] for row in index.values()))
    (logdir / HPARAMS_FILE).unlink(missing_ok=True)  # where older recrunner wrote them: a run named "."
    target = columns_file(logdir)
    target.parent.mkdir(exist_ok=True)
    write_event_file(target, [experiment_summary([index[key]["hparams"] for key in sorted(index)],
                                                 sorted(metrics, key=lambda t: (not t.startswith("Best"), t)))])
    write_text_atomic(index_path, json.dumps(index, sort_keys=True))
    return target


def _session_files(logdir: Path, under: Path) -> list[Path]:
    """The runs' session files below `under`, leaving out the columns, the cache and set-aside runs."""
    found = []
    for path in sorted(Path(under).rglob(HPARAMS_FILE)):
        parts = path.parent.relative_to(logdir).parts
        if parts and parts[0] != COLUMNS_DIR and not any(part.startswith(".") for part in parts):
            found.append(path)
    return found


def _metric_names(run_dir: Path) -> list[str]:
    from . import tags
    from .record import RunRecord

    recorded = RunRecord.read(run_dir) or RunRecord()
    return sorted(tags.hparam_metrics(set(recorded.best_valid) | set(recorded.test)))


def _read_rows(path: Path) -> dict | None:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return rows if isinstance(rows, dict) else None


def write_experiment(logdir: Path, changed: Path | None = None) -> Path | None:
    """`_write_experiment` under a lock shared by every process writing into `logdir`: the scan
    and the write of one writer never interleave with another's, so the last file written holds
    the columns of every run finished before it (and concurrent writers never collide)."""
    with file_lock(Path(logdir) / ".hparams.lock"):
        return _write_experiment(logdir, changed)


HPARAMS_FILE = "events.out.tfevents.0000000000.hparams"
# TensorBoard reads the HParams columns from whichever run has them: this one holds only them
COLUMNS_DIR = "hparams-columns"
ROWS_FILE = "rows.json"  # each run's hparams and metric names, so one run's update reads one run


def columns_file(logdir: Path) -> Path:
    """Where the HParams columns of every run under `logdir` are (TensorBoard's run "hparams-columns")."""
    return Path(logdir) / COLUMNS_DIR / HPARAMS_FILE


def write_event_file(path: Path, summaries) -> None:
    """Write `summaries` as a complete event file, atomically (replacing any previous one)."""
    import time

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter

    with atomic_file(path) as handle:
        records = RecordWriter(handle)
        now = time.time()
        records.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
        for summary in summaries:
            records.write(Event(wall_time=now, step=0, summary=summary).SerializeToString())


class RunWriter:
    """The run's TensorBoard output, all in the run directory itself (no sub-runs).

    Scalars go through a SummaryWriter. The hparams row lives in its own event file, rewritten
    whole whenever the run's status changes: TensorBoard keeps a tag's metadata from the first
    event it reads, so appending a new status would leave the old one showing.
    """

    def __init__(self, log_dir: Path, purge_step: int | None = None, group: str | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        # purge_step hides events a killed attempt wrote at or past the resume point
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
        self.hparams: dict | None = None
        self.metric_tags: list[str] = []
        self.group = group  # the HParams trial (session group) name; None: a hash of the parameters

    # RecBole's Trainer calls add_scalar on the object it knows as `tensorboard`
    def add_scalar(self, tag, value, step):
        self.writer.add_scalar(tag, value, step)

    def add_hparams(self, hparams: Mapping, metric_tags=(), status: str | None = None):
        """This run's hparams row (with its status once known); metric_tags: kept for the caller's
        columns, which `write_experiment` writes once for all runs."""
        self.hparams, self.metric_tags = dict(hparams), list(metric_tags)
        row = {**self.hparams, "status": status} if status is not None else self.hparams
        write_event_file(self.log_dir / HPARAMS_FILE, hparams_summaries(row, status, self.group))

    def end_session(self, status: str, hparams: Mapping | None = None):
        """Record the run's final status in its hparams row (writing the row if fit never did)."""
        if self.hparams is None and hparams is not None:
            self.hparams = dict(hparams)
        if self.hparams is not None:
            self.add_hparams(self.hparams, self.metric_tags, status)

    def flush(self):
        self.writer.flush()

    def close(self):
        self.writer.close()
