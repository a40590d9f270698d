"""The report's charts (PNG), drawn with matplotlib (pip install 'recrunner[report]')."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .model import cell_stats, curves

logger = logging.getLogger("recrunner")


def write_plots(report, out_dir: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no charts (pip install 'recrunner[report]')")
        return []
    written = [_metric_chart(plt, report, metric, out_dir) for metric in report.metrics]
    written += [path for dataset in report.datasets if (path := _curves_chart(plt, report, dataset, out_dir))]
    return written


def _metric_chart(plt, report, metric, out_dir):
    models, datasets = report.models, report.datasets
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(datasets) + 2), 3.6))
    for i, model in enumerate(models):
        cells = [cell_stats(report, model, d, metric) for d in datasets]
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(datasets))]
        means = [c[0] if c[2] else 0 for c in cells]
        errors = [c[1] if c[2] > 1 else 0 for c in cells]
        ax.bar(xs, means, width, yerr=errors, capsize=3, label=model)
    ax.set_xticks(range(len(datasets)), datasets)
    ax.set_ylabel(f"test {metric}")
    ax.set_title(f"Test {metric}\nmean ± std over seeds, best configuration by validation", fontsize=10)
    return _save(plt, fig, ax, out_dir / f"test_{file_part(metric)}.png", ncol=min(4, len(models)))


def _curves_chart(plt, report, dataset, out_dir):
    lines = curves(report, dataset)
    if not lines:
        return None
    metric = next((runs[0]["valid_metric"] for m in report.models if (runs := report.chosen.get((m, dataset)))),
                  "score")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for model, points in lines.items():
        ax.plot([e for e, _ in points], [v for _, v in points], marker="o", markersize=3, label=model)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch (-1: before training)")
    ax.set_ylabel(f"validation {metric}")
    ax.set_title(f"Validation curves on {dataset} (mean over seeds)")
    return _save(plt, fig, ax, out_dir / f"valid_{file_part(dataset)}.png")


def file_part(label: str) -> str:
    """A metric or dataset label as part of a file name a shell takes unquoted: `ndcg@10` -> `ndcg_at_10`, a
    dataset under two protocols, `ml-100k [grouping global; ...]` -> `ml-100k_grouping_global_...` (pure)."""
    return re.sub(r"[^\w.-]+", "_", label.replace("@", "_at_")).strip("_")


def _save(plt, fig, ax, path: Path, ncol: int = 1) -> Path:
    """The charts' common finish: legend, no top/right frame, tight layout, 120 dpi PNG."""
    ax.legend(frameon=False, fontsize="small", ncol=ncol)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
