"""Wall time of a sweep: recrunner (shared dataset cache + --workers 2) against plain RecBole.

The same 8 cells (2 models x 2 datasets x 2 learning rates) run
- through plain RecBole, one after another, each cell a `run_recbole` call that builds its own
  dataset (what a shell loop over run_recbole does; one process, so imports are paid once);
- through recrunner: `run_experiments.py --grid ... --workers 2`, from an empty output folder
  (the dataset cache starts cold, so building it is part of the time).
Both score the test set with the best checkpoint; the script checks that every cell's test
metrics agree, then prints both wall times and their ratio.

    python bench/bench_sweep.py [--profile small|medium] [--data-path ../shared/datasets] [--epochs N]
"""

import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DATASETS = ["ml-1m", "Amazon_Beauty"]
LEARNING_RATES = [0.001, 0.003]
# small: heavy users only (20-50 interactions; a few thousand users), 16-dim models: cells of a few
#        seconds, where building the dataset is most of a cell, as in a quick tuning sweep.
# medium: light users too (5-50 interactions), 32-dim models: training dominates each cell.
PROFILES = {
    "small": {
        "models": {"SASRec": {"hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1},
                   "GRU4Rec": {"embedding_size": 16, "hidden_size": 16}},
        "fixed": {"MAX_ITEM_LIST_LENGTH": 20, "train_batch_size": 2048, "user_inter_num_interval": "[20,50]",
                  "epochs": 2},
    },
    "medium": {
        "models": {"SASRec": {"hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1},
                   "GRU4Rec": {"embedding_size": 32, "hidden_size": 32}},
        "fixed": {"MAX_ITEM_LIST_LENGTH": 20, "train_batch_size": 2048, "user_inter_num_interval": "[5,50]"},
    },
}


def fixed(epochs, profile):
    return {"eval_batch_size": 4096, "stopping_step": 1000, **PROFILES[profile]["fixed"], "epochs": epochs}


def dataset_settings(dataset):
    """configs/datasets/<dataset>.yaml, which recrunner layers in: plain RecBole gets the same."""
    return yaml.safe_load((REPO / "configs" / "datasets" / f"{dataset}.yaml").read_text()) or {}


def plain_recbole(data_path: Path, epochs: int, workdir: Path, profile: str) -> tuple[float, dict]:
    """Every cell through recbole.quick_start.run_recbole, in one process, one after another."""
    (workdir / "cells.json").write_text(json.dumps(cells_spec(data_path, epochs, profile)))
    code = """
import json, os, sys, time, warnings
warnings.filterwarnings("ignore")
os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"   # run_recbole's own torch.load (torch >= 2.6)
from recbole.quick_start import run_recbole
cells = json.load(open("cells.json"))
sys.argv = sys.argv[:1]
results, start = {}, time.perf_counter()
for cell in cells:
    out = run_recbole(model=cell["model"], dataset=cell["dataset"], config_dict=cell["config"])
    results[cell["key"]] = dict(out["test_result"])
print(json.dumps({"seconds": time.perf_counter() - start, "results": results}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"plain RecBole failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return report["seconds"], report["results"]


def _model_settings(model: str) -> dict:
    """configs/models/<model>.yaml, which recrunner layers in (CE models turn negative sampling off)."""
    path = REPO / "configs" / "models" / f"{model}.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def cells_spec(data_path: Path, epochs: int, profile: str) -> list:
    cells, models = [], PROFILES[profile]["models"]
    for model, dataset, lr in itertools.product(models, DATASETS, LEARNING_RATES):
        config = {**dataset_settings(dataset), **models[model], **fixed(epochs, profile), "learning_rate": lr,
                  "data_path": str(data_path), "show_progress": False, **_model_settings(model)}
        cells.append({"model": model, "dataset": dataset, "config": config, "key": f"{model}/{dataset}/{lr}"})
    return cells


def recrunner_sweep(data_path: Path, epochs: int, workdir: Path, workers: int, profile: str) -> tuple[float, dict]:
    models = PROFILES[profile]["models"]
    grid = {"name": "bench", "models": list(models), "datasets": DATASETS, "model_params": models,
            "params": {"learning_rate": LEARNING_RATES}, "fixed": fixed(epochs, profile)}
    grid_file = workdir / "grid.yaml"
    grid_file.write_text(yaml.safe_dump(grid))
    command = [sys.executable, str(REPO / "run_experiments.py"), "--grid", str(grid_file), "--workers", str(workers),
               "--output", str(workdir / "runs"), "--data-path", str(data_path), "--config-dir", str(REPO / "configs"),
               "--quiet"]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"recrunner sweep failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    results = {}
    with open(workdir / "runs" / "bench" / "results.csv") as f:
        for row in csv.DictReader(f):
            key = f"{row['model']}/{row['dataset']}/{float(row['learning_rate'])}"
            results[key] = {k[5:]: float(v) for k, v in row.items() if k.startswith("test/") and v}
    return seconds, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-path", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--epochs", type=int, default=None, help="default: the profile's")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="small")
    parser.add_argument("--keep", type=Path, default=None, help="keep both work folders under this folder")
    args = parser.parse_args()
    data_path = args.data_path.resolve()
    args.epochs = args.epochs or PROFILES[args.profile]["fixed"].get("epochs", 1)
    missing = [d for d in DATASETS if not (data_path / d / f"{d}.inter").is_file()]
    if missing:
        raise SystemExit(f"datasets missing under {data_path}: {', '.join(missing)} (see --data-path)")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep.resolve() if args.keep else Path(tmp)
        (base / "plain").mkdir(parents=True, exist_ok=True)
        (base / "recrunner").mkdir(parents=True, exist_ok=True)
        plain_seconds, plain = plain_recbole(data_path, args.epochs, base / "plain", args.profile)
        ours_seconds, ours = recrunner_sweep(data_path, args.epochs, base / "recrunner", args.workers, args.profile)
    same = all(plain[key] == ours.get(key) for key in plain)
    print(f"profile {args.profile}: {len(plain)} cells ({', '.join(PROFILES[args.profile]['models'])} x "
          f"{', '.join(DATASETS)} x lr {LEARNING_RATES}), {args.epochs} epoch(s), {os.cpu_count()} CPU cores")
    print(f"plain RecBole, one after another (run_recbole): {plain_seconds:8.1f} s")
    print(f"recrunner, data cache + --workers {args.workers}:         {ours_seconds:8.1f} s")
    print(f"speed-up: {plain_seconds / ours_seconds:.2f}x; test metrics identical in every cell: {same}")
    if not same:
        for key in plain:
            if plain[key] != ours.get(key):
                print(f"  {key}: RecBole {plain[key]} recrunner {ours.get(key)}")


if __name__ == "__main__":
    main()
