"""A sweep's cells within the machine's memory (`--workers N` on one machine).

Two cells that each fit may not fit side by side: EASE on Yelp peaks at 14.0 GiB, and of two such
cells on a 24 GiB machine the kernel's OOM killer SIGKILLs one. So the sweep

- **measures** each cell: its processes' resident memory, sampled every second while it runs, and
  its run's own peak (metrics.json's device usage, where it trained on the CPU). The largest figure
  of a (dataset, model) is that kind's need (`MemoryBook`); a sweep run again reads it back from
  the finished runs' records;
- **admits** a cell beside running ones only where its kind's need fits into the memory the machine
  has available now, less what the running cells are still expected to grow by (`admits`, pure). A
  kind not measured yet starts (its first cell is how it gets measured); a cell alone always starts;
- **runs alone** a cell that ran out of memory other cells shared with it: SIGKILLed while other cells
  ran (the OOM killer's way), a MemoryError or recrunner's out-of-memory failure on the CPU beside
  other cells, CUDA's beside other cells on its GPU (`--gpus 0,0`). It runs once more with no other
  cell beside it, resuming from its last checkpoint, instead of failing (the sweep record says
  interrupted, so `--retries` is not spent on it).

The machine's available memory is /proc/meminfo's MemAvailable, or less where this process's memory
cgroup or one above it (a container, a Slurm job) has a limit closer to its usage. Ray places its own tasks (its memory resource), and
one cell at a time needs none of this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.proc import kib_fields

MARGIN = 0.10          # a need is met with 10% to spare: the same kind's peaks vary from run to run
SAMPLE_EVERY = 1.0     # seconds between samples of the running cells' resident memory
KILLED = "worker process killed by SIGKILL"  # how a cell the OOM killer ended fails (executors.died)


@dataclass(frozen=True)
class Running:
    """A running cell as admission sees it."""
    need_mb: float | None   # its kind's measured need; None: not measured yet
    now_mb: float           # resident now
    alone: bool = False     # it runs with no other cell beside it


def admits(need_mb: float | None, running: list[Running], available_mb: float | None, *,
           alone: bool = False) -> bool:
    """Whether a cell of measured need `need_mb` may start now beside `running` (pure)."""
    if not running:
        return True
    if alone or any(cell.alone for cell in running):
        return False
    if need_mb is None or available_mb is None:
        return True
    return need_mb * (1 + MARGIN) <= available_mb - growth_mb(running)


def growth_mb(running: list[Running]) -> float:
    """How much more the running cells are expected to take, by their kinds' needs (pure)."""
    return sum(max(0.0, cell.need_mb - cell.now_mb) for cell in running if cell.need_mb is not None)


def memory_kind(cell) -> tuple:
    """What cells share a memory need by: (dataset, model) (pure)."""
    return cell.dataset, cell.model


def recorded_peak_mb(device: dict | None) -> float | None:
    """A run record's peak resident memory, where it trained on the CPU (on a GPU its peak is the
    GPU's, not the machine's) (pure)."""
    if not device or not str(device.get("device", "")).startswith("cpu"):
        return None
    peak = device.get("peak_memory_mb")
    return float(peak) if isinstance(peak, (int, float)) else None


class MemoryBook:
    """Each kind's need: the largest peak measured of its cells; the running cells' samples."""

    def __init__(self):
        self.needs: dict[tuple, float] = {}     # (dataset, model) -> MiB
        self.sampled: dict[str, float] = {}     # running cell -> the most it was seen resident, MiB
        self.now: dict[str, float] = {}         # running cell -> resident at the last sample, MiB

    def learn(self, kind: tuple, peak_mb: float | None) -> None:
        if peak_mb is not None:
            self.needs[kind] = max(peak_mb, self.needs.get(kind, 0.0))

    def need(self, kind: tuple) -> float | None:
        return self.needs.get(kind)

    def sample(self, resident: dict[str, float]) -> None:
        self.now = dict(resident)
        for cell, mb in resident.items():
            self.sampled[cell] = max(mb, self.sampled.get(cell, 0.0))

    def ended(self, cell: str, kind: tuple, device: dict | None) -> float | None:
        """A cell's end: its peak (its samples', or its record's where larger) learnt for its kind."""
        self.now.pop(cell, None)
        figures = [mb for mb in (self.sampled.pop(cell, None), recorded_peak_mb(device)) if mb is not None]
        peak = max(figures) if figures else None
        self.learn(kind, peak)
        return peak


class Admission:
    """The sweep loop's side: which queued cell starts now, what the running ones take, and whether a
    cell that ran out of memory runs again alone. `kind`: a cell id's (dataset, model)."""

    def __init__(self, kind: Callable[[str], tuple], out: Callable[[str], None] = print,
                 available: Callable[[], float | None] | None = None):
        self.kind, self.out, self.available = kind, out, available or available_mb
        self.book = MemoryBook()
        self.alone: set[str] = set()     # cells that run with no other beside them
        self.company: dict[str, set] = {}  # cell -> what it was seen sharing: "host" (any other cell), "gpu" (its GPU)
        self.told: set[tuple] = set()    # kinds whose wait was announced

    def next(self, queue: list[str], running: list[str]) -> int | None:
        """The index in `queue` of the first cell that may start now; None: none may, wait. A cell to
        run alone goes first (`ended` puts it there) and nothing starts before it."""
        seen = [Running(self.book.need(self.kind(cell)), self.book.now.get(cell, 0.0), cell in self.alone)
                for cell in running]
        free = self.available() if seen else None
        for index, cell in enumerate(queue):
            need = self.book.need(self.kind(cell))
            if admits(need, seen, free, alone=cell in self.alone):
                return index
            if cell in self.alone or any(other.alone for other in seen):
                return None
            self._tell_wait(cell, need, free, seen)
        return None

    def watch(self, resident: dict[str, float], running: list[str], gpus: dict[str, tuple] | None = None) -> None:
        """A sample of the running cells' resident memory (MiB); `gpus`: each one's GPUs, where it has some."""
        self.book.sample(resident)
        self.together(running, gpus)

    def together(self, running: list[str], gpus: dict[str, tuple] | None = None) -> None:
        """The running cells seen sharing the host (and, where `gpus` says so, a GPU): at each sample, and as
        cells start, since a cell killed within its first second beside another ended before any sample."""
        if len(running) > 1:
            gpus = gpus or {}
            for cell in running:
                shared = self.company.setdefault(cell, set())
                shared.add("host")
                if any(set(gpus.get(cell, ())) & set(gpus.get(other, ())) for other in running if other != cell):
                    shared.add("gpu")

    def ended(self, cell: str, error: str | None, device: dict | None) -> str | None:
        """A cell's end, its peak learnt; where it ran out of memory that other cells shared with it, for the
        first time, why it runs again alone (the caller queues it first), else None."""
        self.book.ended(cell, self.kind(cell), device)
        cause, shared = memory_failure(error), self.company.pop(cell, set())
        if cause is None or cause not in shared or cell in self.alone:
            return None
        self.alone.add(cell)
        why = ("killed by SIGKILL while other cells ran (out of memory?)" if error.startswith(KILLED) else
               "ran out of GPU memory while other cells shared its GPU" if cause == "gpu" else
               "ran out of memory while other cells ran")
        return f"{why}; it runs again alone, resuming from its last.pth if it saved one"

    def _tell_wait(self, cell: str, need: float, free: float | None, running: list[Running]) -> None:
        if self.kind(cell) in self.told:
            return
        self.told.add(self.kind(cell))
        growth, count = growth_mb(running), len(running)
        self.out(f"memory  {cell}: waits for {_gib(need)} (its kind's measured peak): {_gib(free or 0)} available, "
                 f"{_gib(growth)} of it still to be taken by the {count} running cell{'s' * (count != 1)}")


def memory_failure(error: str | None) -> str | None:
    """Which memory a failed cell ran out of, from its recorded reason (pure): "host" (SIGKILL, the OOM
    killer's way; a MemoryError; recrunner's OutOfMemory on the CPU), "gpu" (CUDA's), else None."""
    if not error:
        return None
    if error.startswith((KILLED, "MemoryError")):
        return "host"
    lower = error.lower()
    if "out of memory" not in lower:
        return None
    return "gpu" if "cuda" in lower else "host"


def _gib(mb: float) -> str:
    return f"{mb / 1024:.1f} GiB"


# ---------------------------------------------------------------------- the machine, from /proc and cgroups
def available_mb(meminfo: Path = Path("/proc/meminfo"), cgroups: Path = Path("/sys/fs/cgroup"),
                 mine: Path = Path("/proc/self/cgroup")) -> float | None:
    """The memory this machine can give new work now, in MiB: MemAvailable, or less where this process's
    memory cgroup or one above it has a limit (v2's memory.max, v1's memory.limit_in_bytes), less its
    usage that the kernel cannot reclaim; None where none of it is readable."""
    figures = [_meminfo_available(meminfo), *(_left_in(folder) for folder in _cgroup_folders(cgroups, mine))]
    figures = [mb for mb in figures if mb is not None]
    return min(figures) if figures else None


def _meminfo_available(meminfo: Path) -> float | None:
    available = (kib_fields(meminfo) or {}).get("MemAvailable")
    return None if available is None else available / 1024


def _cgroup_folders(cgroups: Path, mine: Path) -> list[Path]:
    """This process's memory cgroup folder and each one above it, up to the mount (v1's memory controller,
    else v2's unified tree; a container's own cgroup is its mount's root)."""
    try:
        lines = mine.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        base = cgroups / "memory" if "memory" in controllers.split(",") else cgroups if controllers == "" else None
        if base is None or not base.is_dir():
            continue
        folder = base / path.strip("/")
        folder = folder if folder.is_dir() else base
        folders = [folder, *(parent for parent in folder.parents if parent.is_relative_to(base))]
        if "memory" in controllers.split(",") or (base / "cgroup.controllers").exists():
            return folders
    return []


def _left_in(folder: Path) -> float | None:
    """MiB left under `folder`'s memory limit; None where it has none."""
    for limit, usage, stat in (("memory.max", "memory.current", "memory.stat"),  # v2
                               ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat")):  # v1
        try:
            limit_text = (folder / limit).read_text().strip()
            if limit_text == "max" or int(limit_text) >= 2**60:  # no limit
                return None
            used = int((folder / usage).read_text()) - _inactive_file(folder / stat)
            return max(0.0, (int(limit_text) - used) / 2**20)
        except (OSError, ValueError):
            continue
    return None


def _inactive_file(stat: Path) -> int:
    """Page cache the kernel reclaims before it kills: bytes a cgroup's usage counts but can give back."""
    try:
        for line in stat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name in ("inactive_file", "total_inactive_file"):
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def resident_mb(pid: int, proc: Path = Path("/proc")) -> float | None:
    """The resident memory of process `pid` and of every process under it (a run's compile workers,
    its `--nproc` processes), in MiB; None where the process is gone or /proc is absent."""
    total, seen, todo = 0, set(), [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        kib = _vm_rss_kib(proc / str(current) / "status")
        if kib is None:
            if current == pid:
                return None
            continue
        total += kib
        todo += _children(proc / str(current) / "task")
    return total / 1024


def _vm_rss_kib(status: Path) -> int | None:
    fields = kib_fields(status)
    return None if fields is None else fields.get("VmRSS", 0)  # a zombie has no VmRSS line


def _children(tasks: Path) -> list[int]:
    try:
        return [int(child) for task in os.scandir(tasks)
                for child in (Path(task.path) / "children").read_text().split()]
    except (OSError, ValueError):
        return []
