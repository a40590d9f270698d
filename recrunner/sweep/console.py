"""What a sweep prints: one line per finished cell (pure but for `progress_line`'s record of warnings shown)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.layout import RunPaths
from ..run.convergence import UNDER_TRAINED
from ..run.record import Status, device_text
from ..run.result import RunResult
from .planning import PlannedCell


def cell_line(item: PlannedCell, result: RunResult) -> str:
    """One line per finished cell: what, how it ended, and where to look (pure)."""
    cell = item.cell
    swept = ",".join(f"{name}={_short(cell.params[name])}" for name in cell.swept if name in cell.params)
    what = f"{cell.model} on {cell.dataset}" + (f" ({swept})" if swept else "")
    run_dir = Path(result.run_dir or item.run_dir or ".")
    if result.status == Status.PRUNED:
        return f"pruned  {what}: {result.error} -> {run_dir}"
    if result.status != Status.OK:
        where = f" (log: {RunPaths(run_dir).log})" if result.run_dir or item.run_dir else ""
        return f"FAILED  {what}: {result.error}{where}"
    test = ", ".join(f"{k}={v:.4f}" for k, v in (result.test or {}).items())
    done = "already finished" if result.skipped else f"best epoch {result.best_epoch}, {result.seconds or 0:.0f}s"
    done += f" on {device_text(result.device)}" if result.device and not result.skipped else ""
    notes = "".join(f"\n        warning: {warning}" for warning in result.warnings)
    return f"ok      {what} ({done}): test {test} -> {run_dir}" + notes


def progress_line(item: PlannedCell, result: RunResult, done: int, total: int, durations: list[float],
                  workers: int, warned: set[str]) -> str:
    """A finished cell's line with the sweep's progress and ETA; a warning shown before is left out unless
    it says the run may be under-trained (`warned`: the warnings shown so far, updated)."""
    fresh = tuple(w for w in result.warnings if w.startswith(UNDER_TRAINED) or w not in warned)
    warned.update(result.warnings)
    eta = eta_text(durations, max(0, total - done), workers)
    return f"[{done}/{total}{eta}] " + cell_line(item, replace(result, warnings=fresh))


def refusal_line(cell_id: str, decision: str, error: str | None) -> str | None:
    """The line for a cell the record would not let this sweep run (record.decide), if it needs one (pure)."""
    if decision == "busy":
        return f"busy    {cell_id}: running in another sweep process; left to it"
    if decision == "failed":
        return f"FAILED  {cell_id}: {error} (out of retries; --retries N to try again)"
    return None


def _short(value):
    """A sampled float as people read it (0.0012520653814999472 -> 0.001252); the run id keeps it whole."""
    return f"{value:.4g}" if isinstance(value, float) else value


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def eta_text(durations: list[float], remaining: int, workers: int) -> str:
    """", ETA 3m10s" from the cells' mean duration, or "" before the first (pure)."""
    if not durations or not remaining:
        return ""
    parallel = max(1, min(workers, remaining))
    return f", ETA {clock(sum(durations) / len(durations) * remaining / parallel)}"


def summary_line(summary) -> str:
    """The sweep's last line: how its cells ended, its time, where its table is (pure)."""
    c = summary.counts
    state = "interrupted; the same command resumes it" if summary.interrupted else "done"
    others = f", {c['busy']} running elsewhere" if c.get("busy") else ""
    others += f", {c['repeated']} trials drew a configuration already run (told its score)" if c.get("repeated") else ""
    pruned = f"{c['pruned']} pruned, " if c.get("pruned") else ""
    return (f"sweep {summary.name} {state}: {c.get('ok', 0)} ok, {pruned}{c.get('failed', 0)} failed, "
            f"{c.get('skipped', 0)} skipped{others} in {clock(summary.seconds)}; results: {summary.results_md}")
