"""Significance of a model against a baseline: paired tests over users, Holm's correction (pure)."""

from __future__ import annotations


import numpy as np


def paired_test(candidate: np.ndarray, baseline: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of per-user differences (1.0 when all are equal).

    The users are the same in both arrays and in the same order (the same test split).
    """
    from scipy.stats import wilcoxon

    candidate, baseline = np.asarray(candidate, float), np.asarray(baseline, float)
    if candidate.shape != baseline.shape:
        raise ValueError(f"paired samples differ in size: {candidate.shape} vs {baseline.shape}")
    if not np.any(candidate != baseline):
        return 1.0
    return float(wilcoxon(candidate, baseline, zero_method="wilcox", alternative="two-sided").pvalue)


def holm(p_values: dict) -> dict:
    """Holm-Bonferroni adjusted p-values for a family of tests {key: p} (monotone, capped at 1)."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    adjusted, running = {}, 0.0
    m = len(ordered)
    for rank, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[key] = running
    return adjusted


def pair_by_user(candidate: dict, baseline: dict, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Align two runs' per-user values of `metric` on the users both evaluated."""
    a_users, b_users = candidate.get("users"), baseline.get("users")
    a, b = np.asarray(candidate[metric]), np.asarray(baseline[metric])
    if a_users is None or b_users is None:
        if len(a) != len(b):
            raise ValueError("per-user metrics without user ids cannot be paired across different test sets")
        return a, b
    common, a_idx, b_idx = np.intersect1d(a_users, b_users, return_indices=True)
    return a[a_idx], b[b_idx]
