"""RecBole's Evaluator keeps only the mean over users: recrunner also keeps the per-user values.

| RecBole 1.2.1                                   | recrunner                                        |
|-------------------------------------------------|--------------------------------------------------|
| `Evaluator.evaluate(struct)` returns the means  | `capture_per_user`: for one `Trainer.evaluate`   |
|                                                 | call, the instance's `evaluate` is wrapped to    |
|                                                 | hand the data struct to `per_user_metrics`      |

RecBole averages each top-k metric over users inside its Evaluator and keeps only the mean;
`per_user_metrics` recomputes every top-k metric per user with RecBole's own metric classes from
the evaluation's data (the top-k hit matrix), so the mean of the per-user values is the number
RecBole reports. run/per_user.py writes and reads them.
"""

from __future__ import annotations

import contextlib
import inspect

import numpy as np


@contextlib.contextmanager
def capture_per_user(trainer, eval_data, sink: dict):
    """During the block, `sink` receives {metric: per-user values, "users": ids} of trainer.evaluate."""
    evaluator = trainer.evaluator
    original = evaluator.evaluate

    def evaluate_and_keep(struct):
        sink.update(per_user_metrics(struct, trainer.config))
        users = getattr(eval_data, "uid_list", None)
        if users is not None and len(users) == len(next(iter(sink.values()), ())):
            sink["users"] = np.asarray(users)
        return original(struct)

    evaluator.evaluate = evaluate_and_keep
    try:
        yield sink
    finally:
        del evaluator.evaluate  # back to the class's method


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
