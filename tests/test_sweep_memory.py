"""A sweep's cells within the machine's memory (recrunner/sweep/memory.py): measured needs, admission
beside running cells, and a cell SIGKILLed beside others run again alone."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recrunner.sweep.memory import (Admission, MemoryBook, Running, admits, available_mb, memory_failure,
                                    recorded_peak_mb, resident_mb)

from recrunner.training.callbacks.history import read_history

from .conftest import REPO
from .test_sweep import TINY_GRID, _args, _grid_file, _mid_training, _rows, _run_logs, _starts

KILLED = "worker process killed by SIGKILL (out of memory? the kernel's OOM killer sends SIGKILL)"


@pytest.mark.parametrize("need, running, free, alone, expected", [
    (14000, [], 1000, False, True),                                    # alone on the machine: always
    (14000, [], None, True, True),
    (None, [Running(14000, 9000)], 500, False, True),                  # not measured yet: it starts
    (9000, [Running(None, 2000)], 10000, False, True),                 # 9000 * 1.1 <= 10000
    (9500, [Running(None, 2000)], 10000, False, False),                # 9500 * 1.1 > 10000
    (4600, [Running(14000, 9000)], 10000, False, False),               # the running cell grows 5000 more
    (4600, [Running(14000, 14500)], 10000, False, True),               # ... or not (past its need)
    (100, [Running(None, 10)], 10000, True, False),                    # a cell to run alone waits
    (100, [Running(None, 10, alone=True)], 10000, False, False),       # nothing starts beside one
    (100, [Running(None, 10)], None, False, True),                     # the machine unreadable: no limit
])
def test_admits(need, running, free, alone, expected):
    assert admits(need, running, free, alone=alone) is expected


def test_a_kinds_need_is_the_largest_peak_of_its_samples_and_of_its_cpu_records():
    book = MemoryBook()
    book.sample({"a": 300.0, "b": 50.0})
    book.sample({"a": 200.0})
    assert book.now == {"a": 200.0} and book.sampled == {"a": 300.0, "b": 50.0}
    assert book.ended("a", ("Yelp", "EASE"), {"device": "cpu", "peak_memory_mb": 250.0}) == 300.0
    assert book.ended("b", ("Yelp", "EASE"), {"device": "cpu", "peak_memory_mb": 900.0}) == 900.0
    assert book.need(("Yelp", "EASE")) == 900.0 and book.need(("Yelp", "Pop")) is None
    assert book.ended("c", ("Yelp", "Pop"), {"device": "cuda:0", "peak_memory_mb": 5000.0}) is None  # a GPU's peak
    assert recorded_peak_mb({"device": "cpu", "peak_memory_mb": None}) is None and recorded_peak_mb(None) is None


def test_admission_starts_what_fits_waits_for_what_does_not_and_says_so_once_a_kind():
    lines, free = [], [10_000.0]
    kinds = {"yelp/EASE/1": ("Yelp", "EASE"), "yelp/EASE/2": ("Yelp", "EASE"), "yelp/Pop/1": ("Yelp", "Pop")}
    admission = Admission(kinds.__getitem__, lines.append, available=lambda: free[0])
    admission.book.learn(("Yelp", "EASE"), 14_000.0)
    assert admission.next(["yelp/EASE/1", "yelp/Pop/1"], running=[]) == 0               # alone: it starts
    admission.watch({"yelp/EASE/1": 1_000.0}, ["yelp/EASE/1"])
    assert admission.next(["yelp/EASE/2", "yelp/Pop/1"], running=["yelp/EASE/1"]) == 1  # Pop passes by
    assert admission.next(["yelp/EASE/2"], running=["yelp/EASE/1"]) is None
    assert lines == ["memory  yelp/EASE/2: waits for 13.7 GiB (its kind's measured peak): 9.8 GiB available, "
                     "12.7 GiB of it still to be taken by the 1 running cell"]
    free[0] = 40_000.0  # 40,000 - (14,000 - 1,000) left for a need of 14,000 * 1.1
    assert admission.next(["yelp/EASE/2"], running=["yelp/EASE/1"]) == 0
    assert len(lines) == 1


def test_a_cell_killed_beside_others_runs_again_alone_once_and_nothing_starts_beside_it():
    kinds = {"a": ("Yelp", "EASE"), "b": ("Yelp", "EASE"), "c": ("Yelp", "Pop")}
    admission = Admission(kinds.__getitem__, print, available=lambda: 1e9)
    admission.watch({"a": 9_000.0, "b": 9_500.0}, ["a", "b"])
    why = admission.ended("a", KILLED, None)
    assert why == ("killed by SIGKILL while other cells ran (out of memory?); it runs again alone, resuming from "
                   "its last.pth if it saved one")
    assert admission.book.need(("Yelp", "EASE")) == 9_000.0  # a killed cell's samples are a lower bound
    assert admission.next(["a", "c"], running=["b"]) is None  # it waits for the machine, and c behind it
    assert admission.next(["a", "c"], running=[]) == 0
    admission.watch({"a": 100.0}, ["a"])
    assert admission.next(["c"], running=["a"]) is None       # nothing beside a cell run alone
    assert admission.ended("a", KILLED, None) is None         # killed again, alone: it fails
    admission.watch({"c": 100.0}, ["c"])
    assert admission.ended("c", KILLED, None) is None         # killed with no other cell beside it
    assert admission.ended("b", "ValueError: x", None) is None


def test_a_cell_killed_before_any_sample_beside_another_still_shared_the_machine():
    """The sweep marks who runs together as cells start: a cell killed within its first second beside another
    ended before any sample (CI, 2026-11-30: it failed instead of running again alone)."""
    admission = Admission(lambda cell: ("ml-mini", "SASRec"), print, available=lambda: 1e9)
    admission.together(["a", "b"])
    assert admission.ended("a", KILLED, None).startswith("killed by SIGKILL while other cells ran")


@pytest.mark.parametrize("error, expected", [
    (KILLED, "host"),
    ("MemoryError: Unable to allocate 3.00 GiB for an array with shape (20033, 20033)", "host"),
    ("OutOfMemory: cpu ran out of memory training BPR at train_batch_size 2048 (peak 514 MiB RSS): ...", "host"),
    ("OutOfMemory: cuda:0 ran out of memory training SASRec at train_batch_size 2048 (peak 74.1 GiB of 79.6 GiB)", "gpu"),
    ("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "gpu"),
    ("worker process killed by SIGSEGV", None),
    ("ValueError: training loss became nan", None),
    (None, None),
])
def test_which_memory_a_cell_ran_out_of_is_read_from_its_recorded_reason(error, expected):
    assert memory_failure(error) == expected


def test_out_of_memory_beside_others_runs_alone_only_for_the_memory_they_shared():
    kinds = {cell: ("ml-1m", "SASRec") for cell in "abcd"}
    admission = Admission(kinds.__getitem__, print, available=lambda: 1e9)
    admission.watch({}, ["a", "b", "c"], gpus={"a": (0,), "b": (0,), "c": (1,)})
    gpu_oom = "OutOfMemory: cuda:1 ran out of memory training SASRec at train_batch_size 2048 (...)"
    assert admission.ended("c", gpu_oom, None) is None  # alone on GPU 1: running alone would not help
    assert admission.ended("a", gpu_oom.replace("cuda:1", "cuda:0"), None) == (
        "ran out of GPU memory while other cells shared its GPU; it runs again alone, resuming from its last.pth "
        "if it saved one")
    assert admission.ended("b", "MemoryError: Unable to allocate 3.00 GiB", None).startswith(
        "ran out of memory while other cells ran; it runs again alone")
    assert admission.ended("d", "MemoryError: x", None) is None  # never seen beside another


def test_available_memory_is_meminfos_or_less_under_a_cgroup_limit_of_this_process_or_above_it(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683520 kB\nMemAvailable:   20480000 kB\n")
    unified, hybrid = tmp_path / "unified", tmp_path / "hybrid"
    _files(unified / "cgroup.controllers", "memory\n")
    _files(unified / "job" / "memory.max", f"{8 * 2**30}\n")
    _files(unified / "job" / "memory.current", f"{3 * 2**30}\n")
    _files(unified / "job" / "memory.stat", f"anon 1\ninactive_file {2**30}\n")
    _files(unified / "job" / "step" / "memory.max", "max\n")
    _files(hybrid / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # the root: no limit
    _files(hybrid / "memory" / "slurm" / "memory.limit_in_bytes", f"{7 * 2**30}\n")
    _files(hybrid / "memory" / "slurm" / "memory.usage_in_bytes", f"{2**30}\n")
    _files(hybrid / "memory" / "slurm" / "job" / "memory.limit_in_bytes", f"{10 * 2**30}\n")
    _files(hybrid / "memory" / "slurm" / "job" / "memory.usage_in_bytes", f"{2**30}\n")
    mine = lambda text: _files(tmp_path / "cgroup", text)  # noqa: E731 - /proc/self/cgroup
    assert available_mb(meminfo, tmp_path / "none", mine("0::/\n")) == 20000.0
    assert available_mb(meminfo, unified, mine("0::/job/step\n")) == 6 * 1024  # 8 GiB less 3, 1 of it page cache
    assert available_mb(meminfo, unified, mine("0::/\n")) == 20000.0
    assert available_mb(meminfo, unified, mine("0::/elsewhere\n")) == 20000.0  # a namespace's root: the mount's
    assert available_mb(meminfo, hybrid, mine("5:cpu:/x\n4:memory:/slurm/job\n0::/slurm/job\n")) == 6 * 1024  # above it
    assert available_mb(meminfo, hybrid, mine("0::/slurm/job\n4:memory:/\n")) == 20000.0
    assert available_mb(tmp_path / "absent", tmp_path / "none", tmp_path / "absent") is None
    assert available_mb() is None or available_mb() > 0  # this machine


def _files(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_cells_resident_memory_counts_the_processes_under_it():
    script = ("import subprocess, sys, time\n"
              "block = bytearray(150 * 2**20)\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; b = bytearray(120 * 2**20); time.sleep(60)'])\n"
              "print('ready', flush=True); time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # the child's block is written
        assert resident_mb(parent.pid) > 150 + 120
    finally:
        for child in _children(parent.pid):
            os.kill(child, signal.SIGKILL)
        parent.kill()
        parent.wait()
    assert resident_mb(parent.pid) is None


def _children(pid):
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def test_a_cell_sigkilled_beside_another_runs_again_alone_and_the_sweep_ends_ok(workspace, mini_dataset, tmp_path):
    grid = _grid_file(tmp_path, [mini_dataset], models=["SASRec"], fixed={**TINY_GRID["fixed"], "epochs": 8})
    command = [sys.executable, str(REPO / "run_experiments.py"), *_args(workspace, grid, "--workers", "2")]
    sweep_dir = workspace.output_dir / "grid"
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, training = time.time() + 240, []
    while time.time() < deadline and proc.poll() is None and len(training) < 2:  # both cells in their epochs
        time.sleep(0.05)
        training = [p.parent for p in sweep_dir.rglob("metrics.json") if _mid_training(p.parent, epochs=8)]
    assert len(training) == 2, proc.communicate()
    victim = training[0]
    for pid in _holding(victim / "run.log"):  # its worker process: as the OOM killer would
        os.kill(pid, signal.SIGKILL)

    out, err = proc.communicate(timeout=300)

    assert proc.returncode == 0, out + err[-3000:]
    cell = "/".join(victim.relative_to(sweep_dir).parts)
    assert (f"alone   {cell}: killed by SIGKILL while other cells ran (out of memory?); it runs again alone, "
            "resuming from its last.pth if it saved one") in out, out
    assert "2 ok, 0 failed" in out and {row["status"] for row in _rows(sweep_dir)} == {"ok"}, out
    lines = [json.loads(line) for line in (sweep_dir / "sweep.jsonl").read_text().splitlines()]
    mine = [line["state"] for line in lines if line["cell"] == cell and line["state"] != "heartbeat"]
    assert mine == ["pending", "running", "interrupted", "running", "ok"], lines
    other_ended = next(line["t"] for line in lines if line["cell"] != cell and line["state"] == "ok")
    again = [line["t"] for line in lines if line["cell"] == cell and line["state"] == "running"][1]
    assert again >= other_ended  # alone: only once the other cell had finished
    assert _starts(_run_logs(sweep_dir)[victim / "run.log"]) == 2  # resumed, its epochs each once
    assert [row["epoch"] for row in read_history(victim / "history.jsonl")] == list(range(-1, 8))


def _holding(path: Path) -> list[int]:
    """The processes that have `path` open (what lsof would say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(os.readlink(fd) == str(path) for fd in (entry / "fd").iterdir()):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_proc_files_of_kib_lines_read_in_one_place(tmp_path):
    from recrunner.core.proc import kib_fields

    status = _files(tmp_path / "status", "Name:\tpython\nState:\tS (sleeping)\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n")
    assert kib_fields(status) == {"VmHWM": 204800, "VmRSS": 102400}  # lines without a number left out
    zombie = _files(tmp_path / "zombie", "Name:\tpython\nState:\tZ (zombie)\n")
    assert kib_fields(zombie) == {} and kib_fields(tmp_path / "gone") is None
    assert resident_mb(12345, proc=tmp_path / "no-proc") is None
