"""The report's files: report.md, summary.csv and tables.tex from a built `Report` (build.py)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from ..core.layout import SweepPaths
from ..run.convergence import UNDER_TRAINED_MARK
from ..run.protocol import card_lines
from ..run.protocol import summary as protocol_summary
from ..run.protocol import warnings as protocol_warnings
from ..core.files import write_text_atomic
from .budget import budget_lines, budgets
from .racing import race_lines
from .model import Report, cell_spread, cell_stats, under_trained


def _column_best(report, dataset, metric):
    return report.table.column_best(dataset, metric)


def _significant(report, metric, dataset, model) -> bool:
    found = report.significance.get((metric, dataset, model))
    return found is not None and found.p_holm < report.alpha


def _spread_words(report: Report) -> str:
    return "mean ± 95% confidence interval (t, over seeds)" if report.interval == "ci" else "mean ± std over seeds"


def markdown(report: Report) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in report.counts.items())
    lines = [f"# Report: {report.sweep_dir.name}", "",
             f"Runs: {counts}. Test metrics of the configuration with the best mean validation score per model and "
             f"dataset, {_spread_words(report)} (n). Best per column in **bold**; † differs from the baseline "
             f"{report.baseline} (paired Wilcoxon signed-rank test over users, Holm-corrected across models and "
             f"datasets, p < {report.alpha}); {UNDER_TRAINED_MARK} may be under-trained (see Training budget). "
             "Runs under different protocols are never pooled; the numbers hold under these protocols "
             "(details under Protocols):", ""]
    lines += [f"- {dataset}: {protocol_summary(card)}" for dataset, card in report.protocols.items()] + [""]
    for metric in report.metrics:
        lines += [f"## test {metric}", "", "| model | " + " | ".join(report.datasets) + " |",
                  "|---|" + "---|" * len(report.datasets)]
        for model in report.models:
            cells = []
            for dataset in report.datasets:
                mean, spread, n = cell_spread(report, model, dataset, metric)
                if not n:
                    cells.append("–")
                    continue
                text = f"{mean:.4f}" + (f" ± {spread:.4f}" if math.isfinite(spread) else "") + f" ({n})"
                text = f"**{text}**" if mean == _column_best(report, dataset, metric) else text
                cells.append(text + (" †" if _significant(report, metric, dataset, model) else "")
                             + (f" {UNDER_TRAINED_MARK}" if under_trained(report, model, dataset) else ""))
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += _protocols(report) + budget_lines(budgets(report.rows, report.asked), report.chosen) + race_lines(report.races)
    lines += _significance_table(report) + _budget(report)
    lines += ["## flagged runs", ""]
    lines += [f"- `{row['run_dir'].relative_to(report.sweep_dir)}`: {reason}" for row, reason in report.flags] or ["none"]
    return "\n".join(lines) + "\n"


def p_text(p: float) -> str:
    """A p-value in 3 significant digits; one below the smallest float scipy returns is "< 1e-300",
    not 0 (the Wilcoxon test's normal approximation underflows for thousands of users)."""
    return "< 1e-300" if p < 1e-300 else f"{p:.3g}"


def _protocols(report: Report) -> list[str]:
    lines = ["## protocols", ""]
    for dataset in report.datasets:
        card = report.protocols.get(dataset)
        if card is None:
            lines += [f"### {dataset}", "", "- not recorded (runs written before recrunner recorded protocols)", ""]
            continue
        lines += [f"### {dataset}", "", f"{protocol_summary(card)}.", "", *card_lines(card)]
        lines += [f"- **warning:** {warning}" for warning in protocol_warnings(card)] + [""]
    return lines


def _significance_table(report: Report) -> list[str]:
    lines = [f"## significance and effect sizes against {report.baseline}", "",
             "Mean paired difference over users (model − baseline, each user averaged over paired seeds) with a "
             "95% bootstrap confidence interval (2000 resamples of users), relative improvement of the mean, "
             "Wilcoxon signed-rank p and Holm-adjusted p.", "",
             "| metric | dataset | model | difference [95% CI] | relative | p | Holm-adjusted p | significant |",
             "|---|---|---|---|---|---|---|---|"]
    for (metric, dataset, model), c in sorted(report.significance.items()):
        relative = "–" if c.relative is None else f"{c.relative:+.1%}"
        lines.append(f"| {metric} | {dataset} | {model} | {c.difference:+.4f} [{c.low:+.4f}, {c.high:+.4f}] | "
                     f"{relative} | {p_text(c.p)} | {p_text(c.p_holm)} | {'yes' if c.p_holm < report.alpha else 'no'} |")
    if not report.significance:
        lines.append("| – | – | – | – | – | – | – | no paired per-user results (test_per_user.npz) to compare |")
    return lines + [""]


def _budget(report: Report) -> list[str]:
    lines = ["## training budget and convergence", "",
             "Per chosen configuration, mean over its seeds: epochs trained, epochs to the best epoch and seconds "
             f"to it (training and validation), run time; {UNDER_TRAINED_MARK}: seeds whose best epoch was the "
             "last validated or that reached `epochs` without early stopping.", "",
             "| model | dataset | seeds | epochs trained | epochs to best | seconds to best | seconds | "
             f"{UNDER_TRAINED_MARK} may be under-trained |", "|---|---|---|---|---|---|---|---|"]
    for dataset in report.datasets:
        for model in report.models:
            runs = report.chosen.get((model, dataset), [])
            if not runs:
                continue
            flagged = under_trained(report, model, dataset)
            values = [_mean(runs, key) for key in ("epochs_trained", "epochs_to_best", "seconds_to_best", "seconds")]
            lines.append(f"| {model} | {dataset} | {len(runs)} | " + " | ".join(values)
                         + f" | {f'{flagged} of {len(runs)}' if flagged else 'no'} |")
    return lines + [""]


def _mean(runs, key) -> str:
    values = [r.get(key) for r in runs if r.get(key) is not None]
    return f"{np.mean(values):.1f}" if values else "–"


def summary_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["metric", "dataset", "model", "mean", "std", "ci95", "n", "p", "p_holm", "significant",
                     "difference", "difference_low", "difference_high", "relative", "best", "epochs_to_best",
                     "seconds_to_best", "under_trained"])
    for metric in report.metrics:
        for dataset in report.datasets:
            for model in report.models:
                mean, std, n = cell_stats(report, model, dataset, metric)
                ci = cell_spread(_with_interval(report, "ci"), model, dataset, metric)[1]
                c = report.significance.get((metric, dataset, model))
                runs = report.chosen.get((model, dataset), [])
                writer.writerow([metric, dataset, model, _num(mean), _num(std), _num(ci), n,
                                 *(_num(v) for v in ((c.p, c.p_holm) if c else (None, None))),
                                 c is not None and c.p_holm < report.alpha,
                                 *(_num(v) for v in ((c.difference, c.low, c.high, c.relative) if c else (None,) * 4)),
                                 n > 0 and mean == _column_best(report, dataset, metric),
                                 _mean(runs, "epochs_to_best").replace("–", ""),
                                 _mean(runs, "seconds_to_best").replace("–", ""), under_trained(report, model, dataset)])
    return out.getvalue()


def _with_interval(report: Report, interval: str) -> Report:
    from dataclasses import replace

    return replace(report, interval=interval)


def latex(report: Report) -> str:
    def escape(text):
        return str(text).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

    spread = "95\\% CI" if report.interval == "ci" else "std"
    blocks = []
    for metric in report.metrics:
        rows, single = [], False  # single: a cell of one seed, without a spread
        for model in report.models:
            cells = []
            for dataset in report.datasets:
                mean, deviation, n = cell_spread(report, model, dataset, metric)
                single |= n == 1
                text = "--" if not n else f"{mean:.4f}" + (f" $\\pm$ {deviation:.4f}" if math.isfinite(deviation) else "") + (
                    "$^{*}$" if _significant(report, metric, dataset, model) else "")
                cells.append(f"\\textbf{{{text}}}" if n and mean == _column_best(report, dataset, metric) else text)
            rows.append(escape(model) + " & " + " & ".join(cells) + r" \\")
        protocols = "; ".join(f"{escape(d)}: {escape(protocol_summary(c))}" for d, c in report.protocols.items())
        blocks.append("\n".join([
            r"\begin{table}[t]", r"\centering",
            f"\\caption{{Test {escape(metric)}: mean $\\pm$ {spread} over seeds"
            f"{' (a value without one: a single seed)' if single else ''}; best in bold; $^{{*}}$ differs from "
            f"{escape(report.baseline)} (Wilcoxon signed-rank over users, Holm-corrected, $p<{report.alpha}$). "
            f"Protocol: {protocols}.}}",
            r"\begin{tabular}{l" + "c" * len(report.datasets) + "}", r"\toprule",
            "Model & " + " & ".join(escape(d) for d in report.datasets) + r" \\", r"\midrule", *rows,
            r"\bottomrule", r"\end{tabular}", r"\end{table}"]))
    return "\n\n".join(blocks) + "\n"


def _num(value):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.6g}"


def write_report(report: Report, out_dir: Path | None = None) -> list[Path]:
    from . import plots

    out_dir = Path(out_dir or SweepPaths(report.sweep_dir).report)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("report.md", markdown(report)), ("summary.csv", summary_csv(report)),
                       ("tables.tex", latex(report))):
        write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    written += plots.write_plots(report, out_dir)
    return written
