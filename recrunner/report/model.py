"""The report's data: which runs were chosen per model and dataset, and the numbers of each cell.

build.py fills a `Report` and renders its tables; plots.py draws its charts; both read the cells
through `cell_stats` and `curves`, so neither depends on the other.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..core.layout import RunPaths
from ..training.callbacks.history import read_history
from .tables import ResultTable

@dataclass
class Report:
    sweep_dir: Path
    baseline: str
    metrics: list
    models: list
    datasets: list
    chosen: dict                       # (model, dataset) -> [rows]
    significance: dict = field(default_factory=dict)  # (metric, dataset, model) -> stats.Comparison
    flags: list = field(default_factory=list)          # (run, reason)
    counts: dict = field(default_factory=dict)
    protocols: dict = field(default_factory=dict)      # dataset (label) -> its protocol card (recrunner.run.protocol)
    interval: str = "std"                              # tables show mean ± std, or ± 95% CI over seeds ("ci")
    alpha: float = 0.05
    rows: list = field(default_factory=list)           # every run, as discover() found it (budgets)
    races: dict = field(default_factory=dict)          # selection.json: racing's contenders (report/racing.py)
    asked: dict = field(default_factory=dict)          # search/trials.json: a search's trials (report/budget.py)

    @property
    def table(self) -> ResultTable:
        return ResultTable(self.models, self.datasets, self.chosen)



def cell_stats(report, model, dataset, metric) -> tuple[float, float, int]:
    """(mean, std, n) of a test metric over the chosen runs of (model, dataset) (recrunner.report.tables)."""
    return report.table.cell(model, dataset, metric)


def cell_spread(report, model, dataset, metric) -> tuple[float, float, int]:
    """(mean, ± what the tables show, n): the std over seeds, or the 95% CI's half-width (`interval`); NaN (no
    ±) for one seed, whose spread is unknown, not 0."""
    from .stats import mean_interval

    mean, std, n = cell_stats(report, model, dataset, metric)
    return mean, mean_interval(std, n) if report.interval == "ci" else std if n > 1 else math.nan, n


def under_trained(report, model, dataset) -> int:
    """How many of the chosen runs of (model, dataset) are flagged "may be under-trained"."""
    return sum(bool(run.get("under_trained")) for run in report.chosen.get((model, dataset), []))


def curves(report: Report, dataset: str) -> dict:
    """{model: [(epoch, mean valid_metric over seeds)]} of the chosen configurations (from history.jsonl)."""
    result = {}
    for model in report.models:
        per_epoch = defaultdict(list)
        for run in report.chosen.get((model, dataset), []):
            path = RunPaths(run["run_dir"]).history
            if not path.exists():
                continue
            newest = {}  # a run validating by steps has several validations per epoch: its newest counts
            for entry in read_history(path):
                value = (entry.get("valid") or {}).get(run["valid_metric"])
                if value is not None:
                    newest[entry["epoch"]] = value
            for epoch, value in newest.items():
                per_epoch[epoch].append(value)
        if per_epoch:
            result[model] = [(epoch, sum(v) / len(v)) for epoch, v in sorted(per_epoch.items())]
    return result
