"""A search's cells on disk: trials in runs/<sweep>/, a race's seed runs in runs/<sweep>/select/, final
seeds in runs/<sweep>/final/, each planned as a sweep cell (nothing is written until it runs)."""

from __future__ import annotations

from ..core.layout import FINAL, SELECT
from .driver import Search, SearchOptions


def start_search(specs, workspace, name: str, options: SearchOptions, command: str | None = None,
                 select=None) -> Search:
    """The search of a sweep: trials in runs/<name>/, final seeds in runs/<name>/final/; with `select`
    (sweep.selection.SelectOptions), the race's seed runs in runs/<name>/select/."""
    from ..sweep.grid import Cell
    from ..sweep.planning import plan_one
    from ..sweep.selection import Selection

    id_keys = tuple(dict.fromkeys(key for spec in specs for key in spec.space)) + ("seed",)
    by_study = {spec.study_name: spec for spec in specs}

    def plan_cell(spec, params, seed, search, trial=None):
        cell = Cell(spec.model, spec.dataset, {**spec.fixed, **params, "seed": seed}, swept=(*spec.space, "seed"))
        role = (search or {}).get("role")
        folder = f"{name}/{role}" if role in (FINAL, SELECT) else name
        item = plan_one(cell, workspace, folder, id_keys, command, search=search)
        item.trial = trial
        return item

    def plan_race_run(first, seed, role):
        spec = by_study[f"{first.cell.dataset}/{first.cell.model}"]
        params = {k: v for k, v in first.cell.params.items() if k != "seed"}
        return plan_cell(spec, params, seed, {"role": role, "of": first.cell_id})

    selection = Selection(plan_race_run, select, workspace.output_dir / name) if select else None
    return Search(specs, plan_cell, workspace.output_dir / name, options, selection)
