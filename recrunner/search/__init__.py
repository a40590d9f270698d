"""Searches: N trials per (model, dataset) from a space in the grid file, with Optuna's samplers
and pruners, on the sweep's crash-safe machinery. The grid's distributions are parsed with the
grid (sweep/space.py), the pruning callback is a training callback
(training/callbacks/pruning.py); driver.py asks, plans and tells; cells.py says where each run lives;
racing the best trials over seeds is sweep/selection.py's.

Names are imported on first use (PEP 562): the CLI reads a grid's space before torch is imported.
"""

from ..core.lazy import exports

_PUBLIC = {"Search": "driver", "SearchOptions": "driver", "start_search": "cells"}
__all__ = sorted(_PUBLIC)

__getattr__ = exports(__name__, _PUBLIC)
