"""A validation as runs made it before 2026-11-28 against now: batches replayed, top-k hits grouped.

    python bench/bench_validation.py [--cases BPR:ml-1m LightGCN:ml-1m ...] [--passes 3]
                                     [--ways before now graphed] [--data-path ../shared/datasets]

One process per case: the run's loaders and trainer as every run builds them (recrunner's config
layers, `load_data`), one training epoch at the seed, then validations on those weights, two ways
taking turns, the first validation of each way not counted (it builds what the next ones replay):

- *before*: every validation builds its batches (seams/loaders.py's gather, through torch's
  DataLoader), and RecBole's Collector collects each batch (a `torch.cat` of all collected so far);
- *now*: the batches of the first validation replayed (seams/replay.py), the top-k hits built per
  group of batches and concatenated once (seams/collector.py);
- *graphed* (on a GPU; `cuda_graph_eval: true`): as *now*, each group of up to 128 one-user batches
  scored by one replay of a CUDA graph holding each batch's own kernels (training/loop/eval_graphs.py).

Both must give the same top-k hit matrix, element for element (checked at every validation);
printed: each way's median seconds a validation and the ratio.
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


def build(model_name: str, dataset: str, data_path: Path, params: dict):
    """(trainer, train and valid loaders) after one training epoch, as a run builds them."""
    import torch
    from recbole.utils import get_model, init_seed

    from recrunner import Experiment, Workspace, prepare
    from recrunner.data.cache import load_data

    folder = Path(tempfile.mkdtemp(prefix="bench-validation-"))
    workspace = Workspace(folder / "runs", data_path, REPO / "configs")
    prepared = prepare(Experiment(model_name, dataset, params), workspace)
    config = prepared.config
    config["checkpoint_dir"] = str(folder / "ckpt")
    init_seed(config["seed"], config["reproducibility"])
    train, valid, _ = load_data(config, workspace.cache_dir)
    init_seed(config["seed"], config["reproducibility"])
    trainer = prepared.trainer_class(config, get_model(model_name)(config, train._dataset).to(config["device"]))
    torch.autograd.set_detect_anomaly(False)  # as runs train (RecBole's sine.py turns it on)
    trainer.eval_collector.data_collect(train)
    trainer.epoch = 0
    trainer._train_epoch(train, 0)
    return trainer, train, valid


class Ways:
    """Switches a trainer and its validation loader between the way before and now."""

    def __init__(self, trainer, train, valid):
        from recbole.evaluator.collector import Collector

        from recrunner.training.loop.evaluation import split_when_out_of_memory

        self.trainer, self.valid = trainer, valid
        self.graphed = trainer.eval_graphs  # None: not asked, or refused on this device (its warning said why)
        self.replay = vars(valid).get("_get_iterator")
        self.now = trainer.eval_collector
        before = Collector(trainer.config)  # RecBole's, with the out-of-memory split every trainer sets
        before.data_collect(train)
        trainer.eval_collector = before
        split_when_out_of_memory(trainer)
        self.before, trainer.eval_collector = before, self.now
        self.topk = []
        original = trainer.evaluator.evaluate
        trainer.evaluator.evaluate = lambda struct: self.topk.append(struct.get("rec.topk").clone()) or original(struct)

    def use(self, way: str) -> None:
        self.trainer.eval_collector = self.before if way == "before" else self.now
        if self.graphed is not None:
            self.trainer.eval_graphs = self.graphed if way == "graphed" else None
            self.trainer._full_sort_batch_eval = self.graphed if way == "graphed" else self.graphed.inner
        if way == "before":
            vars(self.valid).pop("_get_iterator", None)
        elif self.replay is not None:
            self.valid._get_iterator = self.replay


def measure(model_name: str, dataset: str, passes: int, data_path: Path, names: list[str]) -> dict:
    import torch

    trainer, train, valid = build(model_name, dataset, data_path, {"cuda_graph_eval": "graphed" in names})
    ways = Ways(trainer, train, valid)
    seconds = {way: [] for way in names}
    for index in range(passes + 1):
        for way in (names if index % 2 == 0 else names[::-1]):
            ways.use(way)
            start = time.perf_counter()
            trainer._valid_epoch(valid)
            if index:  # the first validation of each way builds what the next ones replay
                seconds[way].append(time.perf_counter() - start)
            assert torch.equal(ways.topk[-1], ways.topk[0]), f"{way}: the top-k hits differ"
    row = {way: statistics.median(values) for way, values in seconds.items()}
    return {"case": f"{model_name}:{dataset}", "batches": len(valid), "recorded": ways.graphed is not None, **row}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["BPR:ml-1m", "LightGCN:ml-1m", "BPR:Amazon_Sports_and_Outdoors"])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--ways", nargs="+", default=["before", "now"], choices=["before", "now", "graphed"])
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    ways = list(dict.fromkeys(args.ways))
    print(f"median of {args.passes} validations each way, after one at the start; top-k hits equal throughout\n")
    print("| case | batches | " + " | ".join(f"{way} s" for way in ways) + " | " +
          " | ".join(f"{ways[0]} / {way}" for way in ways[1:]) + " |")
    print("|---|---|" + "---|" * (2 * len(ways) - 1))
    for case in args.cases:
        model_name, dataset = case.split(":")
        row = measure(model_name, dataset, args.passes, Path(args.data_path), ways)
        note = "" if row["recorded"] or "graphed" not in ways else " (graphed: refused here, as now)"
        print(f"| {row['case']}{note} | {row['batches']} | " + " | ".join(f"{row[way]:.3f}" for way in ways) + " | " +
              " | ".join(f"{row[ways[0]] / row[way]:.2f}x" for way in ways[1:]) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
