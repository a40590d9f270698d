"""A general model's full-sort validation at RecBole's eval_batch_size against larger ones, on the same weights.

    python bench/bench_eval_batches.py [--model BPR] [--dataset ml-1m] [--sizes 4096 4096000] [--repeats 3]
                                       [--data-path ../shared/datasets]

One process: the run's loaders as every run builds them (recrunner's config layers, the data path
of `recrunner/seams/loaders.py`), one training epoch at the seed, then `--repeats` validations at
each `eval_batch_size` on those same weights. Reported per size: the batches, the median seconds of
a validation, the ratio to the first size, whether every metric is equal at RecBole's decimals, and
how many users' top-k hits differ from the first size's (scores computed for several users in one
matrix product can differ in their last bits: docs/runs.md, Evaluation batches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def validate(model_name: str, dataset: str, size: int, repeats: int, data_path: Path) -> dict:
    import torch
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, init_seed

    from recrunner import Experiment, Workspace, prepare
    from recrunner.seams.loaders import vectorise_loaders

    folder = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    workspace = Workspace(folder / "runs", data_path, REPO / "configs")
    prepared = prepare(Experiment(model_name, dataset, {"eval_batch_size": size}), workspace)
    config = prepared.config
    config["checkpoint_dir"] = str(folder / "ckpt")
    init_seed(config["seed"], config["reproducibility"])
    train, valid, _ = data_preparation(config, create_dataset(config))
    vectorise_loaders([train, valid])  # what every run's loaders do
    init_seed(config["seed"], config["reproducibility"])
    trainer = prepared.trainer_class(config, get_model(model_name)(config, train._dataset))
    torch.autograd.set_detect_anomaly(False)  # as runs train (RecBole's sine.py turns it on)
    trainer.eval_collector.data_collect(train)
    trainer.epoch = 0
    trainer._train_epoch(train, 0)
    collected, original = [], trainer.evaluator.evaluate

    def keep_topk(struct):
        collected.append(struct.get("rec.topk").clone())
        return original(struct)

    trainer.evaluator.evaluate = keep_topk
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        _, result = trainer._valid_epoch(valid)
        seconds.append(time.perf_counter() - start)
    return {"size": size, "batches": len(valid), "seconds": statistics.median(seconds), "metrics": dict(result),
            "topk": collected[-1]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="BPR")
    parser.add_argument("--dataset", default="ml-1m")
    parser.add_argument("--sizes", nargs="+", type=int, default=[4096, 4096000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    found = [validate(args.model, args.dataset, size, args.repeats, Path(args.data_path)) for size in args.sizes]
    first = found[0]
    print(f"{args.model} on {args.dataset}, one epoch trained, median of {args.repeats} validations per size\n")
    print("| eval_batch_size | batches | validation s | speed-up | metrics | users whose top-k hits differ |")
    print("|---|---|---|---|---|---|")
    for row in found:
        same = "equal" if row["metrics"] == first["metrics"] else f"differ: {row['metrics']}"
        differ = int((row["topk"] != first["topk"]).any(dim=1).sum())
        print(f"| {row['size']} | {row['batches']} | {row['seconds']:.3f} | {first['seconds'] / row['seconds']:.2f}x "
              f"| {same} | {differ} of {len(row['topk'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
