"""Where a run lives on disk, derived in one place.

runs/<sweep>/<dataset>/<model>/<run_id>/
    config.yaml  run.log  metrics.json  checkpoints/{best,last}.pth  events.out.tfevents.*
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from .record import FILE_NAME

MAX_RUN_ID = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]")


def _flatten(params: Mapping, prefix: str = "") -> dict:
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _format(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def fingerprint(params: Mapping) -> str:
    """A short stable hash of parameters (pure)."""
    canonical = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(canonical.encode()).hexdigest()[:10]


def make_run_id(params: Mapping, shown=None) -> str:
    """Readable, stable id for a run's identifying parameters: `epochs=2,lr=0.001,seed=2020`.

    Keys are sorted and nested mappings flattened (`eval_args.mode=full`); characters unsafe in
    file names become `_`. `shown` limits the readable part to some keys (a sweep shows what it
    sweeps: `learning_rate=0.001,seed=2020-3f2a91c0de`); whenever something is left out (other
    keys, or the end of an id longer than MAX_RUN_ID) the id ends with a hash of all parameters,
    so different parameters never share a directory.
    """
    flat = _flatten(params)
    keys = sorted(flat) if shown is None else sorted(k for k in flat if k in set(shown))
    pairs = [f"{key}={_format(flat[key])}" for key in keys]
    safe = [_UNSAFE.sub("_", pair) for pair in pairs]
    text = ",".join(safe) or "defaults"
    if len(text) <= MAX_RUN_ID and safe == pairs and len(keys) == len(flat):
        return text
    return "-".join([*_whole_pairs(safe, MAX_RUN_ID - 11), fingerprint(flat)])


def _whole_pairs(pairs: list[str], limit: int) -> list[str]:
    """As many leading `key=value` pairs as fit in `limit` characters, joined; never half of one (pure)."""
    taken, length = [], -1
    for pair in pairs:
        if length + 1 + len(pair) > limit:
            break
        taken.append(pair)
        length += 1 + len(pair)
    return [",".join(taken)] if taken else []


@dataclass(frozen=True)
class RunPaths:
    run_dir: Path

    @property
    def config(self) -> Path:
        return self.run_dir / "config.yaml"

    @property
    def log(self) -> Path:
        return self.run_dir / "run.log"

    @property
    def metrics(self) -> Path:
        """The run's record (recrunner.record.RunRecord owns the format)."""
        return self.run_dir / FILE_NAME

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pth"

    @property
    def last(self) -> Path:
        return self.checkpoints / "last.pth"

    def epoch_copies(self) -> list[Path]:
        return sorted(self.checkpoints.glob("epoch-*.pth"), reverse=True)

    def event_files(self) -> list[Path]:
        return sorted(self.run_dir.glob("events.out.tfevents.*"))

    def create(self) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)


def run_paths(output_dir: Path, sweep: str, dataset: str, model: str, run_id: str) -> RunPaths:
    return RunPaths(Path(output_dir) / sweep / dataset / model / run_id)


def output_of(run_dir: Path) -> Path:
    """The output folder holding a run directory (`runs` of runs/<sweep>/<dataset>/<model>/<run id>)."""
    return Path(run_dir).resolve().parents[3]


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
