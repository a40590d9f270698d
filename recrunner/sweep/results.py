"""The sweep's tables: results.csv (a row per cell) and results.md (model x dataset, per metric).

Rows come from each cell's metrics.json and the sweep's list of cells, never from appending, so
a killed sweep cannot leave a row twice. Both files are rewritten (atomically) after every cell.

results.md reports, for each model and dataset, the configuration with the best mean validation
score over its seeds (selection on validation, never on test), and its test metrics as
mean ± std over seeds; the best value of each column is in bold.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from pathlib import Path

from ..callbacks import metric_bigger
from ..record import RunRecord
from ..rundir import write_text_atomic

ID_COLUMNS = ("cell", "model", "dataset")
TAIL_COLUMNS = ("status", "error", "best_epoch", "epochs_trained", "data_seconds", "train_seconds",
                "test_seconds", "seconds")


def cell_row(cell_id: str, model: str, dataset: str, params: dict, swept, run_dir: Path | None,
             error: str | None = None) -> dict:
    """One results row from a cell's metrics.json (status pending when it has none yet)."""
    record = RunRecord.read(run_dir) if run_dir is not None else None
    row = {"cell": cell_id, "model": model, "dataset": dataset}
    seed = record.seed if record and record.seed is not None else params.get("seed")
    row.update({name: params.get(name, seed if name == "seed" else None) for name in swept})
    row["seed"] = seed
    row["status"] = record.status.value if record else ("failed" if error else "pending")
    row["error"] = (record.error if record else None) or error
    for key in ("best_epoch", "epochs_trained", "data_seconds", "train_seconds", "test_seconds", "valid_metric"):
        row[key] = getattr(record, key) if record else None
    row["seconds"] = record.seconds if record else None
    row["best_valid_score"] = record.best_valid_score if record else None
    row.update({f"valid/{k}": v for k, v in (record.best_valid if record else {}).items()})
    row.update({f"test/{k}": v for k, v in (record.test if record else {}).items()})
    return row


def write_results(sweep_dir: Path, rows: list[dict], swept: list[str], title: str) -> tuple[Path, Path]:
    csv_path, md_path = Path(sweep_dir) / "results.csv", Path(sweep_dir) / "results.md"
    write_text_atomic(csv_path, results_csv(rows, swept))
    write_text_atomic(md_path, results_markdown(rows, swept, title))
    return csv_path, md_path


def results_csv(rows: list[dict], swept: list[str]) -> str:
    metric_columns = sorted({k for row in rows for k in row if k.startswith(("valid/", "test/"))},
                            key=lambda k: (not k.startswith("valid/"), k))
    columns = [*ID_COLUMNS, *[s for s in swept if s != "seed"], "seed", *TAIL_COLUMNS, *metric_columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return out.getvalue()


def best_configurations(rows: list[dict], swept: list[str]) -> dict:
    """{(model, dataset): [rows of the configuration with the best mean validation score]} (pure)."""
    groups = defaultdict(list)
    for row in rows:
        if row["status"] == "ok" and row.get("best_valid_score") is not None:
            config = tuple((name, json.dumps(row.get(name))) for name in swept if name != "seed")
            groups[(row["model"], row["dataset"], config)].append(row)
    best: dict = {}
    for (model, dataset, _), members in groups.items():
        bigger = metric_bigger(members[0].get("valid_metric") or "mrr@10")
        score = statistics.fmean(r["best_valid_score"] for r in members)
        current = best.get((model, dataset))
        if current is None or (score > current[0] if bigger else score < current[0]):
            best[(model, dataset)] = (score, members)
    return {key: members for key, (_, members) in best.items()}


def results_markdown(rows: list[dict], swept: list[str], title: str) -> str:
    counts = defaultdict(int)
    for row in rows:
        counts[row["status"]] += 1
    models = list(dict.fromkeys(row["model"] for row in rows))
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    chosen = best_configurations(rows, swept)
    metrics = list(dict.fromkeys(k[5:] for row in rows for k in row if k.startswith("test/")))
    lines = [f"# {title}", "", f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ".",
             "Test metrics of the configuration with the best mean validation score per model and dataset; "
             "mean ± std over seeds (n seeds); best per column in bold.", ""]
    for metric in metrics:
        lines += [f"## test {metric}", "", "| model | " + " | ".join(datasets) + " |",
                  "|---|" + "---|" * len(datasets)]
        column_best = {d: _best_mean(chosen, models, d, metric) for d in datasets}
        for model in models:
            cells = []
            for dataset in datasets:
                values = [r[f"test/{metric}"] for r in chosen.get((model, dataset), []) if f"test/{metric}" in r]
                cells.append(_mean_std(values, bold=bool(values) and statistics.fmean(values) == column_best[dataset]))
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += _chosen_table(chosen, swept) + _failures(rows)
    return "\n".join(lines) + "\n"


def _best_mean(chosen, models, dataset, metric):
    means = [statistics.fmean(v) for m in models
             if (v := [r[f"test/{metric}"] for r in chosen.get((m, dataset), []) if f"test/{metric}" in r])]
    if not means:
        return None
    return max(means) if metric_bigger(metric) else min(means)


def _mean_std(values, bold: bool) -> str:
    if not values:
        return "–"
    mean = statistics.fmean(values)
    text = f"{mean:.4f} ± {statistics.stdev(values):.4f}" if len(values) > 1 else f"{mean:.4f}"
    text += f" (n={len(values)})"
    return f"**{text}**" if bold else text


def _chosen_table(chosen, swept) -> list[str]:
    names = [s for s in swept if s != "seed"]
    if not chosen:
        return []
    lines = ["## chosen configurations", "", "| model | dataset | " + " | ".join(names + ["seeds"]) + " |",
             "|---|---|" + "---|" * (len(names) + 1)]
    for (model, dataset), members in chosen.items():
        values = [str(members[0].get(name)) for name in names] + [", ".join(str(r["seed"]) for r in members)]
        lines.append(f"| {model} | {dataset} | " + " | ".join(values) + " |")
    return lines + [""]


def _failures(rows) -> list[str]:
    failed = [row for row in rows if row["status"] in ("failed", "interrupted")]
    if not failed:
        return []
    return ["## cells not finished", ""] + [f"- `{row['cell']}`: {row['status']}: {row.get('error')}" for row in failed] + [""]


def _csv_value(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value

