"""The command line's arguments: `recrunner`, `recrunner report`, `recrunner reproduce` (the cache
command's are in cli/cache.py). A bad argument is one line and exit 2, like every usage error."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..config.layers import default_config_dir
from ..core.errors import ConfigError
from ..core.docs import page


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise ConfigError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="recrunner", description="Train and evaluate RecBole models; re-running a command resumes it.",
                     epilog="Also: `recrunner report SWEEP_DIR` (tables, tests, effect sizes, charts) and "
                            "`recrunner reproduce RUN_DIR` (run a finished run again and compare), `recrunner cache list|prune` "
                            "(the shared preprocessed datasets), `recrunner data import|describe|check` (your own "
                            "files as a dataset, and what it holds); each has --help.")
    parser.add_argument("--model", nargs="+", default=None, help="RecBole model name(s) (default: SASRec, or the grid's)")
    parser.add_argument("--dataset", nargs="+", default=None, help="dataset name(s) (default: ml-100k, or the grid's)")
    parser.add_argument("--grid", type=Path, default=None, metavar="FILE",
                        help="grid YAML: models, datasets, swept params, seeds: a path, or a packaged one by name (smoke, grids/smoke.yaml)")
    parser.add_argument("--config-file", nargs="+", default=[], metavar="FILE",
                        help="YAML file(s) of parameters: a path, or a packaged one (quick.yaml, protocols/global-temporal)")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="parameters (values parsed as YAML); repeatable, highest priority")
    parser.add_argument("--output", type=Path, default=Path("runs"), help="output folder (default: runs)")
    parser.add_argument("--name", default=None, help="sweep name: runs/<name>/... (default: the grid's name, else default)")
    parser.add_argument("--data-path", type=Path, default=None,
                        help="folder holding <dataset>/ folders (default: $RECRUNNER_DATA_PATH or ./datasets)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="a folder of YAML layers (base.yaml, datasets/, models/) over the packaged ones "
                             "(default: ./configs where there is one)")
    parser.add_argument("--fast", action="store_true",
                        help=f"fast mode: compiled, reduced precision; not bit-identical to RecBole ({page('fast')})")
    parser.add_argument("--deterministic", action="store_true",
                        help=f"torch's deterministic kernels: a GPU run repeats bit for bit, somewhat slower ({page('runs')})")
    parser.add_argument("--nproc", type=_positive, default=None, metavar="N",
                        help=f"train each run in N processes (data parallel; one GPU each with --gpus; {page('distributed')})")
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
    _search_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the cells and their run ids; run nothing")
    parser.add_argument("--quiet", action="store_true", help="log to run.log only, not to the console")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="store_true",
                        help="print recrunner's, RecBole's, torch's and Python's versions, and exit")
    return parser


def _search_arguments(parser) -> None:
    """A search's and racing's flags (docs/search.md); a grid file's keys of the same names."""
    parser.add_argument("--search", choices=("random", "tpe"), default=None,
                        help="search the grid's lists and distributions: --trials per model and dataset (Optuna)")
    parser.add_argument("--trials", type=_positive, default=None, help="trials per model and dataset (default 20)")
    parser.add_argument("--prune", choices=("none", "median", "asha", "hyperband"), default=None,
                        help="stop trials early on their validation scores (default none)")
    parser.add_argument("--prune-after", type=_positive, default=None, metavar="N",
                        help="epochs every trial trains before it can be pruned (default 5: measured in the documentation's Search page)")
    parser.add_argument("--final-seeds", type=_non_negative, default=None, metavar="K",
                        help="after the search, the best configuration (on validation) with K seeds")
    parser.add_argument("--select-top", type=_positive, default=None, metavar="K",
                        help=f"racing: re-run the K best configurations on validation with more seeds ({page('search')})")
    parser.add_argument("--select-seeds", type=_positive, default=None, metavar="S",
                        help="racing: the most seeds a configuration gets, its first included (default 3)")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="the search's studies in a database (a cluster); default: runs/<sweep>/search/")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


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
    parser = Parser(prog="recrunner report",
                     description="Tables, significance tests and charts of a sweep (finished or not).")
    parser.add_argument("sweep_dir", type=Path, help="a sweep folder, e.g. runs/<sweep>")
    parser.add_argument("--baseline", default=None, help="model the others are tested against (default: the first)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm's correction")
    parser.add_argument("--interval", choices=("std", "ci"), default="std",
                        help="tables show mean ± std over seeds (default) or ± the 95%% confidence interval")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: <sweep_dir>/report)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def build_reproduce_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="recrunner reproduce",
                     description="Run a finished run's recorded configuration again into a new folder and compare "
                                 "every number; exit 0 when identical, 1 when something differs (each recorded "
                                 "difference is explained).")
    parser.add_argument("run_dir", type=Path, help="a run folder, e.g. runs/<sweep>/<dataset>/<model>/<run id>")
    parser.add_argument("--output", type=Path, default=None,
                        help="output folder of the new run (default: the original's); it goes to reproduce-<time>/")
    parser.add_argument("--data-path", type=Path, default=None,
                        help="folder holding <dataset>/ (default: the one the original run read)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="a folder of YAML layers over the packaged ones (default: the one the original run read)")
    parser.add_argument("--quiet", action="store_true", help="log the new run to its run.log only")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def data_path_of(args) -> Path:
    """--data-path, else $RECRUNNER_DATA_PATH, else ./datasets (the command line reads the
    environment, the library never does)."""
    return (args.data_path or Path(os.environ.get("RECRUNNER_DATA_PATH", "datasets"))).resolve()


def user_config_dir(args) -> Path | None:
    """--config-dir, else ./configs where there is one: the user's layers over the packaged ones."""
    return args.config_dir.resolve() if args.config_dir else default_config_dir()


def workspace_of(args):
    """Where things are: the output folder, the data folder (`data_path_of`), the config layers."""
    from ..run.experiment import Workspace

    return Workspace(output_dir=args.output.resolve(), data_path=data_path_of(args), config_dir=user_config_dir(args))


def sweep_options(args):
    from ..sweep import SweepOptions

    return SweepOptions(workers=args.workers, backend=args.backend, ray_address=args.ray_address, gpus=args.gpus,
                        nproc=args.nproc or 1, threads=args.threads, retries=args.retries, restart=args.restart,
                        stale_after=args.stale_after, console=not args.quiet, started=args.started)
