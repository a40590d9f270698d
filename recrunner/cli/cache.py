"""`recrunner cache list|prune`: the data cache of an output folder, its sizes, and clearing it; the
compiler's cache of its fast runs, with the compiler failures remembered there (list only)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..core.layout import OutputPaths
from ..data.store import CachedEntry, entries, prune
from ..training.fast.failures import FILE, FailureBook


def build_parser(parser_class) -> argparse.ArgumentParser:
    parser = parser_class(prog="recrunner cache",
                          description="The preprocessed datasets every run of an output folder shares "
                                      "(<output>/.cache/data): list them, or remove those no run can use; "
                                      "list also shows the compiler's cache of fast runs (<output>/.cache/compile).")
    parser.add_argument("action", choices=("list", "prune"))
    parser.add_argument("--output", type=Path, default=Path("runs"), help="output folder (default: runs)")
    parser.add_argument("--unused-days", type=float, default=None, metavar="N",
                        help="prune: also remove entries no run has read for N days")
    parser.add_argument("--all", action="store_true", help="prune: remove every entry")
    parser.add_argument("--dry-run", action="store_true", help="prune: say what would go, remove nothing")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def run(args) -> int:
    cache_dir = OutputPaths(args.output).data_cache
    if args.action == "list":
        print(render_list(cache_dir, entries(cache_dir)))
        compiled = render_compile_cache(OutputPaths(args.output).compile_cache)
        if compiled:
            print(compiled)
        return 0
    removed = prune(cache_dir, everything=args.all, unused_days=args.unused_days, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for cached, why in removed:
        print(f"{verb} {cached.path.name} ({_mb(cached.size)}): {why}")
    kept = entries(cache_dir) if not args.dry_run else [e for e in entries(cache_dir)
                                                        if e.path not in {c.path for c, _ in removed}]
    print(f"{verb} {_entries(len(removed))}, {_mb(sum(c.size for c, _ in removed))}; "
          f"kept {_entries(len(kept))}, {_mb(sum(e.size for e in kept))} in {cache_dir}")
    return 0


def render_list(cache_dir: Path, found: list[CachedEntry]) -> str:
    if not found:
        return f"{cache_dir}: no entries"
    total = sum(e.size for e in found)
    sources = sum({e.header["about"]["data_path"]: e.source_bytes or 0 for e in found if e.header}.values())
    rows = [("entry", "dataset", "class", "split", "size", "source", "last used", "status")]
    for e in found:
        split = _split(e.header) if e.header else "?"
        rows.append((e.path.name, e.dataset, e.dataset_class, split, _mb(e.size),
                     _mb(e.source_bytes) if e.source_bytes else "?",
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used)),
                     f"stale: {e.stale}" if e.stale else "current"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows]
    stale = sum(1 for e in found if e.stale)
    summary = (f"{cache_dir}: {_entries(len(found))}, {_mb(total)} for {_mb(sources)} of source files"
               + (f"; {stale} stale (`recrunner cache prune` removes them)" if stale else ""))
    return "\n".join([summary, *lines])


def render_compile_cache(folder: Path) -> str | None:
    """The compiler's cache of fast runs: its size, and the compiler failures remembered there
    (recrunner.training.fast.failures); None where no fast run compiled."""
    if not folder.is_dir():
        return None
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    failures = FailureBook(folder).failures()
    head = f"{folder}: the compiler's cache of fast runs, {_mb(size)}"
    if not failures:
        return head
    count = f"{len(failures)} compiler failure{'s' if len(failures) > 1 else ''}"
    return "\n".join([f"{head}; {count} remembered (delete {folder / FILE} to try again):",
                      *[f"  {failure.text()}" for failure in failures]])


def _split(header: dict) -> str:
    eval_args = header["about"]["settings"].get("eval_args") or {}
    split = eval_args.get("split") or {}
    seed = header["about"].get("seed")  # a random split's: each seed is its own entry
    return (" ".join(f"{k} {v}" for k, v in split.items()) + f", {eval_args.get('order', '?')}"
            + (f", seed {seed}" if seed is not None else ""))


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f} MB"
