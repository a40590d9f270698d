"""Per-run logging that works for any number of runs in one process.

RecBole logs through the root logger and sets it up once per process with `init_logger`
(logging.basicConfig: a no-op the second time). recrunner never calls it: each run attaches its
own handlers for its duration and removes them afterwards, so each run.log holds that run alone.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
FORMAT = "%(asctime)s %(levelname)-5s %(message)s"
DATEFMT = "%d %b %H:%M"


class _PlainFormatter(logging.Formatter):
    """RecBole colours its messages with ANSI codes; files and pipes get them stripped."""

    def format(self, record):
        return _ANSI.sub("", super().format(record))


def _print_style_args(record: logging.LogRecord) -> bool:
    """RaCT logs print-style (`logger.info("Load pretrained model from", path)`), which every
    handler would fail to format: join the parts instead (a filter on the root logger)."""
    if record.args:
        try:
            record.getMessage()
        except TypeError:
            record.msg, record.args = " ".join(str(part) for part in (record.msg, *record.args)), ()
    return True


def _not_file_only(record: logging.LogRecord) -> bool:
    """Records logged with extra={"file_only": True} (the model's repr) stay out of the console."""
    return not getattr(record, "file_only", False)


@contextlib.contextmanager
def run_logging(log_file: Path, *, console: bool = True, level: int = logging.INFO):
    """Send the root logger (RecBole's) to `log_file` (appended) and the console meanwhile."""
    root = logging.getLogger()
    handlers: list[logging.Handler] = [logging.FileHandler(log_file, mode="a", encoding="utf-8")]
    handlers[0].setFormatter(_PlainFormatter(FORMAT, DATEFMT))
    if console:
        stream = logging.StreamHandler(sys.stderr)
        keep_colour = sys.stderr.isatty()
        stream.setFormatter(logging.Formatter(FORMAT, DATEFMT) if keep_colour else _PlainFormatter(FORMAT, DATEFMT))
        stream.addFilter(_not_file_only)
        handlers.append(stream)
    saved_level = root.level
    root.setLevel(level)
    root.addFilter(_print_style_args)
    for handler in handlers:
        root.addHandler(handler)
    try:
        yield
    finally:
        root.removeFilter(_print_style_args)
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(saved_level)
