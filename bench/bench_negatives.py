"""A training epoch's batches with RecBole's negatives (numpy) against torch's (fast mode's `fast_negatives`).

    python bench/bench_negatives.py [--cases BPR:ml-1m ...] [--passes 5] [--device cpu|cuda]
                                    [--distribution uniform|popularity] [--data-path ../shared/datasets]

One process; per case the training loader as a run builds it (recrunner's config layers,
`load_data`, on `--device`), then whole epochs of its batches, the two ways taking turns, the first
epoch of each way not counted: *numpy*, RecBole's sampler with numpy's RNG, checked as arrays
(seams/samplers.py), what exact mode draws; *torch*, the negatives drawn by torch where the batch is
(seams/negatives.py). Every negative of every batch is checked against the user's used items
(outside the timing). Printed: each way's median milliseconds a batch (the whole batch: its gather,
join and negatives; on a GPU synchronised at the epoch's end), the ratio, and how many negatives the
epoch drew.
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


def build(model_name: str, dataset: str, data_path: Path, device: str, distribution: str = "uniform"):
    """The training loader as a run builds it, on `device`, drawing `distribution` negatives."""
    from recbole.utils import init_seed

    from recrunner import Experiment, Workspace, prepare
    from recrunner.data.cache import load_data

    folder = Path(tempfile.mkdtemp(prefix="bench-negatives-"))
    workspace = Workspace(folder / "runs", data_path, REPO / "configs")
    params = {"train_neg_sample_args": {"distribution": distribution, "sample_num": 1, "alpha": 1.0, "dynamic": False},
              **({"device": device} if device != "cpu" else {})}
    prepared = prepare(Experiment(model_name, dataset, params), workspace)
    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    train, _, _ = load_data(config, None)
    return train, config


def epoch(train, sync) -> tuple[float, list]:
    """Seconds for one epoch of `train`'s batches, and each batch's (users, negatives)."""
    drawn = []
    start = time.perf_counter()
    for batch in train:
        drawn.append((batch[train.uid_field], batch[train.neg_item_id]))
    sync()
    return time.perf_counter() - start, drawn


def check(train, drawn) -> int:
    """The negatives drawn (each one checked: never one of its user's used items)."""
    import numpy as np

    used, count = train._sampler.used_ids, 0
    for users, items in drawn:
        users, items = users.cpu().numpy(), items.cpu().numpy()
        bad = [int(item) for user, item in zip(users, items) if int(item) in used[int(user)]]
        assert not bad, f"used items drawn as negatives: {bad[:5]}"
        count += len(items)
    return int(np.int64(count))


def measure(model_name: str, dataset: str, passes: int, data_path: Path, device: str, distribution: str = "uniform") -> dict:
    import torch

    from recrunner.seams.negatives import TorchNegatives

    train, _ = build(model_name, dataset, data_path, device, distribution)
    drawing = TorchNegatives(train._sampler)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    seconds, drawn_count = {"numpy": [], "torch": []}, 0
    for index in range(passes + 1):
        for way in (("numpy", "torch") if index % 2 == 0 else ("torch", "numpy")):
            if way == "torch":
                train.torch_negatives = drawing
            else:
                train.__dict__.pop("torch_negatives", None)
            took, drawn = epoch(train, sync)
            drawn_count = check(train, drawn)
            if index:  # the first epoch of each way builds what it keeps (torch's unused items)
                seconds[way].append(took)
    per_batch = {way: 1000 * statistics.median(values) / len(train) for way, values in seconds.items()}
    return {"case": f"{model_name}:{dataset}", "batches": len(train), "drawn": drawn_count, **per_batch}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["BPR:ml-1m", "BPR:Amazon_Sports_and_Outdoors"])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--distribution", choices=("uniform", "popularity"), default="uniform")
    parser.add_argument("--data-path", type=lambda path: str(Path(path).resolve()),
                        default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    print(f"median of {args.passes} epochs each way, after one at the start; on {args.device}; {args.distribution} "
          "negatives; no used item drawn\n")
    print("| case | batches | negatives an epoch | numpy ms a batch | torch ms a batch | numpy / torch |")
    print("|---|---|---|---|---|---|")
    for case in args.cases:
        model_name, dataset = case.split(":")
        row = measure(model_name, dataset, args.passes, Path(args.data_path), args.device, args.distribution)
        print(f"| {row['case']} | {row['batches']} | {row['drawn']} | {row['numpy']:.3f} | {row['torch']:.3f} | "
              f"{row['numpy'] / row['torch']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
