"""Where a run's numbers come from, recorded in its metrics.json (`provenance`).

    command    the command line that asked for the run (the sweep's, for a sweep cell)
    config_dir the user's folder of YAML layers the run read over the packaged ones, or None
               (`recrunner reproduce` reads it again); config_layers: every folder read, lowest first
    git        the commit of recrunner's checkout and of the user's config folder, and whether each tree
               had uncommitted changes (None outside a git checkout)
    versions   python, torch, recbole, numpy, pandas, scipy, recrunner
    data       every file of the dataset's folder: name, bytes and SHA-256
    machine    CPU model and count, and each visible GPU's name
    threads    torch's CPU threads in the run's process (`recrunner reproduce` runs with as many)

Each part is best effort: what cannot be found is None, never an error.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from pathlib import Path


def provenance(data_folder: Path | None, config_dir: Path | None, command: str | None) -> dict:
    """The provenance of a run on this machine, now (reads git and the data files' digests)."""
    from ..config.layers import layer_folders
    from ..data.cache import folder_fingerprint

    files = folder_fingerprint(Path(data_folder)) if data_folder is not None else []
    folders = layer_folders(config_dir)
    return {
        "command": command or " ".join(sys.argv),
        "config_dir": str(folders[-1].resolve()) if len(folders) > 1 else None,
        "config_layers": [str(folder.resolve()) for folder in folders],
        "git": {"recrunner": git_state(Path(__file__).resolve().parent), "configs": git_state(folders[-1])},
        "versions": versions(),
        "data": [{"file": name, "bytes": size, "sha256": digest} for name, size, digest in files],
        "machine": machine(),
        "threads": threads(),
    }


def git_state(folder: Path) -> dict | None:
    """{"commit", "dirty"} of the git checkout holding `folder`, or None (pure read of git)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("recrunner", "recbole", "torch", "numpy", "pandas", "scipy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    try:  # torch's own version names its build (+cpu, +cu130); PyPI's CUDA wheel's metadata does not
        import torch

        found["torch"] = torch.__version__
    except ImportError:
        pass
    return found


def threads() -> int | None:
    """torch's CPU threads in this process (`--threads`): CPU sums, and so a run's numbers, depend on
    it. None before torch is imported."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


@functools.lru_cache(maxsize=1)
def machine() -> dict:
    from ..training.loop.device import cpu_model

    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "gpus": _gpus(), "platform": platform.platform()}


def _gpus() -> list[str]:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
