"""Writing files so that a kill at any instant leaves the old file or the new one, and locks."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Mapping

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


def write_config(path: Path, config: Mapping) -> None:
    write_text_atomic(path, yaml.safe_dump(dict(config), sort_keys=True, default_flow_style=None))


def size_text(mib: float) -> str:
    """A memory size in MiB as people read it: `812 MiB`, `3.0 GiB` (pure)."""
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"
