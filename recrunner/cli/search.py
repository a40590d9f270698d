"""The command line's search: its options from the flags and the grid file, and the run (cli/run.py calls these)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import ConfigError
from ..core.interrupts import sigterm_interrupts
from .arguments import sweep_options


def search_options(args, grid):
    """The search the command line and grid file ask for (the command line wins), or None."""
    from ..sweep.grid import check_search_settings

    method = args.search or grid.search
    settings = {"trials": args.trials or grid.trials, "prune": args.prune or grid.prune,
                "final_seeds": args.final_seeds if args.final_seeds is not None else grid.final_seeds,
                "prune_after": args.prune_after or grid.prune_after}
    check_search_settings(method, **settings, source="--search")
    if method is None:
        return None
    if args.resume_from is not None:
        raise ConfigError("--resume-from continues one run, not a search; run the search command again to resume it")
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise ConfigError("--search needs Optuna, an optional extra: pip install -e \".[search]\" (or pip install optuna)")
    from ..search.driver import PRUNE_AFTER, SearchOptions

    return SearchOptions(method=method, trials=settings["trials"] or 20, prune=settings["prune"] or "none",
                         final_seeds=settings["final_seeds"] or 0, prune_after=settings["prune_after"] or PRUNE_AFTER,
                         storage=args.storage)


def select_options(args, grid, final_seeds: int | None):
    """Racing as the command line and grid file ask for it (the command line wins), or None."""
    from ..sweep.grid import check_select_settings
    from ..sweep.selection import SelectOptions

    top, seeds = args.select_top or grid.select_top, args.select_seeds or grid.select_seeds
    check_select_settings(top, seeds, grid.seeds, search=args.search or grid.search, source="--select-top")
    if top is None:
        return None
    if args.resume_from is not None:
        raise ConfigError("--resume-from continues one run, not a race; run the same command again to resume it")
    return SelectOptions(top=top, seeds=seeds or 3, final_seeds=final_seeds or 0)


def run_search(args, specs, name, options, workspace, select=None) -> int:
    """Check the space, then run the search as a sweep (or print it: --dry-run); the exit code."""
    from ..sweep import forkserver
    from ..sweep import run_sweep
    from ..search.cells import start_search

    search = start_search(specs, workspace, name, options, command=args.command, select=select)
    if args.restart and not args.dry_run and search.journal:
        Path(search.storage_url).unlink(missing_ok=True)  # --restart: the study starts over too
    search.check()
    if args.dry_run:
        print("\n".join([f"sweep {name}: a search -> {workspace.output_dir / name}", *search.describe()]))
        return 0
    for line in search.left_out():
        print(line)
    if forkserver.serves(args.backend, args.workers, args.gpus):
        forkserver.start()
    with sigterm_interrupts():
        summary = run_sweep(name, [], workspace, sweep_options(args), search=search)
    if summary.interrupted:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
    return summary.exit_code
