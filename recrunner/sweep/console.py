"""What a sweep prints: one line per finished cell (pure)."""

from __future__ import annotations

from pathlib import Path

from ..record import Status
from .planning import PlannedCell


def cell_line(item: PlannedCell, result: dict) -> str:
    """One line per finished cell: what, how it ended, and where to look (pure)."""
    cell = item.cell
    swept = ",".join(f"{name}={_short(cell.params[name])}" for name in cell.swept if name in cell.params)
    what = f"{cell.model} on {cell.dataset}" + (f" ({swept})" if swept else "")
    run_dir = Path(result.get("run_dir") or item.run_dir or ".")
    if result["status"] == Status.PRUNED:
        return f"pruned  {what}: {result.get('error')} -> {run_dir}"
    if result["status"] != Status.OK:
        return f"FAILED  {what}: {result.get('error')} (log: {run_dir / 'run.log'})"
    test = ", ".join(f"{k}={v:.4f}" for k, v in (result.get("test") or {}).items())
    done = "already finished" if result.get("skipped") else f"best epoch {result.get('best_epoch')}, {result.get('seconds', 0):.0f}s"
    notes = "".join(f"\n        warning: {warning}" for warning in result.get("warnings") or ())
    return f"ok      {what} ({done}): test {test} -> {run_dir}" + notes


def _short(value):
    """A sampled float as people read it (0.0012520653814999472 -> 0.001252); the run id keeps it whole."""
    return f"{value:.4g}" if isinstance(value, float) else value


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
