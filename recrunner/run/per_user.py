"""The per-user metrics files of a run: RunPaths.test_per_user, the raw material of paired
significance tests between models, and RunPaths.valid_per_user (the best weights on validation),
what racing over seeds compares (sweep/selection.py). Each holds `users` (the internal user ids, in
evaluation order) and one float array per metric (`ndcg@10`, ...), as seams/evaluator.py computes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.files import atomic_file


def save(path: Path, values: dict) -> None:
    if values:
        with atomic_file(path) as handle:
            np.savez_compressed(handle, **values)


def load(path: Path) -> dict:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def of_validation(trainer, valid_data) -> dict:
    """The best weights' per-user validation metrics. Called after the test, which loaded those weights,
    so that it moves no RNG the test depends on (a sampled evaluation draws negatives)."""
    from ..seams.evaluator import capture_per_user

    values: dict = {}
    if trainer.is_validating(valid_data):
        with capture_per_user(trainer, valid_data, values):
            trainer.evaluate(valid_data, load_best_model=False)
    return values
