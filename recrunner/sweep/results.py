"""The sweep's tables: results.csv (a row per cell) and results.md (model x dataset, per metric).

Rows come from each cell's metrics.json and the sweep's list of cells, never from appending, so
a killed sweep cannot leave a row twice. Both files are rewritten whole (atomically), as cells
finish (at the rate `runner.TableSchedule` allows) and at the sweep's end.

results.md reports, for each model and dataset, the configuration with the best mean validation
score over its seeds (selection on validation, never on test), and its test metrics as
mean ± std over seeds; the best value of each column is in bold.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

from ..core.layout import SweepPaths
from ..run.convergence import UNDER_TRAINED_MARK as UNDER_TRAINED
from ..run.protocol import separate
from ..run.protocol import summary as protocol_summary
from ..run.protocol import warnings as protocol_warnings
from ..run.record import RunRecord, Status, device_text
from ..report.budget import budget_lines, budgets, load_asked
from ..core.files import write_text_atomic
from ..report.tables import ResultTable, best_configurations

ID_COLUMNS = ("cell", "model", "dataset")
TAIL_COLUMNS = ("status", "error", "best_epoch", "epochs_trained", "epochs_to_best", "seconds_to_best",
                "under_trained", "data_seconds", "train_seconds", "test_seconds", "compile_seconds", "seconds", "device",
                "device_name", "peak_memory_mb", "protocol")


_READ = object()  # cell_row's default: read the record from run_dir


def cell_row(cell_id: str, model: str, dataset: str, params: dict, swept, run_dir: Path | None,
             error: str | None = None, record=_READ) -> dict:
    """One results row from a cell's metrics.json (status pending when it has none yet); `record`:
    that file already read (None: it has none)."""
    if record is _READ:
        record = RunRecord.read(run_dir) if run_dir is not None else None
    row = {"cell": cell_id, "model": model, "dataset": dataset}
    seed = record.seed if record and record.seed is not None else params.get("seed")
    row.update({name: params.get(name, seed if name == "seed" else None) for name in swept})
    row["seed"] = seed
    row["status"] = (record.status if record else Status.FAILED if error else Status.PENDING).value
    row["error"] = (record.error if record else None) or error
    for key in ("max_epochs", "best_epoch", "epochs_trained", "epochs_to_best", "seconds_to_best", "under_trained", "data_seconds",
                "train_seconds", "test_seconds", "compile_seconds", "valid_metric", "protocol", "caveat"):
        row[key] = getattr(record, key) if record else None
    row["seconds"] = record.seconds if record else None
    usage = (record.device if record else None) or {}
    row.update(device=usage.get("device"), device_name=usage.get("name"), peak_memory_mb=usage.get("peak_memory_mb"))
    row["role"] = (record.search or {}).get("role") if record else None  # a search's trial or final seed
    row["best_valid_score"] = record.best_valid_score if record else None
    row.update({f"valid/{k}": v for k, v in (record.best_valid if record else {}).items()})
    row.update({f"test/{k}": v for k, v in (record.test if record else {}).items()})
    return row


def write_results(sweep_dir: Path, rows: list[dict], swept: list[str], title: str,
                  picks: dict | None = None) -> tuple[Path, Path]:
    paths = SweepPaths(Path(sweep_dir))
    csv_path, md_path = paths.results_csv, paths.results_md
    write_text_atomic(csv_path, results_csv(rows, swept))
    write_text_atomic(md_path, results_markdown(rows, swept, title, picks, load_asked(sweep_dir)))
    return csv_path, md_path


def results_csv(rows: list[dict], swept: list[str]) -> str:
    """A row per cell; `protocol` is the card's one-line summary (recrunner.run.protocol)."""
    metric_columns = sorted({k for row in rows for k in row if k.startswith(("valid/", "test/"))},
                            key=lambda k: (not k.startswith("valid/"), k))
    columns = [*ID_COLUMNS, *[s for s in swept if s != "seed"], "seed", *TAIL_COLUMNS, *metric_columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = {**row, "protocol": protocol_summary(row["protocol"]) if row.get("protocol") else None}
        writer.writerow({k: _csv_value(values.get(k)) for k in columns})
    return out.getvalue()




def results_markdown(rows: list[dict], swept: list[str], title: str, picks: dict | None = None,
                     asked: dict | None = None) -> str:
    """`picks`: each race's pick (report.racing.picked_runs): its runs are the table's; `asked`: a search's
    trials (report.budget.load_asked)."""
    rows = [dict(row) for row in rows]
    protocols = separate(rows)  # a dataset under two protocols is two columns, never one pooled cell
    counts = defaultdict(int)
    for row in rows:
        counts[row["status"]] += 1
    models = list(dict.fromkeys(row["model"] for row in rows))
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    chosen = best_configurations(rows, swept, picks)
    table = ResultTable(models, datasets, chosen)
    metrics = list(dict.fromkeys(k[5:] for row in rows for k in row if k.startswith("test/")))
    lines = [f"# {title}", "", f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ".",
             "Test metrics of the configuration with the best mean validation score per model and dataset; "
             f"mean ± std over seeds (n seeds); best per column in bold; {UNDER_TRAINED} may be under-trained "
             "(results.csv: under_trained).", ""]
    for metric in metrics:
        lines += [f"## test {metric}", "", "| model | " + " | ".join(datasets) + " |",
                  "|---|" + "---|" * len(datasets)]
        for model in models:
            cells = [_mean_std(table, model, dataset, metric) + _under_trained(chosen, model, dataset)
                     for dataset in datasets]
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += _protocols(protocols) + budget_lines(budgets(rows, asked), chosen) + _chosen_table(chosen, swept)
    lines += _caveats(rows) + _failures(rows)
    return "\n".join(lines) + "\n"


def _under_trained(chosen, model, dataset) -> str:
    flagged = any(run.get("under_trained") for run in chosen.get((model, dataset), []))
    return f" {UNDER_TRAINED}" if flagged else ""


def _protocols(protocols: dict) -> list[str]:
    if not protocols:
        return []
    lines = ["## protocols", ""]
    for dataset, card in protocols.items():
        lines.append(f"- {dataset}: {protocol_summary(card)}")
        lines += [f"  - warning: {warning}" for warning in protocol_warnings(card)]
    return lines + [""]




def _mean_std(table: ResultTable, model: str, dataset: str, metric: str) -> str:
    mean, std, n = table.cell(model, dataset, metric)
    if not n:
        return "–"
    text = (f"{mean:.4f} ± {std:.4f}" if n > 1 else f"{mean:.4f}") + f" (n={n})"
    return f"**{text}**" if mean == table.column_best(dataset, metric) else text


def _chosen_table(chosen, swept) -> list[str]:
    names = [s for s in swept if s != "seed"]
    if not chosen:
        return []
    lines = ["## chosen configurations", "", "| model | dataset | " + " | ".join(names + ["seeds", "device, peak memory"])
             + " |", "|---|---|" + "---|" * (len(names) + 2)]
    for (model, dataset), members in chosen.items():
        values = [_value(members[0].get(name)) for name in names] + [", ".join(str(r["seed"]) for r in members),
                                                                   _device_text(members)]
        lines.append(f"| {model} | {dataset} | " + " | ".join(values) + " |")
    return lines + [""]


def _value(value) -> str:
    """A chosen configuration's value of a swept setting; – where the model does not have it (its own
    parameters of other models) or does not read it (config/one_pass.py)."""
    return "–" if value is None else str(value)


def _device_text(members) -> str:
    """Where the chosen runs trained and the largest peak among them: `cuda:0, peak 3.0 GiB allocated`."""
    measured = [r for r in members if r.get("device")]
    if not measured:
        return "–"
    top = max(measured, key=lambda r: r.get("peak_memory_mb") or 0)
    return device_text({"device": top["device"], "peak_memory_mb": top.get("peak_memory_mb")})


def _caveats(rows) -> list[str]:
    """What a model did that its numbers depend on (run/models.py `model_caveat`: Pop counting per batch), once per
    model and caveat."""
    found = dict.fromkeys((row["model"], row["caveat"]) for row in rows if row.get("caveat"))
    return ["## model caveats", ""] + [f"- {model}: {caveat}" for model, caveat in found] + [""] if found else []


def _failures(rows) -> list[str]:
    failed = [row for row in rows if row["status"] in (Status.FAILED, Status.INTERRUPTED)]
    if not failed:
        return []
    return ["## cells not finished", ""] + [f"- `{row['cell']}`: {row['status']}: {row.get('error')}" for row in failed] + [""]


def _csv_value(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value

