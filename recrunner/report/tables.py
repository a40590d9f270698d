"""The model x dataset table that results.md and the report both show: one model, several renderers.

Rows are runs as dicts (sweep/results.py's rows, report/build.py's rows): `model`, `dataset`,
`status`, `best_valid_score`, `valid_metric`, `test/<metric>` and the swept parameters.
`best_configurations` picks, per model and dataset, the configuration with the best mean
validation score over its seeds (selection on validation, never on test); `ResultTable` gives
each cell's mean, std and n over those seeds and each column's best mean. Renderers (Markdown in
results.md and report.md, CSV, LaTeX, charts) only format what it returns.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..training.callbacks import metric_bigger


def best_configurations(rows: list[dict], swept: list[str], picks: dict | None = None) -> dict:
    """{(model, dataset): [rows of the configuration with the best mean validation score]} (pure).

    Where a race picked a configuration (picks: {(model, dataset): its runs' cell ids}, from
    report.racing.picked_runs), its runs over the final seeds; else, where a search ran final seeds
    (rows with role "final"), only those rows count.
    """
    picked = set().union(*(picks or {}).values())
    chosen = defaultdict(list)
    for row in rows:
        if row.get("cell") in picked and row["status"] == "ok":
            chosen[(row["model"], row["dataset"])].append(row)
    groups = defaultdict(list)
    finals = {(r["model"], r["dataset"]) for r in rows if r.get("role") == "final" and r["status"] == "ok"}
    for row in rows:
        if (row["model"], row["dataset"]) in chosen:
            continue
        if (row["model"], row["dataset"]) in finals and row.get("role") != "final":
            continue  # a search with final seeds: its tables are the final runs, never the trials
        if row["status"] == "ok" and row.get("best_valid_score") is not None:
            config = tuple((name, json.dumps(row.get(name))) for name in swept if name != "seed")
            groups[(row["model"], row["dataset"], config)].append(row)
    best: dict = {}
    for (model, dataset, _), members in groups.items():
        bigger = metric_bigger(members[0].get("valid_metric") or "mrr@10")
        score = float(np.mean([r["best_valid_score"] for r in members]))
        current = best.get((model, dataset))
        if current is None or (score > current[0] if bigger else score < current[0]):
            best[(model, dataset)] = (score, members)
    return {**{key: members for key, (_, members) in best.items()}, **chosen}


def mean_std(values) -> tuple[float, float]:
    """Mean and sample std of the finite values (std 0 for one value; NaN, NaN for none) (pure)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return math.nan, math.nan
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


@dataclass(frozen=True)
class ResultTable:
    models: list
    datasets: list
    chosen: dict  # (model, dataset) -> rows of the chosen configuration, one per seed

    def cell(self, model: str, dataset: str, metric: str) -> tuple[float, float, int]:
        """(mean, std, n) of test `metric` over the chosen runs of (model, dataset)."""
        values = [row.get(f"test/{metric}") for row in self.chosen.get((model, dataset), [])]
        mean, std = mean_std(values)
        return mean, std, sum(v is not None for v in values)

    def column_best(self, dataset: str, metric: str) -> float | None:
        """The best mean of the column (the largest, or the smallest for a loss-like metric)."""
        means = [m for model in self.models if not math.isnan(m := self.cell(model, dataset, metric)[0])]
        if not means:
            return None
        return max(means) if metric_bigger(metric) else min(means)
