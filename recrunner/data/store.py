"""What the data cache holds, and removing what is no longer wanted (`recrunner cache list|prune`).

An entry is stale when no run can ask for it again: its dataset's files changed or are gone, it
was built by another RecBole version, or it is in an older format of recrunner's (the first one
pickled whole datasets into `.pkl` files). Stale and unreadable entries are what `prune` removes
by default; `--unused-days N` also removes those no run has read for N days, `--all` everything.
An entry is removed under its lock, so never while a run is building it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..core.files import file_lock
from .cache import SUFFIX, folder_fingerprint
from . import entry

_DAY = 86400.0


@dataclass
class CachedEntry:
    path: Path
    size: int
    last_used: float  # the file's mtime: set when built and each time a run reads it
    header: dict | None  # None: not readable as an entry of this format
    stale: str | None  # why no run can use it again; None while it is current

    @property
    def dataset(self) -> str:
        return self.header["about"]["dataset"] if self.header else self.path.stem.rsplit("-", 1)[0]

    @property
    def dataset_class(self) -> str:
        return self.header["about"]["class"] if self.header else "?"

    @property
    def source_bytes(self) -> int | None:
        return self.header.get("source_bytes") if self.header else None


def entries(cache_dir: Path) -> list[CachedEntry]:
    """Every entry in `cache_dir` (an output folder's .cache/data), oldest use first."""
    if not cache_dir.is_dir():
        return []
    found = []
    for path in cache_dir.iterdir():
        if not path.is_file() or path.suffix not in (SUFFIX, ".pkl"):
            continue
        stat = path.stat()
        try:
            header = entry.read_header(path)
        except (entry.EntryError, OSError, ValueError, KeyError):
            header = None
        found.append(CachedEntry(path, stat.st_size, stat.st_mtime, header, _stale(path, header)))
    return sorted(found, key=lambda e: e.last_used)


def prune(cache_dir: Path, *, everything: bool = False, unused_days: float | None = None,
          dry_run: bool = False, now: float | None = None) -> list[tuple[CachedEntry, str]]:
    """Remove entries (see the module docstring); [(entry, why)] of those removed (or that would be)."""
    now = time.time() if now is None else now
    removed = []
    for cached in entries(cache_dir):
        why = prune_reason(cached, everything=everything, unused_days=unused_days, now=now)
        if why is None:
            continue
        if not dry_run:
            lock = cached.path.with_suffix(".lock")
            with file_lock(lock):
                cached.path.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
        removed.append((cached, why))
    return removed


def prune_reason(cached: CachedEntry, *, everything: bool, unused_days: float | None, now: float) -> str | None:
    """Why `prune` removes this entry, or None to keep it (pure)."""
    if everything:
        return "--all"
    if cached.stale:
        return cached.stale
    if unused_days is not None and now - cached.last_used >= unused_days * _DAY:
        return f"unused for {(now - cached.last_used) / _DAY:.0f} days"
    return None


def _stale(path: Path, header: dict | None) -> str | None:
    import recbole

    if path.suffix == ".pkl":
        return "an older recrunner's format"
    if header is None:
        return "unreadable"
    about = header["about"]
    if about["recbole"] != recbole.__version__:
        return f"built by RecBole {about['recbole']}"
    folder = Path(about["data_path"])
    if not folder.is_dir():
        return f"{folder} is gone"
    if [list(f) for f in folder_fingerprint(folder)] != [list(f) for f in about["files"]]:
        return f"the files in {folder} changed"
    return None
