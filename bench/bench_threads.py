"""CPU threads per cell: the wall time of one sweep under several `--workers` x `--threads` settings.

    python bench/bench_threads.py [--settings 1x2 2x1 2x2] [--cells 2] [--epochs 1] [--exact]
                                  [--model SASRec] [--dataset ml-100k]

The same sweep (`--cells` seeds of one model on one dataset, `--epochs` epochs each, fast mode unless
`--exact`) runs once per setting WORKERSxTHREADS through `run_experiments.py`, each from an empty output
folder (so the data cache and the compiler's cache start cold every time, as for a new sweep), one
after another. Printed per setting: the sweep's wall time, the cell-epochs per minute, and the ratio
to the first setting. The default settings are the questions on a 2-core machine: one cell on both
cores (1x2), a cell per core (2x1, recrunner's default for --workers 2), and two cells each on both
cores (2x2, oversubscribed). The cells' test metrics must agree across settings when the plan is
exact; the script prints whether they do.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def sweep(setting: str, args, workdir: Path) -> tuple[float, dict]:
    workers, threads = (int(part) for part in setting.split("x"))
    grid = {"name": "threads", "models": [args.model], "datasets": [args.dataset],
            "seeds": [2020 + i for i in range(args.cells)], "fixed": {"epochs": args.epochs, "fast": not args.exact}}
    (workdir / "grid.yaml").write_text(yaml.safe_dump(grid))
    command = [sys.executable, str(REPO / "run_experiments.py"), "--grid", str(workdir / "grid.yaml"),
               "--workers", str(workers), "--threads", str(threads), "--output", str(workdir / "runs"),
               "--config-dir", str(REPO / "configs"), "--quiet"]
    if args.data_path:
        command += ["--data-path", str(args.data_path)]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"sweep {setting} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    with open(workdir / "runs" / "threads" / "results.csv") as f:
        results = {row["seed"]: {k: v for k, v in row.items() if k.startswith("test/")} for row in csv.DictReader(f)}
    return seconds, results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["1x2", "2x1", "2x2"], metavar="WORKERSxTHREADS")
    parser.add_argument("--cells", type=int, default=2, help="seeds, one cell each (default 2)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--model", default="SASRec")
    parser.add_argument("--dataset", default="ml-100k")
    parser.add_argument("--data-path", type=Path, default=None, help="folder of datasets (ml-100k: RecBole's own)")
    parser.add_argument("--exact", action="store_true", help="exact mode instead of fast mode")
    args = parser.parse_args(argv)
    mode = "exact" if args.exact else "fast"
    print(f"{args.model} on {args.dataset}, {args.cells} cells x {args.epochs} epoch(s), {mode} mode, "
          f"{os.cpu_count()} CPU cores")
    print("| workers x threads | sweep s | cell-epochs per minute | against the first |")
    print("|---|---|---|---|")
    first, outcomes = None, []
    for setting in args.settings:
        with tempfile.TemporaryDirectory() as tmp:
            seconds, results = sweep(setting, args, Path(tmp))
        first = first or seconds
        outcomes.append(results)
        rate = args.cells * args.epochs / (seconds / 60)
        print(f"| {setting} | {seconds:.1f} | {rate:.2f} | {first / seconds:.2f}x |", flush=True)
    compared = sum(len(metrics) for metrics in outcomes[0].values())
    print(f"test metrics identical across settings: {all(o == outcomes[0] for o in outcomes)} ({compared} compared)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
