"""The per-user test metrics file of a run (RunPaths.test_per_user), the raw material of paired
significance tests between models: `users` (the internal user ids, in evaluation order) and one
float array per metric (`ndcg@10`, ...), as seams/evaluator.py computes them.
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
