"""A model against a baseline: paired tests over users, Holm's correction, effect sizes (pure).

A p-value says whether two models differ, not by how much: beside each one the report gives the
mean paired difference over users with a 95% bootstrap confidence interval, and the relative
improvement (Holm-adjusted p-values without effect sizes are what reviewers distrust).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Comparison:
    """A model against the baseline on one metric and dataset, over the users of paired seeds."""

    p: float                      # Wilcoxon signed-rank over users (user_test), two-sided
    p_holm: float                 # Holm-adjusted over the family (every model and dataset of the metric)
    difference: float             # mean over users of (model - baseline), each user averaged over seeds
    low: float                    # 95% bootstrap confidence interval of `difference`
    high: float
    relative: float | None        # mean(model) / mean(baseline) - 1; None when the baseline's mean is 0
    users: int


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


def bootstrap_difference(users: list, candidate: list, baseline: list, *, resamples: int = 2000,
                         level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean paired difference and its percentile bootstrap interval, resampling users (pure).

    `users`, `candidate` and `baseline` hold one array per seed (a seed of the model paired with
    the same seed of the baseline). A user's difference is averaged over the seeds that evaluated
    it, so a user is one unit however many seeds there are; users are drawn with replacement
    `resamples` times with a fixed generator, so the interval is the same on every run.
    """
    per_user = user_differences(users, candidate, baseline)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(1, len(per_user)))  # bounded memory on large test sets
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = per_user[rng.integers(0, len(per_user), size=(stop - start, len(per_user)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(per_user.mean()), float(low), float(high)


def user_differences(users: list, candidate: list, baseline: list) -> np.ndarray:
    """Each user's paired difference (candidate - baseline) averaged over the seeds that evaluated it,
    in user-id order (pure): one value per user, however many seeds, since a user's values under
    different seeds are not independent samples."""
    all_users = np.concatenate([np.asarray(u) for u in users])
    differences = np.concatenate([np.asarray(a, float) - np.asarray(b, float) for a, b in zip(candidate, baseline)])
    _, inverse = np.unique(all_users, return_inverse=True)
    return np.bincount(inverse, weights=differences) / np.bincount(inverse)


def user_test(users: list, candidate: list, baseline: list) -> float:
    """Two-sided Wilcoxon signed-rank p-value over users, each user's difference averaged over the
    paired seeds (`user_differences`): a user counts once, not once per seed (pure)."""
    differences = user_differences(users, candidate, baseline)
    return paired_test(differences, np.zeros_like(differences))


def relative_improvement(candidate: np.ndarray, baseline: np.ndarray) -> float | None:
    """mean(candidate) / mean(baseline) - 1 over paired values; None when the baseline's mean is 0."""
    base = float(np.mean(baseline))
    return None if base == 0 else float(np.mean(candidate)) / base - 1


def mean_interval(std: float, n: int, level: float = 0.95) -> float:
    """Half-width of the t confidence interval of a mean over `n` seeds (NaN for fewer than 2)."""
    from scipy.stats import t

    if n < 2 or not math.isfinite(std):
        return math.nan
    return float(t.ppf((1 + level) / 2, n - 1) * std / math.sqrt(n))


def paired_users(candidate: dict, baseline: dict, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(users, candidate values, baseline values) on the users both runs evaluated."""
    a, b = pair_by_user(candidate, baseline, metric)
    users = candidate.get("users")
    if users is None or baseline.get("users") is None:
        return np.arange(len(a)), a, b
    return np.intersect1d(users, baseline["users"]), a, b
