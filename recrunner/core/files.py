"""Writing files so that a kill at any instant leaves the old file or the new one, and locks."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Callable, Mapping

import yaml


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "wb"):
    """A handle whose content replaces `path` whole when the block ends (tmp, fsync, rename);
    a kill or a power cut at any instant leaves the old file or the new one.

    The tmp name is unique per writer (pid and a random token: processes of a sweep, or hosts of
    a Ray cluster, may write the same file at once) and carries nothing of `path`'s name, so
    TensorBoard, which reads every file with "tfevents" in its name, never reads a partial one.
    """
    path = Path(path)
    tmp = path.with_name(f".partial-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_file(path, "w") as handle:
        handle.write(text)


def process_exists(pid: int) -> bool:
    """Whether a process of this host holds `pid`: what a folder or claim named after its writer's
    pid is judged by (a sweep cell's owner, an import's temporary folder)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


@contextlib.contextmanager
def file_lock(lock_path: Path):
    """An exclusive lock held for the block, shared by every process that uses the same file."""
    import fcntl

    Path(lock_path).parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class EntryFile:
    """A JSON file of entries, `{"version": 1, <section>: {key: entry}}`, that the processes of a sweep
    update together: read whole, and rewritten whole under a lock. A file that cannot be read reads as
    empty (`unreadable(exc)` says so) and is written again; a folder that cannot be written loses the
    update (`unwritable(exc)` says so)."""

    def __init__(self, path: Path, section: str, unreadable: Callable[[Exception], None],
                 unwritable: Callable[[OSError], None]):
        self.path, self.section = Path(path), section
        self.unreadable, self.unwritable = unreadable, unwritable

    def read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.unreadable(exc)
            return {}
        entries = data.get(self.section) if isinstance(data, dict) else None
        return dict(entries) if isinstance(entries, dict) else {}

    def update(self, change: Callable[[dict], dict], **dumps) -> None:
        """Replace the entries by `change(entries)` under the file's lock (`dumps`: json.dumps's options)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(self.path.parent / f".{self.path.name}.lock"):
                entries = change(self.read())
                write_text_atomic(self.path, json.dumps({"version": 1, self.section: entries}, **dumps))
        except OSError as exc:
            self.unwritable(exc)


def write_config(path: Path, config: Mapping) -> None:
    write_text_atomic(path, yaml.safe_dump(dict(config), sort_keys=True, default_flow_style=None))


def size_text(mib: float) -> str:
    """A memory size in MiB as people read it: `812 MiB`, `3.0 GiB` (pure)."""
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"
