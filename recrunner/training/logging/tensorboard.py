"""TensorBoard output: every metric as a scalar, the hparams row in the run itself, the columns once.

torch's `SummaryWriter.add_hparams` writes the row into a new timestamped sub-run, always reports
success, and writes the columns (the Experiment proto) into every run, of which TensorBoard shows
one arbitrary run's: a BPR-vs-SASRec sweep silently loses columns. Here each run's directory has
its row (`hparams_summaries`: values, a seed group, the real status) and the output folder has the
columns for all runs beneath it (hparams_columns.py: the union), rewritten after every run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from ...core.layout import RunPaths
from ...core.files import atomic_file
from ...config.run_id import fingerprint

# an interrupted run is not finished (the same command resumes it): TensorBoard's "unknown", not a failure
# keyed by the run statuses' values (recrunner.run.record.Status)
STATUS = {"ok": "STATUS_SUCCESS", "failed": "STATUS_FAILURE", "interrupted": "STATUS_UNKNOWN",
          "running": "STATUS_RUNNING", "pruned": "STATUS_SUCCESS"}  # pruned: ended as designed


def hparam_value(value):
    """A value the HParams plugin can show: bool, number or string (pure)."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return str(value)


def plugin_summary(tag, **content):
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
    it finds that has them, so they are written once for all runs (hparams_columns.py).
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
    protos = [plugin_summary(metadata.SESSION_START_INFO_TAG, session_start_info=start)]
    if status is not None:
        end = SessionEndInfo(status=Status.Value(STATUS[str(status)]))
        protos.append(plugin_summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))
    return protos


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

    def __init__(self, log_dir: Path, purge_step: int | None = None, group: str | None = None,
                 step_purge: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        # purge_step hides events a killed attempt wrote at or past the resume point
        self.writer = SummaryWriter(log_dir=str(_after_older_files(self.log_dir)), purge_step=purge_step)
        # the optimizer-step axis (step schedules) in its own folder: TensorBoard purges every tag of a
        # folder at one step, and an epoch number and a step number are not the same point
        self.step_purge, self.step_writer = step_purge, None
        self.hparams: dict | None = None
        self.metric_tags: list[str] = []
        self.group = group  # the HParams trial (session group) name; None: a hash of the parameters

    # RecBole's Trainer calls add_scalar on the object it knows as `tensorboard`
    def add_scalar(self, tag, value, step):
        self.writer.add_scalar(tag, value, step)

    def add_step_scalar(self, tag, value, step):
        """A scalar on the optimizer-step axis (`<run>/steps`, a run of its own in TensorBoard's list)."""
        if self.step_writer is None:
            from torch.utils.tensorboard import SummaryWriter

            folder = _after_older_files(RunPaths(self.log_dir).step_events)
            self.step_writer = SummaryWriter(log_dir=str(folder), purge_step=self.step_purge)
        self.step_writer.add_scalar(tag, value, step)

    def add_hparams(self, hparams: Mapping, metric_tags=(), status: str | None = None):
        """This run's hparams row (with its status once known); metric_tags: kept for the caller's
        columns, which hparams_columns.py writes once for all runs."""
        self.hparams, self.metric_tags = dict(hparams), list(metric_tags)
        row = {**self.hparams, "status": status} if status is not None else self.hparams
        write_event_file(RunPaths(self.log_dir).hparams_row, hparams_summaries(row, status, self.group))

    def end_session(self, status: str, hparams: Mapping | None = None):
        """Record the run's final status in its hparams row (writing the row if fit never did)."""
        if self.hparams is None and hparams is not None:
            self.hparams = dict(hparams)
        if self.hparams is not None:
            self.add_hparams(self.hparams, self.metric_tags, status)

    def flush(self):
        for writer in (self.writer, self.step_writer):
            if writer is not None:
                writer.flush()

    def close(self):
        for writer in (self.writer, self.step_writer):
            if writer is not None:
                writer.close()


def _after_older_files(folder: Path) -> Path:
    """`folder`, once a new event file there will sort after every older one.

    TensorBoard reads a folder's event files in name order, and a name starts with the second it
    was made, then host and process id: a resumed process that starts within the second of a killed
    one could sort first, and its purge would then hide nothing. It waits for the next second then.
    """
    import time

    stamps = [int(parts[3]) for parts in (p.name.split(".") for p in Path(folder).glob("events.out.tfevents.*"))
              if len(parts) > 3 and parts[3].isdigit()]
    deadline = time.time() + 2  # a file from the future (a clock set back) is not waited for
    while stamps and int(time.time()) <= max(stamps) and time.time() < deadline:
        time.sleep(0.05)
    return folder


def default_hparams(config) -> dict:
    """The run's identifying parameters, as RecBole's _add_hparam_to_tensorboard chooses them.

    RecBole's general settings, the ones it derives (MODEL_TYPE, ...) and recrunner's own keys stay
    out unless the run sets them (prepare adds every parameter a run sets).
    """
    from ...config.params import RECBOLE_DERIVED_KEYS, RECRUNNER_KEYS

    general = {p for group in config.parameters.values() for p in group}
    general |= {"model", "dataset", "config_files", "device"} | RECBOLE_DERIVED_KEYS | RECRUNNER_KEYS
    hparams = {
        "model": config["model"], "dataset": config["dataset"], "seed": config["seed"],
        "learner": config["learner"], "learning_rate": config["learning_rate"],
        "train_batch_size": config["train_batch_size"],
    }
    hparams.update({k: v for k, v in config.final_config_dict.items() if k not in general and v is not None})
    return hparams


class NullWriter:
    """A RunWriter that writes nothing: a data-parallel run's processes other than rank 0 (run.distributed)."""

    hparams = None
    metric_tags: list = []

    def __getattr__(self, name):
        return _nothing


def _nothing(*args, **kwargs):
    return None
