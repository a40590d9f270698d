"""Linux's /proc files of "Name:   value kB" lines (a process's status, the machine's meminfo), read in one
place: the run's peak memory (training/loop/device.py) and a sweep's view of its cells and the machine's
memory (sweep/memory.py)."""

from __future__ import annotations

from pathlib import Path


def kib_fields(path: Path) -> dict[str, int] | None:
    """{name: the first number of its line} of a /proc file of "Name: value kB" lines, or None where the file
    cannot be read (a process gone, no /proc). A line without a number is left out (a zombie's status has
    no VmRSS line at all)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        number = value.split()[:1]
        if number and number[0].isdigit():
            fields[name] = int(number[0])
    return fields
