"""The server that `--workers` cells are forked from (executors.LocalProcesses).

It imports `recrunner.sweep.preload` once, so each cell's fresh process starts with torch,
RecBole and what a run imports lazily already loaded. This module itself imports nothing heavy:
the command line starts the server first thing, and it imports while the sweep process does the
same and plans the cells.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver

_context = None


def serves(backend: str, workers: int, gpus) -> bool:
    """Whether a sweep with these options runs its cells in processes forked from the server (pure)."""
    return backend == "local" and (workers > 1 or bool(gpus))


def context():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["recrunner.sweep.preload"])
    return _context


def start() -> None:
    """Start the server now rather than at the first cell."""
    context()
    multiprocessing.forkserver.ensure_running()
