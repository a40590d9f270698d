"""Per-user test metrics, the raw material of paired significance tests between models.

RecBole averages each top-k metric over users inside its Evaluator and keeps only the mean.
`seams.evaluator.capture_per_user` wraps one `evaluate` call and keeps the evaluation's data (the
top-k hit matrix); `per_user_metrics` recomputes every top-k metric per user with RecBole's own
metric classes, so the mean of
the per-user values is the number RecBole reports. Saved as `test_per_user.npz`: `users` (the
internal user ids, in evaluation order) and one float array per metric (`ndcg@10`, ...).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

from .rundir import atomic_file




def per_user_metrics(struct, config) -> dict:
    """{`metric@k`: array over users} for the top-k metrics of this run (pure)."""
    from recbole.evaluator.base_metric import TopkMetric
    from recbole.evaluator.register import metrics_dict

    names = [config["metrics"]] if isinstance(config["metrics"], str) else list(config["metrics"])
    topk = [config["topk"]] if isinstance(config["topk"], int) else list(config["topk"])
    values = {}
    for name in names:
        metric_class = metrics_dict.get(name.lower())
        if metric_class is None or not issubclass(metric_class, TopkMetric) or "rec.topk" not in struct:
            continue
        metric = metric_class(config)
        pos_index, pos_len = metric.used_info(struct)
        # Hit and MRR take the hit matrix alone; Recall, NDCG, Precision... also the positives' count
        takes_len = len(inspect.signature(metric.metric_info).parameters) > 1
        per_user = metric.metric_info(pos_index, pos_len) if takes_len else metric.metric_info(pos_index)
        for k in topk:
            values[f"{name.lower()}@{k}"] = per_user[:, k - 1].astype(np.float64)
    return values


def save(path: Path, values: dict) -> None:
    if values:
        with atomic_file(path) as handle:
            np.savez_compressed(handle, **values)


def load(path: Path) -> dict:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}
