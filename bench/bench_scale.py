"""Cost as the work grows: large synthetic datasets, and sweeps of many cells.

    python bench/bench_scale.py sweeps [--cells 50 200 800]        # per-cell overhead, TensorBoard listing
    python bench/bench_scale.py data [--interactions 1000000 5000000 20000000] [--models SASRec BPR]
                                     [--train 5000000] [--train-minutes SASRec=10] [--memory-gb 23]
                                     [--without-recbole]

sweeps: sweeps of N trivial cells (Pop on ml-100k, one per learning rate, which Pop ignores; one
worker) from an empty
output folder. A cell's own work is its training and evaluation (metrics.json: train_seconds +
test_seconds); everything else between the first cell's start and the last cell's end (sweep.jsonl)
is overhead: planning the run, the dataset from the cache, the run directory, checkpoints,
TensorBoard files, results tables, the sweep record. Printed per cell for each N, and the
largest N against the smallest (issue 16's target: within 20%). Then the time `tensorboard
--logdir` takes to list the runs of the largest sweep.

data: for each N, `bench/make_synthetic.py`'s dataset of N interactions, preprocessed for each model
(its dataset class: sequential with augmentation, or general) in a fresh process each:
plain RecBole (`data_preparation(config, create_dataset(config))`), recrunner with a cold cache
(the same, plus writing the entry) and with a warm one (reading it); seconds and peak resident
memory (VmHWM) of each. Every child runs under an address-space limit of --memory-gb (this machine's
24 GiB less what the system holds), so a build that needs more fails with MemoryError instead of
bringing the machine down; the table says so. Then, for the sizes in --train, one epoch of a
small SASRec and of BPR through `run_experiments.py` (validation before and after it, the test),
reading the entry the warm runs left: wall time, training seconds, peak resident memory. An epoch
that would take hours on this CPU (SASRec's at 20M) can be cut short with --train-minutes: the run
is interrupted as Ctrl-C would, and its last progress line gives the batches per second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


# ---------------------------------------------------------------------------------------- sweeps
def sweep_overhead(cells: int, workdir: Path) -> dict:
    # one seed, so one data cache entry (a general model's split is random: each seed is its own split)
    # and N cells told apart by a parameter Pop ignores
    grid = {"name": f"cells-{cells}", "models": ["Pop"], "datasets": ["ml-100k"], "seeds": [2020],
            "params": {"learning_rate": [round(1e-4 * (k + 1), 6) for k in range(cells)]},
            "fixed": {"epochs": 1, "eval_batch_size": 65536}}
    grid_file = workdir / f"cells-{cells}.yaml"
    grid_file.write_text(yaml.safe_dump(grid))
    output = workdir / f"runs-{cells}"
    started = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "run_experiments.py"), "--grid", str(grid_file), "--output", str(output),
                    "--quiet"], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    lines = [json.loads(line) for line in (output / grid["name"] / "sweep.jsonl").read_text().splitlines() if line]
    first = min(line["t"] for line in lines if line["state"] == "running")
    last = max(line["t"] for line in lines if line["state"] == "ok")
    records = [json.loads(p.read_text()) for p in (output / grid["name"]).glob("*/*/*/metrics.json")]
    assert len(records) == cells and all(r["status"] == "ok" for r in records)
    own = sum(r["train_seconds"] + r["test_seconds"] for r in records)
    return {"cells": cells, "wall": wall, "span": last - first, "own": own,
            "overhead": (last - first - own) / cells, "output": output}


def tensorboard_listing(logdir: Path, runs: int, timeout: float = 900.0) -> float:
    """Seconds from `tensorboard --logdir` starting until its run list holds `runs` runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
                               "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < timeout:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=30) as response:
                    if len(json.loads(response.read())) >= runs:
                        return time.perf_counter() - started
            except OSError:
                pass
            time.sleep(0.5)
        return float("nan")
    finally:
        server.terminate()
        server.wait()


def sweeps(args) -> None:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for cells in args.cells:
            result = sweep_overhead(cells, Path(tmp))
            results.append(result)
            print(f"{cells:5d} cells: {result['wall']:.0f} s in all, cells' own training and evaluation "
                  f"{result['own']:.0f} s, overhead {result['overhead']:.3f} s per cell", flush=True)
        smallest, largest = results[0], results[-1]
        print(f"\noverhead per cell, {largest['cells']} cells against {smallest['cells']}: "
              f"{largest['overhead'] / smallest['overhead']:.2f}x")
        listed = tensorboard_listing(largest["output"], largest["cells"])
        print(f"tensorboard --logdir listed the {largest['cells']} runs in {listed:.1f} s")


# ------------------------------------------------------------------------------------------ data
CHILD = """
import json, sys, time
from pathlib import Path
mode, model, dataset, data_path, output, repo, settings = sys.argv[1:8]
sys.path.insert(0, repo)
from recrunner import Experiment, Workspace, prepare
from recrunner.data.cache import load_data
workspace = Workspace(output_dir=Path(output), data_path=Path(data_path), config_dir=Path(repo) / "configs")
config = prepare(Experiment(model, dataset, json.loads(settings)), workspace).config
started = time.perf_counter()
if mode == "recbole":
    from recbole.data import create_dataset, data_preparation
    data_preparation(config, create_dataset(config))
else:
    load_data(config, workspace.cache_dir)
seconds = time.perf_counter() - started
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "peak_gb": peak / 2**20}))
"""

SETTINGS = {  # what decides preprocessing cost: the history length of sequential models
    "SASRec": {"MAX_ITEM_LIST_LENGTH": 50, "load_col": {"inter": ["user_id", "item_id", "timestamp"]}},
    "BPR": {"load_col": {"inter": ["user_id", "item_id", "timestamp"]}},
}


def _limit(gb: float):
    """The child's address space capped at `gb` (a MemoryError past it, not the OOM killer)."""
    import resource

    def apply():
        limit = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def preprocess(mode: str, model: str, dataset: str, data_path: Path, output: Path, memory_gb: float) -> dict:
    run = subprocess.run([sys.executable, "-c", CHILD, mode, model, dataset, str(data_path), str(output), str(REPO),
                          json.dumps(SETTINGS.get(model, {}))], capture_output=True, text=True,
                         preexec_fn=_limit(memory_gb))
    if run.returncode != 0:
        return {"seconds": float("nan"), "peak_gb": float("nan"), "error": run.stderr.strip().splitlines()[-1:]}
    return json.loads(run.stdout.strip().splitlines()[-1])


TRAIN = {  # small models: what one epoch on a large dataset costs around them, not the model itself
    "SASRec": ["hidden_size=32", "inner_size=64", "n_layers=1", "n_heads=1", "train_batch_size=4096"],
    "BPR": ["embedding_size=32", "train_batch_size=4096"],
}


def train_epoch(model: str, dataset: str, data_path: Path, output: Path, memory_gb: float,
                minutes: float | None = None) -> dict:
    """One epoch through the CLI (the entry of the warm runs is read): wall, training seconds, peak RSS.
    With `minutes`, the run is interrupted (SIGINT, as Ctrl-C) after that long; `progress` is then its
    last progress line (batches done, batches per second)."""
    settings = [f"{key}={json.dumps(value)}" for key, value in SETTINGS.get(model, {}).items()]
    command = [sys.executable, str(REPO / "run_experiments.py"), "--model", model, "--dataset", dataset,
               "--data-path", str(data_path), "--output", str(output), "--quiet",
               "--set", "epochs=1", "eval_batch_size=8192", "progress_every=30", *TRAIN[model], *settings]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=_limit(memory_gb))
    timer = threading.Timer(minutes * 60, child.send_signal, [signal.SIGINT]) if minutes else None
    if timer is not None:
        timer.start()
    log = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if timer is not None:
        timer.cancel()
    wall = time.perf_counter() - started
    records = sorted(output.glob(f"*/{dataset}/{model}/*/metrics.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(records[-1].read_text()) if records else {}
    logs = sorted(output.glob(f"*/{dataset}/{model}/*/run.log"), key=lambda p: p.stat().st_mtime)
    progress = [line for line in (logs[-1].read_text().splitlines() if logs else []) if "batch/s" in line]
    return {"wall": wall, "train": record.get("train_seconds"), "data": record.get("data_seconds"),
            "status": record.get("status", f"exit {os.waitstatus_to_exitcode(status)}"),
            "peak_gb": usage.ru_maxrss / 2**20, "log": log.strip().splitlines()[-1:],
            "progress": progress[-1][progress[-1].find("epoch "):] if progress else None}


def data(args) -> None:
    from bench.make_synthetic import name_for, synthesize, write

    print("| interactions | model | plain RecBole | peak | recrunner, cold cache | peak | recrunner, warm cache "
          "| peak | entry |")
    print("|---|---|---|---|---|---|---|---|---|")
    trained = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for n in args.interactions:
            name = name_for(n)
            started = time.perf_counter()
            source = write(synthesize(n), Path(tmp) / "data", name)
            print(f"{source.name}: {source.stat().st_size / 1e6:.0f} MB written in {time.perf_counter() - started:.0f} s",
                  flush=True)
            for model in args.models:
                output = Path(tmp) / f"runs-{name}-{model}"
                plain = {"seconds": float("nan"), "peak_gb": float("nan")} if args.without_recbole else \
                    preprocess("recbole", model, name, Path(tmp) / "data", output, args.memory_gb)
                cold = preprocess("recrunner", model, name, Path(tmp) / "data", output, args.memory_gb)
                warm = preprocess("recrunner", model, name, Path(tmp) / "data", output, args.memory_gb) \
                    if "error" not in cold else {"seconds": float("nan"), "peak_gb": float("nan")}  # no entry to read
                size = sum(p.stat().st_size for p in (output / ".cache" / "data").glob("*.entry"))
                print(f"| {n:,} | {model} | {plain['seconds']:.1f} s | {plain['peak_gb']:.2f} GB "
                      f"| {cold['seconds']:.1f} s | {cold['peak_gb']:.2f} GB | {warm['seconds']:.2f} s "
                      f"| {warm['peak_gb']:.2f} GB | {size / 1e6:.0f} MB |", flush=True)
                for what, result in (("plain", plain), ("cold", cold), ("warm", warm)):
                    if "error" in result:
                        print(f"  {what}: {result['error']}")
                if n in args.train:
                    minutes = args.train_minutes.get(model)
                    result = train_epoch(model, name, Path(tmp) / "data", output, args.memory_gb, minutes)
                    trained.append((n, model, result))
                    print(f"  one epoch of {model}: {result}", flush=True)
            for model in args.models:
                shutil.rmtree(Path(tmp) / f"runs-{name}-{model}", ignore_errors=True)  # the disk is not endless
            shutil.rmtree(Path(tmp) / "data" / name)
    if trained:
        print("\n| interactions | model | one epoch (train) | whole run (wall) | peak | status |\n|---|---|---|---|---|---|")
        for n, model, result in trained:
            print(f"| {n:,} | {model} | {result['train'] or float('nan'):.0f} s | {result['wall']:.0f} s "
                  f"| {result['peak_gb']:.2f} GB | {result['status']} |")
            if result["status"] != "ok":
                print(f"  {result['log']}")
            if result["progress"]:
                print(f"  last progress line: {result['progress']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    sweep_parser = parts.add_parser("sweeps")
    sweep_parser.add_argument("--cells", type=int, nargs="+", default=[50, 200, 800])
    data_parser = parts.add_parser("data")
    data_parser.add_argument("--interactions", type=int, nargs="+", default=[1_000_000, 5_000_000, 20_000_000])
    data_parser.add_argument("--models", nargs="+", default=["SASRec", "BPR"])
    data_parser.add_argument("--train", type=int, nargs="*", default=[5_000_000],
                             help="sizes at which one epoch of each model is trained")
    data_parser.add_argument("--train-minutes", nargs="*", default=[], metavar="MODEL=MINUTES",
                             help="interrupt that model's training run after so many minutes (an epoch that "
                                  "would take hours): its peak memory and batches per second")
    data_parser.add_argument("--without-recbole", action="store_true",
                             help="recrunner's runs only (plain RecBole's 20M SASRec build fails after 10 minutes)")
    data_parser.add_argument("--memory-gb", type=float, default=23.0, help="address-space limit of every child")
    data_parser.add_argument("--tmp", default=os.environ.get("TMPDIR"), help="where the datasets are written")
    args = parser.parse_args()
    if args.part == "data":
        args.train_minutes = {model: float(m) for model, m in (item.split("=", 1) for item in args.train_minutes)}
    sweeps(args) if args.part == "sweeps" else data(args)


if __name__ == "__main__":
    main()
