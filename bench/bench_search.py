"""The full grid against a TPE search with ASHA pruning, on the same space, in one run.

    python bench/bench_search.py [--workers 2] [--trials 12] [--prune asha] [--prune-after 3] [--epochs 10]
                                 [--output DIR]

SASRec and GRU4Rec on ml-100k (tiny: users with 10-60 interactions), learning rate x dropout x
hidden size, 3 values each: 27 cells per model in the grid. The search asks `--trials` per model
from the same 27 configurations (TPE over the three choices) and prunes with ASHA after
`--prune-after` epochs. Prints, per
model and in all, the best validation score each reaches and the epochs each trained, and the
ratios the target is stated in (issue: within 2% of the grid's best validation score with at most
a third of its epochs). Every run is a real recrunner run (`recrunner` CLI in a subprocess).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SPACE = {
    "SASRec": {"learning_rate": [0.0005, 0.002, 0.008], "hidden_dropout_prob": [0.1, 0.3, 0.5],
               "hidden_size": [16, 32, 64]},
    "GRU4Rec": {"learning_rate": [0.0005, 0.002, 0.008], "dropout_prob": [0.1, 0.3, 0.5],
                "hidden_size": [16, 32, 64]},
}
FIXED = {"user_inter_num_interval": "[10,60]", "MAX_ITEM_LIST_LENGTH": 10, "train_batch_size": 2048,
         "stopping_step": 2}


def run(grid: dict, out: Path, workers: int, extra=()) -> float:
    path = out / f"{grid['name']}.yaml"
    path.write_text(yaml.safe_dump(grid))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "run_experiments.py"), "--grid", str(path), "--output", str(out),
                    "--data-path", str(out / "data"), "--config-dir", str(REPO / "configs"),
                    "--workers", str(workers), "--quiet", *extra], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def collect(sweep: Path) -> dict:
    """{model: (best validation score, epochs trained, runs, pruned)} over every run of the sweep; the
    best is over the runs that were not pruned (a pruned trial's score is from before its end)."""
    found = {}
    for path in sweep.rglob("metrics.json"):
        record = json.loads(path.read_text())
        best, epochs, runs, pruned = found.get(record["model"], (None, 0, 0, 0))
        score = record.get("best_valid_score") if record["status"] == "ok" else None
        if score is not None and (best is None or score > best):
            best = score
        found[record["model"]] = (best, epochs + (record.get("epochs_trained") or 0), runs + 1,
                                  pruned + (record["status"] == "pruned"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--prune-after", type=int, default=3)
    parser.add_argument("--prune", default="asha", choices=("none", "median", "asha", "hyperband"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--output", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = args.output or Path(folder)
        (out / "data").mkdir(parents=True, exist_ok=True)
        base = {"models": list(SPACE), "datasets": ["ml-100k"], "model_params": SPACE,
                "fixed": {**FIXED, "epochs": args.epochs}}
        grid_seconds = run({**base, "name": "grid"}, out, args.workers)
        search_seconds = run({**base, "name": "search", "search": "tpe", "trials": args.trials, "prune": args.prune,
                              "prune_after": args.prune_after}, out, args.workers)
        grid, search = collect(out / "grid"), collect(out / "search")
    print(f"{'model':<8} {'grid best':>10} {'search best':>12} {'ratio':>6} {'grid epochs':>12} "
          f"{'search epochs':>14} {'ratio':>6}   (runs: grid / search, pruned)")
    for model in SPACE:
        (gb, ge, gr, _), (sb, se, sr, sp) = grid[model], search[model]
        print(f"{model:<8} {gb:>10.4f} {sb:>12.4f} {sb / gb:>6.3f} {ge:>12} {se:>14} {se / ge:>6.3f}   "
              f"({gr} / {sr}, {sp} pruned)")
    ge, se = sum(v[1] for v in grid.values()), sum(v[1] for v in search.values())
    print(f"all epochs: grid {ge}, search {se}, ratio {se / ge:.3f}; wall time: grid {grid_seconds:.0f}s, "
          f"search {search_seconds:.0f}s, ratio {search_seconds / grid_seconds:.3f}")


if __name__ == "__main__":
    main()
