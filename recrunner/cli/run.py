"""`recrunner [--model ...] [--grid ...]`: one run, a sweep or a search. Builds the request from the
arguments, calls the sweep library, prints what it says; the exit code."""

from __future__ import annotations

import logging
import os
import sys

from ..core.errors import ConfigError
from ..core.interrupts import sigterm_interrupts
from ..core.layout import OutputPaths
from ..run.record import Status
from ..sweep import forkserver
from ..sweep.request import SweepRequest, cells_of, describe_plan, describe_unread, grid_of, may_have_work, sweep_name
from .arguments import sweep_options, user_config_dir, workspace_of


EXIT_AT_ONCE = False  # a torchrun process whose work is written: recrunner/__main__.py ends it with `exit_at_once`


def exit_at_once(code: int) -> None:
    """End this process without the interpreter's teardown (os._exit, as multiprocessing ends the processes of
    `--nproc`), its logs and streams flushed first: a torchrun worker of CI's BPR test aborted in that teardown
    after its run was written and its group left ("terminate called without an active exception", exit -6: a
    C++ thread that torch's distributed code leaves behind)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def run_command(args) -> int:
    from ..seams.environment import prepare_environment

    prepare_environment()  # a missing RecBole or pandas 3: one line before anything imports RecBole
    world = _under_torchrun(args)
    if world is None:
        return _run(args)
    from ..sweep.distributed import follow_sweep, hand_over
    from ..training.distributed.world import leave_group

    try:
        if world.rank != 0:
            return follow_sweep(world)  # rank 0 runs the sweep and hands each cell over
        try:
            return _run(args)
        finally:
            hand_over(world, None)  # the sweep is over: the other processes exit
    finally:
        leave_group()  # before the interpreter's exit, not during it
        global EXIT_AT_ONCE
        EXIT_AT_ONCE = True


def _under_torchrun(args):
    """This process's World when torchrun started the command; --nproc then is torchrun's process count."""
    from ..sweep.distributed import torchrun_world

    world = torchrun_world()
    args.under_torchrun = world is not None
    if world is None:
        return None
    if args.nproc not in (None, world.size):
        raise ConfigError(f"--nproc {args.nproc} but torchrun started {world.size} processes; leave --nproc out")
    if args.workers != 1 or args.backend != "local":
        raise ConfigError("under torchrun the processes train one run at a time: leave out --workers and --backend")
    args.nproc = world.size
    return world


def _run(args) -> int:
    request = request_of(args)
    grid, overrides = grid_of(request)
    name = sweep_name(request, grid)
    from .search import search_options, select_options

    search = search_options(args, grid)
    select = select_options(args, grid, search.final_seeds if search else None)
    if search is not None:
        from .search import run_search

        seeds = max(search.final_seeds, select.seeds if select else 0)  # the seeds each study needs
        return run_search(args, cells_of(request, grid, overrides, seeds), name, search, workspace_of(args), select)
    cells = cells_of(request, grid, overrides)
    if (unread := describe_unread(grid, overrides)) is not None:
        print(unread)
    record = OutputPaths(args.output).sweep(name).record
    launches = (args.nproc or 1) > 1 and not args.under_torchrun  # --nproc: the run's processes fork from it
    if not args.dry_run and (forkserver.serves(args.backend, args.workers, args.gpus) or launches) and \
            may_have_work(record, cells, restart=args.restart, resume_from=args.resume_from):
        forkserver.start()  # it imports torch and RecBole while this process does the same
    return _plan_and_run(args, cells, name, select)


def _plan_and_run(args, cells, name, select=None) -> int:
    """Plan the cells, then run them (or print them: --dry-run); `select`: racing's SelectOptions."""
    from ..sweep import plan
    from ..sweep.executors import check_gpus

    if args.gpus and args.backend == "local":
        check_gpus(args.gpus)
        if len(args.gpus) < (args.nproc or 1):
            raise ConfigError(f"--nproc {args.nproc} trains each run on {args.nproc} GPUs, --gpus gives "
                              f"{len(args.gpus)}; name at least {args.nproc}")
    workspace = workspace_of(args)
    planned = plan(cells, workspace, name, command=args.command)
    if args.dry_run:
        print(describe_plan(name, planned, workspace.output_dir))
        if select is not None:
            from ..sweep.selection import describe

            print(describe(select))
        return 0
    with sigterm_interrupts():
        if args.resume_from is not None:
            return _resume_one(planned, workspace, args)
        return _sweep(name, planned, workspace, args, select)


def request_of(args) -> SweepRequest:
    """What the command asks for; a --grid or --config-file that is not a path here is a packaged one
    (`quick.yaml`, `grids/smoke.yaml`: recrunner.config.layers.config_file)."""
    from ..config.layers import config_file

    folder = user_config_dir(args)
    return SweepRequest(grid_file=config_file(args.grid, folder, under="grids") if args.grid else None,
                        models=tuple(args.model or ()), datasets=tuple(args.dataset or ()),
                        config_files=tuple(config_file(path, folder) for path in args.config_file),
                        set_options=_flag_options(args) + _processes(args) + tuple(args.set),
                        name=args.name, output=args.output, resume_from=args.resume_from)


def _flag_options(args) -> tuple:
    """--fast and --deterministic as the settings they stand for (part of each run's identity)."""
    return tuple(f"{key}=true" for key in ("fast", "deterministic") if getattr(args, key, False))


def _processes(args) -> tuple:
    return (f"nproc={args.nproc}",) if (getattr(args, "nproc", None) or 1) > 1 else ()


def _sweep(name, planned, workspace, args, select=None) -> int:
    from ..sweep import run_sweep

    racing = None
    if select is not None:
        from ..sweep.selection import race_grid

        racing = race_grid(planned, workspace, name, select, command=args.command)
    summary = run_sweep(name, planned, workspace, sweep_options(args), search=racing)
    if summary.interrupted:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
    return summary.exit_code


def _resume_one(planned, workspace, args) -> int:
    from ..run.experiment import run_experiment
    from ..sweep.console import cell_line

    if len(planned) != 1:
        raise ConfigError("--resume-from continues one run; give one model and one dataset")
    if (args.nproc or 1) > 1:
        raise ConfigError("--resume-from continues a run in one process; a run of several processes resumes "
                          "from its own last.pth when the same command runs again")
    item = planned[0]
    result = run_experiment(item.experiment, workspace, restart=args.restart, resume_from=args.resume_from,
                            console=not args.quiet)
    print(cell_line(item, result))
    return 0 if result.status == Status.OK else 1
