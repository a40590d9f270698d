"""Sweeps: grids of cells (grid), the crash-safe record (record), where cells run (executors,
worker), the loop (runner) and the tables (results).

Names are imported on first use (PEP 562): the CLI reads and checks a grid (grid.py, light)
before torch and RecBole are imported by the runner.
"""

from ..core.lazy import exports

_PUBLIC = {
    "Cell": "grid", "Grid": "grid", "expand": "grid", "grid_from_mapping": "grid", "load_grid": "grid",
    "swept_parameters": "grid",
    "PlannedCell": "planning", "plan": "planning", "SweepOptions": "runner", "SweepSummary": "runner",
    "run_sweep": "runner",
}
__all__ = sorted(_PUBLIC)


__getattr__ = exports(__name__, _PUBLIC)
