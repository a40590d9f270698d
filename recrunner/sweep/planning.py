"""Planning a sweep's cells: each prepared (nothing written), and the order they are dispatched in."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.params import setting
from ..data.cache import data_key
from ..core.errors import ConfigError
from ..run.distributed import check_data_parallel
from ..run.experiment import Experiment, Workspace, prepare
from .grid import Cell, swept_parameters


@dataclass
class PlannedCell:
    cell: Cell
    experiment: Experiment
    cell_id: str | None = None        # <dataset>/<model>/<run_id>, once prepare accepted it
    run_dir: Path | None = None
    error: str | None = None          # why prepare refused it
    data_key: str | None = None       # its entry in the data cache (cells sharing one share data)
    config: Any = None                # RecBole's resolved configuration, once prepare accepted it
    trial: Any = None                 # a search trial's TrialRef: its run reports to the study (search/)



def plan(cells: list[Cell], workspace: Workspace, sweep: str, command: str | None = None) -> list[PlannedCell]:
    """Prepare every cell (no file is written); raise the first error if no cell is valid.
    `command`: the command line, recorded in each run's provenance."""
    id_keys = tuple(swept_parameters(cells)) if any(cell.swept for cell in cells) else None
    planned = [plan_one(cell, workspace, sweep, id_keys, command, raises=len(cells) == 1) for cell in cells]
    if planned and all(item.error for item in planned):
        raise ConfigError(f"no cell of the sweep is valid; the first: {planned[0].error}")
    return planned


def plan_one(cell: Cell, workspace: Workspace, sweep: str, id_keys, command: str | None = None, *,
             raises: bool = False, search: dict | None = None) -> PlannedCell:
    """One cell prepared (nothing written); its error kept in the cell unless `raises`."""
    experiment = Experiment(cell.model, cell.dataset, dict(cell.params), sweep=sweep, id_keys=id_keys,
                            command=command, search=dict(search or {}))
    item = PlannedCell(cell, experiment)
    try:
        prepared = prepare(experiment, workspace)
        check_data_parallel(prepared)  # a run that cannot train in its nproc processes says so now
        item.cell_id = "/".join(prepared.paths.run_dir.relative_to(workspace.output_dir / sweep.split("/")[0]).parts)
        item.run_dir, item.config = prepared.paths.run_dir, prepared.config
        item.data_key = data_key(prepared.config) if setting(prepared.config, "data_cache") else item.cell_id
    except ConfigError as exc:
        if raises:
            raise
        item.error = f"{type(exc).__name__}: {exc}"
    return item


def dispatch_order(cells: list[tuple[str, str]]) -> list[str]:
    """(cell id, data key) pairs -> cell ids, round-robin over the data keys, each key's cells in
    their order: with a cold cache, parallel workers then build different datasets at once
    instead of waiting on one build (pure)."""
    groups: dict[str, list[str]] = {}
    for cell_id, key in cells:
        groups.setdefault(key, []).append(cell_id)
    rounds = itertools.zip_longest(*groups.values())
    return [cell_id for cells_of_round in rounds for cell_id in cells_of_round if cell_id is not None]
