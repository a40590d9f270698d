"""Sweeps: grids of cells (grid), the crash-safe record (record), where cells run (executors,
worker), the loop (runner) and the tables (results)."""

from .grid import Cell, Grid, expand, grid_from_mapping, load_grid, swept_parameters
from .runner import PlannedCell, SweepOptions, SweepSummary, plan, run_sweep

__all__ = ["Cell", "Grid", "PlannedCell", "SweepOptions", "SweepSummary", "expand", "grid_from_mapping", "load_grid",
           "plan", "run_sweep", "swept_parameters"]
