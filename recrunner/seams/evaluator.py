"""RecBole's Evaluator keeps only the mean over users: recrunner also keeps the per-user values.

| RecBole 1.2.1                                   | recrunner                                        |
|-------------------------------------------------|--------------------------------------------------|
| `Evaluator.evaluate(struct)` returns the means  | `capture_per_user`: for one `Trainer.evaluate`   |
|                                                 | call, the instance's `evaluate` is wrapped to    |
|                                                 | hand the data struct to per_user.per_user_metrics|
"""

from __future__ import annotations

import contextlib

import numpy as np


@contextlib.contextmanager
def capture_per_user(trainer, eval_data, sink: dict):
    """During the block, `sink` receives {metric: per-user values, "users": ids} of trainer.evaluate."""
    evaluator = trainer.evaluator
    original = evaluator.evaluate

    def evaluate_and_keep(struct):
        from ..per_user import per_user_metrics

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
