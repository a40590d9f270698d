"""Searches: N trials per (model, dataset) from a space in the grid file, with Optuna's samplers
and pruners, on the sweep's crash-safe machinery (space: the grid's distributions, pure;
pruning: the callback and the study storage; driver: asking, planning and telling).

Names are imported on first use (PEP 562): the CLI reads a grid's space before torch is imported.
"""

from ..lazy import exports

_PUBLIC = {
    "Distribution": "space", "SearchSpec": "space", "is_distribution": "space", "parse": "space",
    "OptunaPruning": "pruning", "TrialRef": "pruning", "make_pruner": "pruning", "make_sampler": "pruning",
    "Search": "driver", "SearchOptions": "driver", "start_search": "driver",
}
__all__ = sorted(_PUBLIC)

__getattr__ = exports(__name__, _PUBLIC)
