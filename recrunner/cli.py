"""The command line: parse, call the library, print. `main(argv) -> exit code`.

Exit codes: 0 every run succeeded, 1 a run failed, 2 usage or configuration error,
130 interrupted (SIGTERM or Ctrl-C; the same command resumes).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from . import forkserver
from .config import default_config_dir, load_yaml, parse_set_options
from .errors import ConfigError, RecrunnerError, RunInterrupted, one_line
from .interrupts import sigterm_interrupts
from .record import Status

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise ConfigError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="recrunner", description="Train and evaluate RecBole models; re-running a command resumes it.",
                     epilog="Also: `recrunner report SWEEP_DIR` (tables, tests, effect sizes, charts) and "
                            "`recrunner reproduce RUN_DIR` (run a finished run again and compare), `recrunner cache list|prune` "
                            "(the shared preprocessed datasets); each has --help.")
    parser.add_argument("--model", nargs="+", default=None, help="RecBole model name(s) (default: SASRec, or the grid's)")
    parser.add_argument("--dataset", nargs="+", default=None, help="dataset name(s) (default: ml-100k, or the grid's)")
    parser.add_argument("--grid", type=Path, default=None, metavar="FILE",
                        help="grid YAML: models, datasets, swept params, seeds (see configs/grids/)")
    parser.add_argument("--config-file", nargs="+", default=[], metavar="FILE", help="YAML file(s) of parameters")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="parameters (values parsed as YAML); repeatable, highest priority")
    parser.add_argument("--output", type=Path, default=Path("runs"), help="output folder (default: runs)")
    parser.add_argument("--name", default=None, help="sweep name: runs/<name>/... (default: the grid's name, else default)")
    parser.add_argument("--data-path", type=Path, default=None,
                        help="folder holding <dataset>/ folders (default: $RECRUNNER_DATA_PATH or ./datasets)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="recrunner's YAML layers (default: ./configs, else the one beside the package)")
    parser.add_argument("--restart", action="store_true", help="train again from scratch instead of resuming")
    parser.add_argument("--resume-from", type=Path, default=None, metavar="PATH",
                        help="continue from this last.pth / epoch-N.pth")
    parser.add_argument("--workers", type=_positive, default=1, help="cells run at once, each in its own process (default 1)")
    parser.add_argument("--threads", type=_positive, default=None, help="CPU threads per cell (default: cores / workers)")
    parser.add_argument("--gpus", type=_gpu_list, default=(), metavar="0,1,...", help="one GPU per running cell")
    parser.add_argument("--backend", choices=("local", "ray"), default="local", help="where cells run (default local)")
    parser.add_argument("--ray-address", default=None, help="a running Ray cluster (default: start a local one)")
    parser.add_argument("--retries", type=_non_negative, default=0, help="run a failed cell again up to N times (default 0)")
    parser.add_argument("--stale-after", type=float, default=300.0, metavar="SECONDS",
                        help="reclaim a running cell whose sweep process sent no heartbeat for this long (default 300)")
    parser.add_argument("--search", choices=("random", "tpe"), default=None,
                        help="search the grid's lists and distributions: --trials per model and dataset (Optuna)")
    parser.add_argument("--trials", type=_positive, default=None, help="trials per model and dataset (default 20)")
    parser.add_argument("--prune", choices=("none", "median", "asha", "hyperband"), default=None,
                        help="stop trials early on their validation scores (default none)")
    parser.add_argument("--prune-after", type=_positive, default=None, metavar="N",
                        help="epochs every trial trains before it can be pruned (default 1)")
    parser.add_argument("--final-seeds", type=_non_negative, default=None, metavar="K",
                        help="after the search, the best configuration (on validation) with K seeds")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="the search's studies in a database (a cluster); default: runs/<sweep>/search/")
    parser.add_argument("--dry-run", action="store_true", help="print the cells and their run ids; run nothing")
    parser.add_argument("--quiet", action="store_true", help="log to run.log only, not to the console")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _gpu_list(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1, got {text!r}")
    return tuple(int(p) for p in parts)


def build_report_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="recrunner report",
                     description="Tables, significance tests and charts of a sweep (finished or not).")
    parser.add_argument("sweep_dir", type=Path, help="a sweep folder, e.g. runs/<sweep>")
    parser.add_argument("--baseline", default=None, help="model the others are tested against (default: the first)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm's correction")
    parser.add_argument("--interval", choices=("std", "ci"), default="std",
                        help="tables show mean ± std over seeds (default) or ± the 95%% confidence interval")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: <sweep_dir>/report)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _report(args) -> int:
    from .report import build_report, write_report

    if not args.sweep_dir.is_dir():
        raise ConfigError(f"{args.sweep_dir} is not a folder; give a sweep folder like runs/<sweep>")
    report = build_report(args.sweep_dir, baseline=args.baseline, alpha=args.alpha, interval=args.interval)
    for path in write_report(report, args.out):
        print(path)
    from .search.budget import budgets, unequal

    for warning in unequal(budgets(report.rows)):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def build_reproduce_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="recrunner reproduce",
                     description="Run a finished run's recorded configuration again into a new folder and compare "
                                 "every number; exit 0 when identical, 1 when something differs (each recorded "
                                 "difference is explained).")
    parser.add_argument("run_dir", type=Path, help="a run folder, e.g. runs/<sweep>/<dataset>/<model>/<run id>")
    parser.add_argument("--output", type=Path, default=None,
                        help="output folder of the new run (default: the original's); it goes to reproduce-<time>/")
    parser.add_argument("--data-path", type=Path, default=None,
                        help="folder holding <dataset>/ (default: the one the original run read)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="recrunner's YAML layers (default: the folder the original run read)")
    parser.add_argument("--quiet", action="store_true", help="log the new run to its run.log only")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _reproduce(args, command: str) -> int:
    from .reproduce import render, reproduce

    new_dir, comparison = reproduce(args.run_dir, output=args.output, data_path=args.data_path,
                                    config_dir=args.config_dir, command=command, console=not args.quiet)
    print(render(args.run_dir, new_dir, comparison))
    return 0 if comparison.identical else 1


def main(argv=None) -> int:
    started = time.perf_counter()  # a sweep's summary time includes start-up
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    try:
        command = shlex.join([Path(sys.argv[0]).name or "recrunner", *argv])
        if argv[:1] == ["report"]:
            return _report(build_report_parser().parse_args(argv[1:]))
        if argv[:1] == ["reproduce"]:
            return _reproduce(build_reproduce_parser().parse_args(argv[1:]), command)
        if argv[:1] == ["cache"]:
            from .datacache import command as cache_command

            return cache_command.run(cache_command.build_parser(_Parser).parse_args(argv[1:]))
        args = build_parser().parse_args(argv)
        args.command = command
        args.started = started
        return _main(args)
    except RecrunnerError as exc:
        if debug:
            raise
        print(f"recrunner: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
        return RunInterrupted.exit_code
    except Exception as exc:  # a disk, a permission, or a bug: one line, finished work stays on disk
        if debug:
            raise
        print(f"recrunner: error: {one_line(exc)}; finished runs are kept on disk. Run the same command "
              "again to continue, or add --debug to see the traceback", file=sys.stderr)
        return 1


def _main(args) -> int:
    from .seams.environment import prepare_environment
    from .sweep.grid import Grid, expand, load_grid

    prepare_environment()  # a missing RecBole or pandas 3: one line before anything imports RecBole

    cells, name, search = _cells_checked_early(args, Grid, expand, load_grid)
    if search is not None:
        from .search.command import run_search

        return run_search(args, cells, name, search, _workspace(args))
    if not args.dry_run and forkserver.serves(args.backend, args.workers, args.gpus) and _may_have_work(args, name, cells):
        forkserver.start()  # it imports torch and RecBole while this process does the same
    from .sweep import plan

    if args.gpus and args.backend == "local":
        _check_gpus(args.gpus)
    workspace = _workspace(args)
    planned = plan(cells, workspace, name, command=args.command)
    if args.dry_run:
        print(_dry_run(name, planned, workspace))
        return 0
    with sigterm_interrupts():
        if args.resume_from is not None:
            return _resume_one(planned, workspace, args)
        return _sweep(name, planned, workspace, args)


def _cells_checked_early(args, Grid, expand, load_grid):
    """The sweep's cells and name, with every check that needs no torch or RecBole (checks.py)."""
    from .checks import canonical_model, check_grid_cells, check_request_early, key_lines

    sources, overrides = [], {}
    for path in args.config_file:
        params = load_yaml(path)
        sources.append((str(path), params, key_lines(path)))
        overrides.update(params)
    given = parse_set_options(args.set)
    sources.append(("--set", given, None))
    overrides.update(given)
    grid = load_grid(args.grid) if args.grid else Grid(models=("SASRec",), datasets=("ml-100k",))
    models = tuple(canonical_model(m) for m in (args.model or grid.models))
    grid = replace(grid, models=models, datasets=tuple(args.dataset or grid.datasets))
    check_request_early(sources, models, output=args.output, resume_from=args.resume_from)
    from .search.command import search_options

    search = search_options(args, grid)
    if search is not None:
        from .search.driver import example_cells
        from .sweep.grid import expand_search

        specs = expand_search(replace(grid, final_seeds=search.final_seeds), overrides)
        check_grid_cells(example_cells(specs), str(args.grid or "--set"), key_lines(args.grid) if args.grid else None)
        return specs, args.name or grid.name or "default", search
    cells = expand(grid, overrides)
    if args.grid:
        check_grid_cells(cells, str(args.grid), key_lines(args.grid))
    return cells, args.name or grid.name or "default", None


def _workspace(args):
    from .experiment import Workspace

    data_path = args.data_path or Path(os.environ.get("RECRUNNER_DATA_PATH", "datasets"))
    return Workspace(output_dir=args.output.resolve(), data_path=data_path.resolve(),
                     config_dir=(args.config_dir or default_config_dir()))


def _may_have_work(args, name, cells) -> bool:
    """False when the sweep's record already shows as many finished cells as the grid has: the
    worker server is then not started ahead (it starts at the first cell, if any)."""
    from .sweep.record import SweepRecord

    if args.restart or args.resume_from is not None:
        return True
    record = Path(args.output) / name / "sweep.jsonl"
    if not record.is_file():
        return True
    finished = sum(state.state.finished for state in SweepRecord(record).states().values())
    return finished < len(cells)


def _check_gpus(gpus) -> None:
    import torch

    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not available:
        raise ConfigError(f"--gpus {','.join(map(str, gpus))}: this machine has no CUDA device (torch "
                          f"{torch.__version__}); drop --gpus to run on the CPU")
    missing = [g for g in gpus if g >= available]
    if missing:
        raise ConfigError(f"--gpus: no GPU {', '.join(map(str, missing))}; this machine has {available} "
                          f"(0..{available - 1})")


def _sweep(name, planned, workspace, args) -> int:
    from .sweep import SweepOptions, run_sweep

    options = SweepOptions(workers=args.workers, backend=args.backend, ray_address=args.ray_address, gpus=args.gpus,
                           threads=args.threads, retries=args.retries, restart=args.restart,
                           stale_after=args.stale_after, console=not args.quiet, started=args.started)
    summary = run_sweep(name, planned, workspace, options)
    if summary.interrupted:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
    return summary.exit_code


def _resume_one(planned, workspace, args) -> int:
    from .experiment import run_experiment
    from .sweep.console import cell_line

    if len(planned) != 1:
        raise ConfigError("--resume-from continues one run; give one model and one dataset")
    item = planned[0]
    result = run_experiment(item.experiment, workspace, restart=args.restart, resume_from=args.resume_from,
                            console=not args.quiet)
    print(cell_line(item, {"status": result.status, "error": result.error, "test": result.test,
                           "best_epoch": result.best_epoch, "run_dir": str(result.run_dir),
                           "warnings": result.warnings}))
    return 0 if result.status == Status.OK else 1


def _dry_run(name, planned, workspace) -> str:
    from .record import RunRecord

    lines = [f"sweep {name}: {len(planned)} cells -> {workspace.output_dir / name}"]
    for item in planned:
        if item.error:
            lines.append(f"  invalid  {item.cell.dataset}/{item.cell.model}: {item.error}")
            continue
        record = RunRecord.read(item.run_dir)
        status = record.status.value if record else "new"
        lines.append(f"  {status:<8} {item.cell_id}")
    return "\n".join(lines)
