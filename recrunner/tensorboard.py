"""TensorBoard output of one run: every metric as a scalar, and the hparams row in the same run.

torch's `SummaryWriter.add_hparams` writes the row into a new timestamped sub-run and always
reports success; `hparams_summaries` builds the same protos with the run's real status, and
`RunWriter` writes them into the run's own event file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

STATUS = {"ok": "STATUS_SUCCESS", "failed": "STATUS_FAILURE", "interrupted": "STATUS_FAILURE",
          "running": "STATUS_RUNNING"}


def hparam_value(value):
    """A value the HParams plugin can show: bool, number or string (pure)."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return str(value)


def hparams_summaries(hparams: Mapping, metric_tags, status: str | None):
    """Summary protos: experiment (columns), session start (this run's values), session end."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

    def summary(tag, **content):
        data = HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
            plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString()))
        return Summary(value=[Summary.Value(tag=tag, metadata=meta)])

    start = SessionStartInfo()
    infos = []
    for key, raw in hparams.items():
        value = hparam_value(raw)
        if isinstance(value, bool):
            start.hparams[key].bool_value = value
            kind = "DATA_TYPE_BOOL"
        elif isinstance(value, (int, float)):
            start.hparams[key].number_value = value
            kind = "DATA_TYPE_FLOAT64"
        else:
            start.hparams[key].string_value = value
            kind = "DATA_TYPE_STRING"
        infos.append(HParamInfo(name=key, type=DataType.Value(kind)))
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=t)) for t in metric_tags])
    protos = [summary(metadata.EXPERIMENT_TAG, experiment=experiment),
              summary(metadata.SESSION_START_INFO_TAG, session_start_info=start)]
    if status is not None:
        end = SessionEndInfo(status=Status.Value(STATUS[status]))
        protos.append(summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))
    return protos


HPARAMS_FILE = "events.out.tfevents.0000000000.hparams"


def write_event_file(path: Path, summaries) -> None:
    """Write `summaries` as a complete event file, atomically (replacing any previous one)."""
    import os
    import time

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter

    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        records = RecordWriter(handle)
        now = time.time()
        records.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
        for summary in summaries:
            records.write(Event(wall_time=now, step=0, summary=summary).SerializeToString())
        records.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class RunWriter:
    """The run's TensorBoard output, all in the run directory itself (no sub-runs).

    Scalars go through a SummaryWriter. The hparams row lives in its own event file, rewritten
    whole whenever the run's status changes: TensorBoard keeps a tag's metadata from the first
    event it reads, so appending a new status would leave the old one showing.
    """

    def __init__(self, log_dir: Path, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        # purge_step hides events a killed attempt wrote at or past the resume point
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
        self.hparams: dict | None = None
        self.metric_tags: list[str] = []

    # RecBole's Trainer calls add_scalar on the object it knows as `tensorboard`
    def add_scalar(self, tag, value, step):
        self.writer.add_scalar(tag, value, step)

    def add_metrics(self, metrics: Mapping, step: int, prefix: str):
        for name, value in metrics.items():
            self.writer.add_scalar(f"{prefix}/{name}", float(value), step)

    def add_hparams(self, hparams: Mapping, metric_tags, status: str | None = None):
        self.hparams, self.metric_tags = dict(hparams), list(metric_tags)
        write_event_file(self.log_dir / HPARAMS_FILE, hparams_summaries(self.hparams, self.metric_tags, status))

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
