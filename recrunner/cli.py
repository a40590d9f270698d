"""The command line: parse, call the library, print. `main(argv) -> exit code`.

Exit codes: 0 every run succeeded, 1 a run failed, 2 usage or configuration error,
130 interrupted (SIGTERM or Ctrl-C; the same command resumes).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
from pathlib import Path

from .config import load_yaml, parse_set_options
from .errors import ConfigError, RecrunnerError, RunInterrupted

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise ConfigError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="recrunner", description="Train and evaluate RecBole models; re-running a command resumes it.")
    parser.add_argument("--model", nargs="+", default=["SASRec"], help="RecBole model name(s) (default: SASRec)")
    parser.add_argument("--dataset", nargs="+", default=["ml-100k"], help="dataset name(s) (default: ml-100k)")
    parser.add_argument("--config-file", nargs="+", default=[], metavar="FILE", help="YAML file(s) of parameters")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="parameters (values parsed as YAML); repeatable, highest priority")
    parser.add_argument("--output", type=Path, default=Path("runs"), help="output folder (default: runs)")
    parser.add_argument("--name", default="default", help="sweep name: runs/<name>/... (default: default)")
    parser.add_argument("--data-path", type=Path, default=None,
                        help="folder holding <dataset>/ folders (default: $RECRUNNER_DATA_PATH or ./datasets)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="recrunner's YAML layers (default: ./configs, else the one beside the package)")
    parser.add_argument("--restart", action="store_true", help="train again from scratch instead of resuming")
    parser.add_argument("--resume-from", type=Path, default=None, metavar="PATH",
                        help="continue from this last.pth / epoch-N.pth")
    parser.add_argument("--quiet", action="store_true", help="log to run.log only, not to the console")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _default_config_dir() -> Path | None:
    for candidate in (Path.cwd() / "configs", Path(__file__).resolve().parents[1] / "configs"):
        if (candidate / "base.yaml").is_file():
            return candidate
    return None


def _experiments(args, params):
    from .experiment import Experiment

    for model, dataset in itertools.product(args.model, args.dataset):
        yield Experiment(model=model, dataset=dataset, params=params, sweep=args.name)


def _raise_interrupt(signum, frame):
    raise RunInterrupted("received SIGTERM")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    try:
        return _main(build_parser().parse_args(argv))
    except RecrunnerError as exc:
        if debug:
            raise
        print(f"recrunner: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("recrunner: interrupted; run the same command again to resume", file=sys.stderr)
        return RunInterrupted.exit_code


def _main(args) -> int:
    from .experiment import Workspace, run_experiment

    params = {}
    for path in args.config_file:
        params.update(load_yaml(path))
    params.update(parse_set_options(args.set))
    data_path = args.data_path or Path(os.environ.get("RECRUNNER_DATA_PATH", "datasets"))
    workspace = Workspace(output_dir=args.output.resolve(), data_path=data_path.resolve(),
                          config_dir=(args.config_dir or _default_config_dir()))
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    failed = 0
    try:
        for experiment in _experiments(args, params):
            result = run_experiment(experiment, workspace, restart=args.restart, resume_from=args.resume_from,
                                    console=not args.quiet)
            print(_summary_line(experiment, result))
            failed += result.status != "ok"
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 1 if failed else 0


def _summary_line(experiment, result) -> str:
    if result.status != "ok":
        return f"FAILED  {experiment.model} on {experiment.dataset}: {result.error} (log: {result.run_dir / 'run.log'})"
    test = ", ".join(f"{k}={v:.4f}" for k, v in (result.test or {}).items())
    done = "already finished" if result.skipped else f"best epoch {result.best_epoch}"
    return f"ok      {experiment.model} on {experiment.dataset} ({done}): test {test} -> {result.run_dir}"
