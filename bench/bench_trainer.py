"""Wall time of CustomTrainer.fit against RecBole's own Trainer.fit on the same work.

Each measurement is a fresh process (same setup for both: config, seed, data, model); the two
trainers alternate so machine noise hits both alike. The extra epoch -1 validation that only
CustomTrainer does is timed separately and reported apart from the loop overhead.

    python bench/bench_trainer.py [--model SASRec] [--epochs 5] [--repeats 5] [--batch-size N]

A small --batch-size makes many cheap batches: the per-batch work recrunner adds (the non-finite
check, the on_train_batch event) is then as large a share of the time as it gets.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARAMS = {
    "SASRec": {"hidden_size": 64, "inner_size": 256, "n_layers": 2, "n_heads": 2, "MAX_ITEM_LIST_LENGTH": 50,
               "train_batch_size": 2048, "user_inter_num_interval": "[10,60]", "train_neg_sample_args": None},
    "BPR": {"embedding_size": 64, "train_batch_size": 2048},
}


def one_run(kind: str, model: str, epochs: int, workdir: Path, batch_size: int | None = None) -> dict:
    import os

    os.chdir(workdir)  # RecBole's Trainer writes log_tensorboard/ into the cwd
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.trainer import Trainer
    from recbole.utils import get_model, init_seed

    from recrunner.seams.config import recbole_argv_cleared
    from recrunner.seams.environment import quiet_known_warnings
    from recrunner.training.loop.trainer import CustomTrainer

    quiet_known_warnings()
    params = {**PARAMS[model], "epochs": epochs, "stopping_step": 1000, "show_progress": False,
              "checkpoint_dir": str(workdir / "ckpt")}
    if batch_size:
        params["train_batch_size"] = batch_size
    with recbole_argv_cleared():
        config = Config(model=model, dataset="ml-100k", config_dict=params)
    init_seed(config["seed"], config["reproducibility"])
    train, valid, _ = data_preparation(config, create_dataset(config))
    init_seed(config["seed"], config["reproducibility"])
    net = get_model(model)(config, train._dataset)
    trainer = (CustomTrainer if kind == "custom" else Trainer)(config, net)
    initial = 0.0
    if kind == "custom":
        original = trainer._initial_validation

        def timed(*args, **kwargs):
            nonlocal initial
            start = time.perf_counter()
            original(*args, **kwargs)
            initial = time.perf_counter() - start

        trainer._initial_validation = timed
    start = time.perf_counter()
    trainer.fit(train, valid, saved=True, verbose=False)
    return {"fit": time.perf_counter() - start, "initial_validation": initial}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="SASRec", choices=sorted(PARAMS))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None, help="train_batch_size (default: the model's above)")
    parser.add_argument("--one", choices=["custom", "plain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(one_run(args.one, args.model, args.epochs, Path(tmp), args.batch_size)))
        return
    times = {"custom": [], "plain": [], "initial": []}
    for _ in range(args.repeats):
        for kind in ("plain", "custom"):
            batch = ["--batch-size", str(args.batch_size)] if args.batch_size else []
            out = subprocess.run([sys.executable, __file__, "--one", kind, "--model", args.model,
                                  "--epochs", str(args.epochs), *batch], capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            times[kind].append(result["fit"] - result["initial_validation"])
            if kind == "custom":
                times["initial"].append(result["initial_validation"])
    plain, custom = statistics.median(times["plain"]), statistics.median(times["custom"])
    initial = statistics.median(times["initial"])
    batch = f", batch {args.batch_size}" if args.batch_size else ""
    print(f"{args.model} on ml-100k{batch}, {args.epochs} epochs, {args.repeats} alternating runs each (median fit seconds)")
    print(f"  RecBole Trainer.fit:               {plain:8.2f} s   runs: {', '.join(f'{t:.2f}' for t in times['plain'])}")
    print(f"  CustomTrainer.fit (without -1):    {custom:8.2f} s   runs: {', '.join(f'{t:.2f}' for t in times['custom'])}")
    print(f"  epoch -1 validation (extra work):  {initial:8.2f} s")
    print(f"  ratio CustomTrainer / Trainer:     {custom / plain:8.3f}   (target <= 1.02)")


if __name__ == "__main__":
    main()
