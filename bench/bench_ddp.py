"""Data-parallel runs on one machine: one process with T threads against N processes with T/N each.

    python bench/bench_ddp.py [--dataset ml-1m] [--data-path ../shared/datasets] [--models BPR SASRec]
                              [--threads 2] [--nproc 2] [--epochs BPR=5 SASRec=1]

For each model (its configs/models defaults; SASRec at bench_steps' small size, batch 512), the same
run is trained by `recrunner` twice, from a warm data cache: as one process with --threads T, then
with --nproc N (T/N threads each). Per run it prints the median epoch's training and validation
time (run.log), the peak memory of all the run's processes together (PSS, sampled every 0.3 s, so
pages the processes share, like the imported torch and RecBole they fork with, count once) and of
the training processes alone, and the best validation and the test metrics: how close N processes
come to one (they cannot be bit-identical: each process draws its own negatives and dropout).
Last, plain RecBole's own `nproc` on the same machine, and what it does.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL_SASREC = {"hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1, "MAX_ITEM_LIST_LENGTH": 50,
                "train_batch_size": 512}
MODEL_PARAMS = {"SASRec": SMALL_SASREC}

# RecBole's quick_start imports ray.tune at import time; a stub `ray` (RECBOLE_STUB) stands in for it, and a
# sitecustomize gives numpy 2's removed names back, in the spawned processes too, so what is measured is
# RecBole's distributed path itself.
RECBOLE_NPROC = r"""
import re, sys
from recrunner.seams.environment import prepare_environment
prepare_environment()
from recbole.quick_start import run
try:
    run("BPR", sys.argv[1], config_dict={"data_path": sys.argv[2], "epochs": 1, "gpu_id": sys.argv[3]}, nproc=2)
    print("ran")
except BaseException as exc:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    where = [line.strip() for line in lines if 'File "' in line and "recbole" in line]
    place = re.sub(r'.*site-packages/(.*?)", line (\d+).*', r"\1:\2", where[-1]) if where else "?"
    print(f"{lines[-1].strip()} (at {place})")
"""
RECBOLE_STUB = {"ray/__init__.py": "", "ray/tune.py": "",  # and numpy 2's names back, in every process
                "sitecustomize.py": "from recrunner.seams.environment import prepare_environment\nprepare_environment()\n"}


def memory_sampler(root_pid: int, peaks: dict, stop: threading.Event) -> None:
    """Peak PSS of the process tree under `root_pid` (all) and of its training processes."""
    import psutil

    root = psutil.Process(root_pid)
    while not stop.is_set():
        try:
            family = [root, *root.children(recursive=True)]
            sizes = {}
            for process in family:
                try:
                    sizes[process.pid] = (process.memory_full_info().pss, " ".join(process.cmdline()))
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
        except psutil.NoSuchProcess:
            return
        total = sum(size for size, _ in sizes.values())
        servers = {p.pid for p in family if p.pid in sizes and "forkserver import" in sizes[p.pid][1]}
        ranks = [size for p in family if p.pid in sizes and _parent(p) in servers for size in [sizes[p.pid][0]]]
        training = sum(ranks) if ranks else sizes.get(root_pid, (0, ""))[0]
        peaks["all"] = max(peaks.get("all", 0), total)
        peaks["training"] = max(peaks.get("training", 0), training)
        stop.wait(0.3)


def _parent(process):
    try:
        return process.ppid()
    except Exception:  # noqa: BLE001 - gone
        return None


WARM = r"""
import json, sys
from pathlib import Path
from recrunner import Experiment, Workspace
from recrunner.run.experiment import _load_data, prepare
model, dataset, params, output, data_path, config_dir = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), *map(Path, sys.argv[4:])
workspace = Workspace(output_dir=output, data_path=data_path, config_dir=config_dir)
prepared = prepare(Experiment(model, dataset, params), workspace)
config = prepared.config
from recbole.utils import init_seed
init_seed(config["seed"], config["reproducibility"])  # as a run seeds before it loads: a random split is the run's
_load_data(prepared, workspace)
"""


def warm(model, args, output: Path) -> None:
    """Build the run's data cache first, so neither run pays for it (nor peaks with it)."""
    params = {**MODEL_PARAMS.get(model, {}), "epochs": args.epochs[model]}
    subprocess.run([sys.executable, "-c", WARM, model, args.dataset, json.dumps(params), str(output),
                    str(args.data_path), str(REPO / "configs")], check=True, capture_output=True, cwd=output)


def run(model, args, output: Path, nproc: int) -> dict:
    params = {**MODEL_PARAMS.get(model, {}), "epochs": args.epochs[model]}
    command = [sys.executable, "-m", "recrunner", "--model", model, "--dataset", args.dataset,
               "--data-path", str(args.data_path), "--config-dir", str(REPO / "configs"), "--output", str(output),
               "--threads", str(args.threads), "--quiet", "--set", *[f"{k}={json.dumps(v)}" for k, v in params.items()]]
    if nproc > 1:
        command += ["--nproc", str(nproc)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=output, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks, stop = {}, threading.Event()
    sampler = threading.Thread(target=memory_sampler, args=(process.pid, peaks, stop), daemon=True)
    sampler.start()
    out, err = process.communicate()
    stop.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{model} --nproc {nproc} failed:\n{err[-3000:]}")
    (metrics,) = [path for path in output.glob(f"default/{args.dataset}/{model}/*/metrics.json")
                  if json.loads(path.read_text())["params"].get("nproc", 1) == nproc]
    record = json.loads(metrics.read_text())
    log = (metrics.parent / "run.log").read_text()
    train = [float(t) for t in re.findall(r"epoch \d+ training \[time: ([\d.]+)s", log)]
    valid = [float(t) for t in re.findall(r"epoch \d+ evaluating \[time: ([\d.]+)s", log)]
    return {"train": statistics.median(train), "valid": statistics.median(valid) if valid else None,
            "all_mb": peaks.get("all", 0) / 2**20, "training_mb": peaks.get("training", 0) / 2**20,
            "wall": time.perf_counter() - started, "best": record["best_valid"], "test": record["test"],
            "metric": record["valid_metric"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml-1m")
    parser.add_argument("--data-path", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--models", nargs="*", default=["BPR", "SASRec"], help="none: only RecBole's nproc")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--epochs", nargs="+", default=["BPR=5", "SASRec=1"])
    args = parser.parse_args()
    args.epochs = {k: int(v) for k, v in (item.split("=") for item in args.epochs)}
    print(f"{args.dataset}; one process x {args.threads} threads against {args.nproc} processes x "
          f"{args.threads // args.nproc} thread(s); medians of each run's epochs")
    with tempfile.TemporaryDirectory() as folder:
        for model in args.models:
            output = Path(folder) / model
            output.mkdir()
            warm(model, args, output)
            one = run(model, args, output, 1)
            many = run(model, args, output, args.nproc)
            _print(model, args, one, many)
    recbole_nproc(args)


def recbole_nproc(args) -> None:
    print("\nplain RecBole 1.2.1, run('BPR', ..., nproc=2) on this machine:")
    with tempfile.TemporaryDirectory() as stub:
        for name, text in RECBOLE_STUB.items():
            Path(stub, name).parent.mkdir(parents=True, exist_ok=True)
            Path(stub, name).write_text(text)
        env = {**__import__("os").environ, "PYTHONPATH": f"{stub}:{REPO}"}
        for gpu_id in ("0", "0,1"):
            done = subprocess.run([sys.executable, "-c", RECBOLE_NPROC, args.dataset, str(args.data_path), gpu_id],
                                  capture_output=True, text=True, cwd=stub, env=env)
            lines = [line for line in done.stdout.splitlines() if line.strip()]
            print(f"  gpu_id {gpu_id!r}: {lines[-1] if lines else done.stderr.strip().splitlines()[-1]}")


def _print(model, args, one, many) -> None:
    print(f"\n{model} ({args.epochs[model]} epoch(s))")
    print(f"  {'':26} {'train/epoch':>12} {'valid':>8} {'peak PSS all':>13} {'training procs':>15} {'wall':>7}")
    for name, row in ((f"1 process x {args.threads} threads", one),
                      (f"{args.nproc} processes x {args.threads // args.nproc} thread", many)):
        valid = f"{row['valid']:.2f}s" if row["valid"] is not None else "-"
        print(f"  {name:26} {row['train']:11.2f}s {valid:>8} {row['all_mb']:10.0f} MB {row['training_mb']:12.0f} MB "
              f"{row['wall']:6.1f}s")
    print(f"  speed-up per epoch: {one['train'] / many['train']:.2f}x; memory of all processes: "
          f"{many['all_mb'] / one['all_mb']:.2f}x one process's (training processes: "
          f"{many['training_mb'] / one['training_mb']:.2f}x)")
    metric = one["metric"]
    print(f"  best valid {metric}: {one['best'][metric]:.4f} (1 process) vs {many['best'][metric]:.4f} "
          f"({args.nproc}); test {metric}: {one['test'][metric]:.4f} vs {many['test'][metric]:.4f}")


if __name__ == "__main__":
    main()
