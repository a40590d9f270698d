"""`recrunner report <sweep-dir>`: the tables, tests and charts of a sweep, finished or not.

    runs/<sweep>/report/
        report.md           model x dataset tables per test metric (mean ± std over seeds, best in
                            bold, † = differs from the baseline after Holm's correction), the
                            significance table, the chosen configurations, flagged runs
        summary.csv         one row per (metric, dataset, model): mean, std, n, p, adjusted p
        tables.tex          the same tables for a paper (booktabs)
        test_<metric>.png   one chart per metric: models side by side on each dataset
        valid_<dataset>.png validation curves (valid_metric per epoch, mean over seeds, from epoch -1)

Every run under the folder that has a metrics.json counts; for each model and dataset the
configuration with the best mean validation score is reported (selection on validation).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from ..callbacks import metric_bigger
from ..errors import ConfigError
from ..record import FILE_NAME, RunRecord, Status
from ..rundir import write_text_atomic
from ..tables import best_configurations
from . import stats
from .model import Report, cell_stats



def discover(sweep_dir: Path) -> list[dict]:
    """A row per run under `sweep_dir` (metrics.json), with its parameters and run directory."""
    rows = []
    for path in sorted(Path(sweep_dir).rglob(FILE_NAME)):
        record = RunRecord.read(path)
        if record is None:
            continue
        row = {"run_dir": path.parent, "model": record.model, "dataset": record.dataset,
               "status": record.status.value, "seed": record.seed, "error": record.error,
               "valid_metric": record.valid_metric or "mrr@10",
               "best_valid_score": record.best_valid_score, "initial_valid": record.initial_valid,
               "params": {k: v for k, v in record.params.items() if k != "seed"}}
        row.update({f"test/{k}": v for k, v in record.test.items()})
        rows.append(row)
    return rows


def build_report(sweep_dir: Path, baseline: str | None = None, alpha: float = 0.05) -> Report:
    sweep_dir = Path(sweep_dir)
    rows = discover(sweep_dir)
    if not rows:
        raise ConfigError(f"{sweep_dir} holds no runs (no metrics.json below it); give a sweep folder like runs/<sweep>")
    swept = sorted({k for r in rows for k in r["params"] if len({json.dumps(x["params"].get(k)) for x in rows}) > 1})
    for row in rows:
        row.update({k: row["params"].get(k) for k in swept})
    models = _ordered(sweep_dir, rows, "model")
    datasets = _ordered(sweep_dir, rows, "dataset")
    baseline = baseline or models[0]
    if baseline not in models:
        raise ConfigError(f"baseline {baseline!r} is not in this sweep; models: {', '.join(models)}")
    metrics = list(dict.fromkeys(k[5:] for r in rows for k in r if k.startswith("test/")))
    report = Report(sweep_dir, baseline, metrics, models, datasets, best_configurations(rows, swept))
    report.counts = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
    report.flags = [flag for row in rows for flag in _flags(row)]
    report.significance = _significance(report, alpha)
    return report


def _ordered(sweep_dir, rows, key):
    """The sweep's own order (results.csv), else alphabetical."""
    order = []
    try:
        with open(Path(sweep_dir) / "results.csv") as f:
            order = list(dict.fromkeys(r[key] for r in csv.DictReader(f)))
    except (OSError, KeyError):
        pass
    present = {r[key] for r in rows}
    return [v for v in order if v in present] + sorted(present - set(order))


def _flags(row) -> list:
    reasons = []
    error = row.get("error") or ""
    history = row["run_dir"] / "history.jsonl"
    non_finite = "non-finite" in error or "became nan" in error or "became inf" in error
    if history.exists() and not non_finite:
        for line in history.read_text().splitlines():
            try:
                loss = json.loads(line).get("loss")
            except ValueError:
                continue
            if loss is not None and not math.isfinite(loss):
                non_finite = True
                break
    if non_finite:
        reasons.append("non-finite training loss")
    start = row["initial_valid"].get(row["valid_metric"])
    best = row.get("best_valid_score")
    if row["status"] == Status.OK and start is not None and best is not None:
        bigger = metric_bigger(row["valid_metric"])
        if (best <= start) if bigger else (best >= start):
            reasons.append(f"never better than the untrained model (epoch -1 {row['valid_metric']} {start:.4f})")
    return [(row, reason) for reason in reasons]


def _significance(report: Report, alpha: float) -> dict:
    from ..per_user import load

    results = {}
    for metric in report.metrics:
        family = {}
        for dataset in report.datasets:
            base_runs = {r["seed"]: r for r in report.chosen.get((report.baseline, dataset), [])}
            for model in report.models:
                if model == report.baseline:
                    continue
                pairs = [(r, base_runs[r["seed"]]) for r in report.chosen.get((model, dataset), []) if r["seed"] in base_runs]
                candidate, baseline = [], []
                for run, base in pairs:
                    a, b = run["run_dir"] / "test_per_user.npz", base["run_dir"] / "test_per_user.npz"
                    if not (a.exists() and b.exists()):
                        continue
                    x, y = stats.pair_by_user(load(a), load(b), metric) if metric in load(a) else (None, None)
                    if x is not None:
                        candidate.append(x)
                        baseline.append(y)
                if candidate:
                    import numpy as np

                    family[(metric, dataset, model)] = stats.paired_test(np.concatenate(candidate), np.concatenate(baseline))
        adjusted = stats.holm(family)
        results.update({key: (p, adjusted[key]) for key, p in family.items()})
    report.alpha = alpha
    return results



def _column_best(report, dataset, metric):
    return report.table.column_best(dataset, metric)


def _significant(report, metric, dataset, model) -> bool:
    found = report.significance.get((metric, dataset, model))
    return found is not None and found[1] < report.alpha


def markdown(report: Report) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in report.counts.items())
    lines = [f"# Report: {report.sweep_dir.name}", "",
             f"Runs: {counts}. Test metrics of the configuration with the best mean validation score per model and "
             f"dataset, mean ± std over seeds (n). Best per column in **bold**; † differs from the baseline "
             f"{report.baseline} (paired Wilcoxon signed-rank test over users, Holm-corrected across models and "
             f"datasets, p < {report.alpha}).", ""]
    for metric in report.metrics:
        lines += [f"## test {metric}", "", "| model | " + " | ".join(report.datasets) + " |",
                  "|---|" + "---|" * len(report.datasets)]
        for model in report.models:
            cells = []
            for dataset in report.datasets:
                mean, std, n = cell_stats(report, model, dataset, metric)
                if not n:
                    cells.append("–")
                    continue
                text = f"{mean:.4f} ± {std:.4f} ({n})"
                text = f"**{text}**" if mean == _column_best(report, dataset, metric) else text
                cells.append(text + (" †" if _significant(report, metric, dataset, model) else ""))
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## significance against " + report.baseline, "",
              "| metric | dataset | model | p | Holm-adjusted p | significant |", "|---|---|---|---|---|---|"]
    for (metric, dataset, model), (p, adjusted) in sorted(report.significance.items()):
        lines.append(f"| {metric} | {dataset} | {model} | {p:.3g} | {adjusted:.3g} | {'yes' if adjusted < report.alpha else 'no'} |")
    if not report.significance:
        lines.append("| – | – | – | – | – | no paired per-user results (test_per_user.npz) to compare |")
    lines += ["", "## flagged runs", ""]
    lines += [f"- `{row['run_dir'].relative_to(report.sweep_dir)}`: {reason}" for row, reason in report.flags] or ["none"]
    return "\n".join(lines) + "\n"


def summary_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["metric", "dataset", "model", "mean", "std", "n", "p", "p_holm", "significant", "best"])
    for metric in report.metrics:
        for dataset in report.datasets:
            for model in report.models:
                mean, std, n = cell_stats(report, model, dataset, metric)
                p, adjusted = report.significance.get((metric, dataset, model), (None, None))
                writer.writerow([metric, dataset, model, _num(mean), _num(std), n, _num(p), _num(adjusted),
                                 adjusted is not None and adjusted < report.alpha,
                                 n > 0 and mean == _column_best(report, dataset, metric)])
    return out.getvalue()


def latex(report: Report) -> str:
    def escape(text):
        return str(text).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

    blocks = []
    for metric in report.metrics:
        rows = []
        for model in report.models:
            cells = []
            for dataset in report.datasets:
                mean, std, n = cell_stats(report, model, dataset, metric)
                text = "--" if not n else f"{mean:.4f} $\\pm$ {std:.4f}" + (
                    "$^{*}$" if _significant(report, metric, dataset, model) else "")
                cells.append(f"\\textbf{{{text}}}" if n and mean == _column_best(report, dataset, metric) else text)
            rows.append(escape(model) + " & " + " & ".join(cells) + r" \\")
        blocks.append("\n".join([
            r"\begin{table}[t]", r"\centering",
            f"\\caption{{Test {escape(metric)}: mean $\\pm$ std over seeds; best in bold; $^{{*}}$ differs from "
            f"{escape(report.baseline)} (Wilcoxon signed-rank over users, Holm-corrected, $p<{report.alpha}$).}}",
            r"\begin{tabular}{l" + "c" * len(report.datasets) + "}", r"\toprule",
            "Model & " + " & ".join(escape(d) for d in report.datasets) + r" \\", r"\midrule", *rows,
            r"\bottomrule", r"\end{tabular}", r"\end{table}"]))
    return "\n\n".join(blocks) + "\n"


def _num(value):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.6g}"


def write_report(report: Report, out_dir: Path | None = None) -> list[Path]:
    from . import plots

    out_dir = Path(out_dir or report.sweep_dir / "report")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("report.md", markdown(report)), ("summary.csv", summary_csv(report)),
                       ("tables.tex", latex(report))):
        write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    written += plots.write_plots(report, out_dir)
    return written

