"""`recrunner [--model ...] [--grid ...]`: one run, a sweep or a search. Builds the request from the
arguments, calls the sweep library, prints what it says; the exit code."""

from __future__ import annotations

import sys

from ..core.errors import ConfigError
from ..core.interrupts import sigterm_interrupts
from ..core.layout import OutputPaths
from ..run.record import Status
from ..sweep import forkserver
from ..sweep.request import SweepRequest, cells_of, describe_plan, grid_of, may_have_work, sweep_name
from .arguments import sweep_options, workspace_of


def run_command(args) -> int:
    from ..seams.environment import prepare_environment

    prepare_environment()  # a missing RecBole or pandas 3: one line before anything imports RecBole
    request = request_of(args)
    grid, overrides = grid_of(request)
    name = sweep_name(request, grid)
    from .search import search_options

    search = search_options(args, grid)
    if search is not None:
        from .search import run_search

        return run_search(args, cells_of(request, grid, overrides, search.final_seeds), name, search, workspace_of(args))
    cells = cells_of(request, grid, overrides)
    record = OutputPaths(args.output).sweep(name).record
    if not args.dry_run and forkserver.serves(args.backend, args.workers, args.gpus) and \
            may_have_work(record, cells, restart=args.restart, resume_from=args.resume_from):
        forkserver.start()  # it imports torch and RecBole while this process does the same
    return _plan_and_run(args, cells, name)


def _plan_and_run(args, cells, name) -> int:
    from ..sweep import plan
    from ..sweep.executors import check_gpus

    if args.gpus and args.backend == "local":
        check_gpus(args.gpus)
    workspace = workspace_of(args)
    planned = plan(cells, workspace, name, command=args.command)
    if args.dry_run:
        print(describe_plan(name, planned, workspace.output_dir))
        return 0
    with sigterm_interrupts():
        if args.resume_from is not None:
            return _resume_one(planned, workspace, args)
        return _sweep(name, planned, workspace, args)


def request_of(args) -> SweepRequest:
    return SweepRequest(grid_file=args.grid, models=tuple(args.model or ()), datasets=tuple(args.dataset or ()),
                        config_files=tuple(args.config_file), set_options=(("fast=true",) if args.fast else ()) + tuple(args.set),
                        name=args.name,
                        output=args.output, resume_from=args.resume_from)


def _sweep(name, planned, workspace, args) -> int:
    from ..sweep import run_sweep

    summary = run_sweep(name, planned, workspace, sweep_options(args))
    if summary.interrupted:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
    return summary.exit_code


def _resume_one(planned, workspace, args) -> int:
    from ..run.experiment import run_experiment
    from ..sweep.console import cell_line

    if len(planned) != 1:
        raise ConfigError("--resume-from continues one run; give one model and one dataset")
    item = planned[0]
    result = run_experiment(item.experiment, workspace, restart=args.restart, resume_from=args.resume_from,
                            console=not args.quiet)
    print(cell_line(item, result))
    return 0 if result.status == Status.OK else 1
