"""Scores in bf16 against scores in fp32 on the same weights: why fast mode scores in fp32.

    python bench/fast_scoring.py [--model SASRec] [--seeds 2020 2021 2022] [--epochs 10] [--threads N]

Per seed, trains the model (the sizes of bench/fast_seeds.py, on ml-100k) for `--epochs` epochs,
exactly and with bf16 training (`fast: true, fast_precision: bf16`, not compiled: the precision is
what is compared), then scores the test set with the final weights twice: in fp32, and under bf16
autocast (what fast mode did before it kept scores in fp32). Prints the test MRR@10, NDCG@10 and
Hit@10 of each, and how far bf16 scoring moved them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # recrunner, and fast_seeds' sizes
METRICS = ("mrr@10", "ndcg@10", "hit@10")


def trained(model: str, seed: int, bf16: bool, epochs: int):
    """A CustomTrainer after `epochs` epochs, and the test loader."""
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    from fast_seeds import PARAMS
    from recrunner.seams.models import model_class  # as runs build it: RecBole's anomaly detection off
    from recrunner.config.layers import layered_params
    from recrunner.seams.config import recbole_argv_cleared
    from recrunner.training.loop.trainer import CustomTrainer

    work = Path(tempfile.mkdtemp(prefix="fast-scoring-"))
    os.chdir(work)
    params = {**layered_params(REPO / "configs", model, "ml-100k", {}), **PARAMS[model], "seed": seed,
              "show_progress": False, "checkpoint_dir": str(work / "ckpt"), "epochs": epochs}
    if bf16:
        params.update(fast=True, fast_precision="bf16", fast_compile=False)
    with recbole_argv_cleared():
        config = Config(model=model, dataset="ml-100k", config_dict=params)
    init_seed(config["seed"], config["reproducibility"])
    train, _, test = data_preparation(config, create_dataset(config))
    init_seed(config["seed"], config["reproducibility"])
    trainer = CustomTrainer(config, model_class(model)(config, train._dataset).to(config["device"]))
    trainer.eval_collector.data_collect(train)
    for epoch in range(epochs):
        trainer.epoch = epoch
        trainer._train_epoch(train, epoch)
    return trainer, test


def scored(trainer, test, bf16: bool) -> dict:
    import contextlib

    import torch

    context = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with context:
        result = trainer.evaluate(test, load_best_model=False)
    return {name: float(result[name]) for name in METRICS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SASRec")
    parser.add_argument("--seeds", nargs="+", type=int, default=[2020, 2021, 2022])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from recrunner.seams.environment import quiet_known_warnings

    quiet_known_warnings()
    print("| seed | trained | MRR@10 fp32 scores | MRR@10 bf16 scores | change | NDCG@10 fp32 | NDCG@10 bf16 | Hit@10 fp32 | Hit@10 bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        for bf16_training in (False, True):
            trainer, test = trained(args.model, seed, bf16_training, args.epochs)
            fp32, bf16 = scored(trainer, test, False), scored(trainer, test, True)
            print(f"| {seed} | {'bf16' if bf16_training else 'exact'} | {fp32['mrr@10']:.4f} | {bf16['mrr@10']:.4f} | "
                  f"{bf16['mrr@10'] - fp32['mrr@10']:+.4f} | {fp32['ndcg@10']:.4f} | {bf16['ndcg@10']:.4f} | "
                  f"{fp32['hit@10']:.4f} | {bf16['hit@10']:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
