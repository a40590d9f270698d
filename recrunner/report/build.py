"""`recrunner report <sweep-dir>`: the tables, tests and charts of a sweep, finished or not.

    runs/<sweep>/report/
        report.md           model x dataset tables per test metric (mean ± std, or ± 95% CI, over
                            seeds; best in bold; † = differs from the baseline after Holm's
                            correction; ‡ = may be under-trained), the protocol of each dataset
                            column, the significance table with effect sizes, the training budget
                            and convergence of each cell, the chosen configurations, flagged runs
        summary.csv         one row per (metric, dataset, model): mean, std, CI, n, p, adjusted p,
                            mean paired difference with its 95% bootstrap CI, relative improvement,
                            epochs and seconds to the best epoch
        tables.tex          the same tables for a paper (booktabs)
        test_<metric>.png   one chart per metric: models side by side on each dataset
        valid_<dataset>.png validation curves (valid_metric per epoch, mean over seeds, from epoch -1)

Every run under the folder that has a metrics.json counts; for each model and dataset the
configuration with the best mean validation score is reported (selection on validation). Runs
evaluated under different protocols are never pooled: each protocol of a dataset is a column of
its own (recrunner.run.protocol.separate). Rendering lives in render.py.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..training.callbacks import metric_bigger
from ..core.errors import ConfigError
from ..run.protocol import separate
from ..core.layout import RunPaths, SweepPaths
from ..training.callbacks.history import read_history
from ..run.record import RunRecord, Status
from .budget import load_asked
from .racing import load_races, picked_runs
from .tables import best_configurations
from . import stats
from .model import Report
from .render import write_report

__all__ = ["build_report", "discover", "write_report"]


def discover(sweep_dir: Path) -> list[dict]:
    """A row per run under `sweep_dir` (metrics.json), with its parameters and run directory."""
    rows = []
    for path in SweepPaths(Path(sweep_dir)).run_records():
        record = RunRecord.read(path)
        if record is None:
            continue
        cell = "/".join(path.parent.relative_to(sweep_dir).parts)  # as the sweep names it (select/..., final/...)
        row = {"run_dir": path.parent, "cell": cell, "model": record.model, "dataset": record.dataset,
               "status": record.status.value, "seed": record.seed, "error": record.error,
               "valid_metric": record.valid_metric or "mrr@10",
               "best_valid_score": record.best_valid_score, "initial_valid": record.initial_valid,
               "params": {k: v for k, v in record.params.items() if k != "seed"},
               "protocol": record.protocol, "under_trained": record.under_trained, "caveat": record.caveat,
               "epochs_trained": record.epochs_trained, "epochs_to_best": record.epochs_to_best,
               "seconds_to_best": record.seconds_to_best, "seconds": record.seconds,
               "role": (record.search or {}).get("role"), "max_epochs": record.max_epochs}
        row.update({f"test/{k}": v for k, v in record.test.items()})
        rows.append(row)
    return rows


def build_report(sweep_dir: Path, baseline: str | None = None, alpha: float = 0.05, interval: str = "std") -> Report:
    sweep_dir = Path(sweep_dir)
    rows = discover(sweep_dir)
    if not rows:
        raise ConfigError(f"{sweep_dir} holds no runs (no metrics.json below it); give a sweep folder like runs/<sweep>")
    if interval not in ("std", "ci"):
        raise ConfigError(f"--interval {interval!r}: use std (± std over seeds) or ci (± 95% confidence interval)")
    protocols = separate(rows)
    swept = sorted({k for r in rows for k in r["params"] if len({json.dumps(x["params"].get(k)) for x in rows}) > 1})
    for row in rows:
        row.update({k: row["params"].get(k) for k in swept})
    models = _ordered(sweep_dir, rows, "model")
    datasets = _ordered(sweep_dir, rows, "dataset")
    baseline = baseline or default_baseline(models, rows)
    if baseline not in models:
        raise ConfigError(f"baseline {baseline!r} is not in this sweep; models: {', '.join(models)}")
    metrics = list(dict.fromkeys(k[5:] for r in rows for k in r if k.startswith("test/")))
    races = load_races(sweep_dir)
    report = Report(sweep_dir, baseline, metrics, models, datasets, best_configurations(rows, swept, picked_runs(races)),
                    protocols=protocols, interval=interval, alpha=alpha, rows=rows, races=races,
                    asked=load_asked(sweep_dir))
    report.counts = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
    report.flags = [flag for row in rows for flag in _flags(row)]
    report.significance = _significance(report)
    return report


def default_baseline(models: list, rows: list) -> str:
    """The first model, in the sweep's order, that can be compared with the others on the most
    (dataset, test metric) cells, summed over the other models (pure).

    The sweep's first model is the usual baseline, but not when its runs failed or were cut short,
    or when it reports other metrics (a boosted tree's AUC beside the rankers' NDCG): a baseline
    nothing can be compared with would leave the significance table empty. A model with metrics
    no other has gains nothing by them.
    """
    covered = {model: set() for model in models}
    for row in rows:
        if row["status"] == Status.OK:
            covered[row["model"]].update((row["dataset"], key) for key, value in row.items()
                                         if key.startswith("test/") and value is not None)
    shared = {model: sum(len(covered[model] & covered[other]) for other in models if other != model) for model in models}
    return max(models, key=lambda model: (shared[model], -models.index(model)))


def _ordered(sweep_dir, rows, key):
    """The sweep's own order (results.csv), else alphabetical."""
    order = []
    try:
        with open(SweepPaths(Path(sweep_dir)).results_csv) as f:
            order = list(dict.fromkeys(r[key] for r in csv.DictReader(f)))
    except (OSError, KeyError):
        pass
    present = {r[key] for r in rows}
    return [v for v in order if v in present] + sorted(present - set(order))


def _flags(row) -> list:
    reasons = []
    error = row.get("error") or ""
    history = RunPaths(row["run_dir"]).history
    non_finite = "non-finite" in error or "became nan" in error or "became inf" in error
    if history.exists() and not non_finite:
        non_finite = any(line.get("loss") is not None and not math.isfinite(line["loss"]) for line in read_history(history))
    if non_finite:
        reasons.append("non-finite training loss")
    start = row["initial_valid"].get(row["valid_metric"])
    best = row.get("best_valid_score")
    if row["status"] == Status.OK and start is not None and best is not None:
        bigger = metric_bigger(row["valid_metric"])
        if (best <= start) if bigger else (best >= start):
            reasons.append(f"never better than the untrained model (epoch -1 {row['valid_metric']} {start:.4f})")
    if row["status"] == Status.OK:
        reasons += [text for text in (row.get("under_trained"), row.get("caveat")) if text]
    return [(row, reason) for reason in reasons]


def _significance(report: Report) -> dict:
    """{(metric, dataset, model): stats.Comparison} against the baseline, Holm-corrected per metric."""
    results = {}
    for metric in report.metrics:
        family, effects = {}, {}
        for dataset in report.datasets:
            for model in report.models:
                if model == report.baseline:
                    continue
                paired = _paired_seeds(report, model, dataset, metric)
                if paired:
                    users, candidate, baseline = zip(*paired)
                    x, y = np.concatenate(candidate), np.concatenate(baseline)
                    family[(metric, dataset, model)] = stats.user_test(users, candidate, baseline)
                    effects[(metric, dataset, model)] = (stats.bootstrap_difference(users, candidate, baseline),
                                                         stats.relative_improvement(x, y), len(np.unique(np.concatenate(users))))
        adjusted = stats.holm(family)
        for key, p in family.items():
            (difference, low, high), relative, users = effects[key]
            results[key] = stats.Comparison(p, adjusted[key], difference, low, high, relative, users)
    return results


def _paired_seeds(report: Report, model: str, dataset: str, metric: str) -> list:
    """[(users, model values, baseline values)] per seed both ran, from test_per_user.npz."""
    from ..run.per_user import load

    base_runs = {r["seed"]: r for r in report.chosen.get((report.baseline, dataset), [])}
    paired = []
    for run in report.chosen.get((model, dataset), []):
        base = base_runs.get(run["seed"])
        if base is None:
            continue
        a, b = RunPaths(run["run_dir"]).test_per_user, RunPaths(base["run_dir"]).test_per_user
        if not (a.exists() and b.exists()):
            continue
        candidate, baseline = load(a), load(b)
        if metric in candidate and metric in baseline:
            paired.append(stats.paired_users(candidate, baseline, metric))
    return paired
