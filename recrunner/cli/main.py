"""The command line: parse, call the library, print. `main(argv) -> exit code`.

Exit codes: 0 every run succeeded, 1 a run failed, 2 usage or configuration error,
130 interrupted (SIGTERM or Ctrl-C; the same command resumes).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from ..core.errors import ConfigError, RecrunnerError, RunInterrupted, one_line
from .arguments import Parser, build_parser, build_report_parser, build_reproduce_parser

def main(argv=None) -> int:
    started = time.perf_counter()  # a sweep's summary time includes start-up
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    try:
        return _dispatch(argv, shlex.join([Path(sys.argv[0]).name or "recrunner", *argv]), started)
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


def _dispatch(argv: list[str], command: str, started: float) -> int:
    if "--version" in argv:  # no subcommand has a flag of that name
        print(version_line())
        return 0
    if argv[:1] == ["report"]:
        return _report(build_report_parser().parse_args(argv[1:]))
    if argv[:1] == ["reproduce"]:
        return _reproduce(build_reproduce_parser().parse_args(argv[1:]), command)
    if argv[:1] == ["cache"]:
        from . import cache

        return cache.run(cache.build_parser(Parser).parse_args(argv[1:]))
    if argv[:1] == ["data"]:
        from . import data

        return data.run(data.build_parser(Parser).parse_args(argv[1:]))
    from .run import run_command

    args = build_parser().parse_args(argv)
    args.command, args.started = command, started
    return run_command(args)


def version_line() -> str:
    """`recrunner 0.1.0 (RecBole 1.2.1, torch 2.13.0+cu130, Python 3.11.7)`: what a bug report needs first."""
    from ..run.provenance import versions

    found = versions()
    return (f"recrunner {found['recrunner']} (RecBole {found['recbole'] or 'not installed'}, "
            f"torch {found['torch'] or 'not installed'}, Python {found['python']})")


def _report(args) -> int:
    from ..report import build_report, write_report
    from ..report.budget import budgets, unequal

    if not args.sweep_dir.is_dir():
        raise ConfigError(f"{args.sweep_dir} is not a folder; give a sweep folder like runs/<sweep>")
    report = build_report(args.sweep_dir, baseline=args.baseline, alpha=args.alpha, interval=args.interval)
    for path in write_report(report, args.out):
        print(path)
    if args.baseline is None and report.baseline != report.models[0]:
        print(f"note: the baseline is {report.baseline}: {report.models[0]} can be compared on fewer cells "
              f"(failed, unfinished or other metrics); --baseline MODEL chooses another", file=sys.stderr)
    for warning in unequal(budgets(report.rows)):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _reproduce(args, command: str) -> int:
    from ..run.reproduce import render, reproduce

    new_dir, comparison = reproduce(args.run_dir, output=args.output, data_path=args.data_path,
                                    config_dir=args.config_dir, command=command, console=not args.quiet)
    print(render(args.run_dir, new_dir, comparison))
    return 0 if comparison.identical else 1
