"""The sweep record: an append-only log of cell states, `runs/<sweep>/sweep.jsonl`.

    {"t": 1795230151.2, "cell": "ml-1m/SASRec/learning_rate=0.001,seed=2020", "state": "running", "owner": "vm:4242"}

States: pending, running (then heartbeat lines while it runs), ok, failed (with error),
interrupted. The current state of a cell is the fold of its lines (`fold`, pure); a pending line
only registers a cell the record does not know yet (another sweep process may have claimed it
between a planner's read and its write), so planning never undoes a claim. Each line is
written by one `os.write` on an O_APPEND file, so lines of parallel writers never interleave, and
a line cut short by a kill is ignored. A `SweepRecord` reads each line once: later reads fold only
the bytes appended since (so a claim costs the same in the 800th cell as in the first). Claiming
a cell happens under an exclusive file lock, so two sweep processes on the same folder never run
the same cell.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..run.record import Status
from ..core.files import file_lock, process_exists

STATES = tuple(status.value for status in Status)  # a cell's states are the run statuses


@dataclass
class CellState:
    state: Status = Status.PENDING
    owner: str | None = None
    seen: float | None = None      # time of the last running/heartbeat line
    failures: int = 0
    error: str | None = None

    def __post_init__(self):
        self.state = Status(self.state)  # the record's lines hold the status as text


def fold(lines, cells: dict[str, CellState] | None = None) -> dict[str, CellState]:
    """Each cell's current state from the record's lines, oldest first (pure but for `cells`: the
    states folded from the lines before these, updated in place)."""
    cells = {} if cells is None else cells
    for line in lines:
        known = line["cell"] in cells
        cell = cells.setdefault(line["cell"], CellState())
        state = line["state"]
        if state == "pending" and known:
            continue  # registers a new cell only: never undoes a claim, a failure count or an end
        if state == "heartbeat":
            if cell.state is Status.RUNNING and cell.owner == line.get("owner"):
                cell.seen = line["t"]
            continue
        cell.state, cell.owner, cell.seen = Status(state), line.get("owner"), line["t"]
        if cell.state is Status.FAILED:
            cell.failures += 1
            cell.error = line.get("error")
        elif cell.state is Status.OK:
            cell.error = None
    return cells


def decide(cell: CellState, *, now: float, stale_after: float, retries: int, owner_alive,
           finished_on_disk=lambda: True) -> str:
    """What a sweep does with a cell not finished on disk when it planned (pure).

    "run": pending, interrupted, failed fewer than retries + 1 times, or finished in the record
    with no finished metrics.json now (deleted, or its folder replaced: it runs again from its
    last.pth); "reclaim": running, but its owner is gone (a dead process on this host, or no
    heartbeat for `stale_after` seconds); "busy": running under a live owner; "failed": out of
    retries; "ok" (or "pruned"): finished, by another sweep process since this one planned.
    """
    if cell.state in (Status.PENDING, Status.INTERRUPTED):
        return "run"
    if cell.state.finished and not finished_on_disk():
        return "run"
    if cell.state is Status.FAILED:
        return "run" if cell.failures <= retries else "failed"
    if cell.state is Status.RUNNING:
        alive = owner_alive(cell.owner)
        if alive is False or (alive is None and now - (cell.seen or 0) > stale_after):
            return "reclaim"
        return "busy"
    return cell.state.value


def make_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str | None) -> bool | None:
    """True/False for an owner on this host (its process exists or not); None elsewhere."""
    if not owner or ":" not in owner:
        return None
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid) == os.getpid() or process_exists(int(pid))


class SweepRecord:
    def __init__(self, path: Path, owner: str | None = None):
        self.path = Path(path)
        self.owner = owner or make_owner()
        self._file: tuple | None = None  # (device, inode, first bytes) of the file folded so far
        self._offset = 0                 # bytes of it folded: whole lines only
        self._cells: dict[str, CellState] = {}

    def states(self) -> dict[str, CellState]:
        """Each cell's current state, folding only the lines appended since the last call (the
        whole file again when it was replaced or cut, e.g. by `--restart`)."""
        try:
            with open(self.path, "rb") as handle:
                info = os.fstat(handle.fileno())
                identity = (info.st_dev, info.st_ino, handle.read(64))  # a new file may reuse an inode
                if self._file != identity or info.st_size < self._offset:
                    self._file, self._offset, self._cells = identity, 0, {}
                handle.seek(self._offset)
                new = handle.read()
        except FileNotFoundError:
            self._file, self._offset, self._cells = None, 0, {}
            return {}
        whole = new.rfind(b"\n") + 1  # a last line still being written is read next time
        self._offset += whole
        fold(_parse(new[:whole]), self._cells)
        return dict(self._cells)

    def append(self, cell: str, state: str, **fields) -> None:
        line = {"t": round(time.time(), 3), "cell": cell, "state": state, "owner": self.owner, **fields}
        data = (json.dumps(line) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a line a killed writer left unfinished
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def claim(self, cell: str, *, stale_after: float, retries: int, finished_on_disk=lambda: True) -> str:
        """Mark `cell` running for this owner if `decide` allows; returns the decision.
        `finished_on_disk`: whether the cell's run folder holds a finished metrics.json now."""
        with file_lock(self.path.with_suffix(".lock")):
            state = self.states().get(cell, CellState())
            decision = decide(state, now=time.time(), stale_after=stale_after, retries=retries,
                              owner_alive=owner_alive, finished_on_disk=finished_on_disk)
            if decision in ("run", "reclaim"):
                self.append(cell, Status.RUNNING, reclaimed_from=state.owner if decision == "reclaim" else None)
            return decision


def _parse(data: bytes) -> list[dict]:
    """The record's lines in `data`, leaving out empty ones and any a kill cut short."""
    lines = []
    for raw in data.split(b"\n"):
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # empty, or cut short by a kill
        if isinstance(line, dict) and "cell" in line and "state" in line:
            lines.append(line)
    return lines
