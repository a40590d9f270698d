"""A sequential training set's history lists made per batch against made once, on the run's device.

    python bench/bench_windows.py [--cases SASRec:ml-1m] [--epochs 5] [--data-path DIR]

Since 2026-11-30 (recrunner/data/window_rows.py) a sequential model's training batches make their
history lists (`item_id_list`, ...) for their rows only, where the batch is: on a GPU the main job's
tables are 41 MiB instead of 595 MiB, but each batch runs more kernels (on a CPU 7 of the 15 operators
that make a batch make its two lists). On an H200 the next `--fast` epoch was 1.47-1.63 s of training
against 1.23-1.36 s the lease before, on a host found busier. This bench times the difference alone.

Per case, one process loads the data as a run does (recrunner's configuration layers, RecBole's full
sizes, `load_data`: the tables placed on the run's device), twice:

  per batch   what runs do: each batch's lists made from the sorted interactions (`WindowRows.take`)
  made once   the lists made whole before the tables are placed (`Rows` over every column), as
              before 2026-11-30

It checks that both give the same batches, then times, alternating, the training loader's epoch alone
(each batch on the device, synchronised at the end) and reports medians and per batch / made once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def loaders(model: str, dataset: str, data_path: str, once: bool):
    """(config, train loader) as a run builds them; `once`: the history lists made whole first."""
    from recbole.utils import init_seed

    from recrunner.seams.environment import prepare_environment

    prepare_environment()
    from recrunner import Experiment, Workspace, prepare
    from recrunner.data import augmentation
    from recrunner.data.cache import load_data
    from recrunner.seams.batch_tables import Rows

    workspace = Workspace(output_dir=Path("/tmp/bench-windows"), data_path=Path(data_path),
                          config_dir=REPO / "configs")
    config = prepare(Experiment(model, dataset, {"show_progress": False}), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    as_rows = augmentation.WindowedColumns.as_rows
    if once:  # before 2026-11-30: every column made whole, then placed
        augmentation.WindowedColumns.as_rows = lambda columns: Rows(dict(columns.items()))
    try:
        train, _, _ = load_data(config, None)
    finally:
        augmentation.WindowedColumns.as_rows = as_rows
    return config, train


def _epoch(train, device, seed: int) -> list:
    import torch

    train.generator.manual_seed(seed)
    batches = [batch.to(device) for batch in train]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return batches


def measure(case: str, epochs: int, data_path: str) -> dict:
    import torch

    model, dataset = case.split(":")
    built = {way: loaders(model, dataset, data_path, once=way == "made once") for way in ("per batch", "made once")}
    config = built["per batch"][0]
    device = torch.device(config["device"])
    first = {way: _epoch(train, device, config["seed"]) for way, (_, train) in built.items()}
    for a, b in zip(first["per batch"], first["made once"], strict=True):
        assert a.interaction.keys() == b.interaction.keys() and all(torch.equal(a[k], b[k]) for k in a.interaction), \
            "the batches differ"
    times = {way: [] for way in built}
    for epoch in range(epochs):
        for way in built if epoch % 2 == 0 else reversed(list(built)):  # neither always first
            start = time.perf_counter()
            _epoch(built[way][1], device, config["seed"] + epoch)
            times[way].append(time.perf_counter() - start)
    return {"case": case, "device": str(device), "batches": len(first["per batch"]),
            "median": {way: statistics.median(values) for way, values in times.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["SASRec:ml-1m"], metavar="MODEL:DATASET")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    print("| case | device | batches | training loader's epoch: per batch s | made once s | per batch / made once |")
    print("|---|---|---|---|---|---|")
    for case in args.cases:
        m = measure(case, args.epochs, args.data_path)  # ml-100k: RecBole's own where the folder lacks it
        each, once = m["median"]["per batch"], m["median"]["made once"]
        print(f"| {case} | {m['device']} | {m['batches']} | {each:.3f} | {once:.3f} | {each / once:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
