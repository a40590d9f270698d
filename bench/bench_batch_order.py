"""A training batch's host work before and after 2026-11-27: rows as one tensor, gathered by index_select.

    python bench/bench_batch_order.py [--cases SASRec:ml-1m BPR:ml-1m] [--epochs 6] [--data-path DIR]

Per case, one process builds the loaders as runs do (recrunner's config layers, RecBole's full sizes,
`vectorise_loaders` with `place_tables`), then times, taking turns, a pass of the training loader and
of the validation loader (batches and negatives, each moved to the device, as the trainer sees them)
three ways:

  per row   before: torch's DataLoader as RecBole builds it (the sampler yields each row number, a
            BatchSampler makes a list of them, the fetcher indexes `list(range(n))` row by row),
            and the collate gathers each column with advanced indexing (`column[rows]`)
  tensor    the same rows as slices of one permutation (`recrunner/seams/batch_order.py`,
            `EpochOrder`), gathered with advanced indexing
  now       what runs do: rows as one tensor, each column gathered with `index_select`
            (`recrunner/seams/batch_tables.py`, `Rows.take`)

Before timing, it checks that the three give identical batches and leave the loader's generator in
the same state. Reported: the median milliseconds per batch over `--epochs` passes per way, and per
row / now. What is left per batch is the gather and, for BPR, the negatives RecBole's sampler draws.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

_ATTRIBUTES = ("sampler", "batch_sampler", "dataset")


WAYS = ("per row", "tensor", "now")


class _Ways:
    """Switch loaders between the three ways (module docstring)."""

    def __init__(self, loaders, per_row):
        from recrunner.seams.batch_tables import Rows

        self.loaders, self.rows = loaders, Rows
        self.per_row, self.tensor = per_row, [_attributes(loader) for loader in loaders]
        self.take = Rows.take

    def use(self, way: str):
        for loader, values in zip(self.loaders, self.per_row if way == "per row" else self.tensor):
            for name, value in zip(_ATTRIBUTES, values):
                object.__setattr__(loader, name, value)
        self.rows.take = self.take if way == "now" else _indexed


def _indexed(self, index) -> dict:
    """`Rows.take` before index_select: advanced indexing."""
    return {name: column[index] for name, column in self.columns.items()}


def _attributes(loader) -> tuple:
    """The DataLoader's own sampler, batch sampler and dataset (RecBole's loaders answer `dataset`
    with their RecBole dataset outside an iteration, so they are read from the instance)."""
    return tuple(vars(loader)[name] for name in _ATTRIBUTES)


def _pass(loader, device) -> None:
    import torch

    for batch in loader:
        interaction = batch if not isinstance(batch, tuple) else batch[0]
        interaction.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _epoch(loader, seed) -> tuple[list, object]:
    import numpy as np

    loader.generator.manual_seed(seed)
    np.random.seed(seed)  # the negatives RecBole's sampler draws
    batches = [{k: v.cpu() for k, v in (b if not isinstance(b, tuple) else b[0]).interaction.items()} for b in loader]
    return batches, loader.generator.get_state()


def _check_same(loaders, ways, seed) -> None:
    import torch

    for loader in loaders:
        seen = []
        for way in WAYS:
            ways.use(way)
            seen.append(_epoch(loader, seed))
        (a, state_a), *others = seen
        for b, state_b in others:
            assert torch.equal(state_a, state_b), "the generator moved otherwise"
            for x, y in zip(a, b, strict=True):
                assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), "the batches differ"


def measure(case: str, epochs: int, data_path: str | None) -> dict:
    from bench_placement import _build

    from recrunner.data.placement import place_tables
    from recrunner.seams.loaders import vectorise_loaders

    model, dataset = case.split(":")
    config, all_loaders, trainer = _build(model, dataset, data_path)
    loaders = list(all_loaders[:2])
    per_row = [_attributes(loader) for loader in loaders]
    vectorise_loaders(all_loaders, place_tables(config, all_loaders))
    ways = _Ways(loaders, per_row)
    _check_same(loaders, ways, config["seed"])
    device = trainer.device
    times = {(way, part): [] for way in WAYS for part in ("train", "valid")}
    for epoch in range(epochs):
        for way in WAYS[epoch % 3:] + WAYS[:epoch % 3]:  # each way first in turn
            ways.use(way)
            for part, loader in zip(("train", "valid"), loaders):
                start = time.perf_counter()
                _pass(loader, device)
                times[way, part].append((time.perf_counter() - start) / len(loader) * 1e3)
    return {"case": case, "device": str(device), "batches": [len(loader) for loader in loaders],
            "median": {key: statistics.median(values) for key, values in times.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["SASRec:ml-1m", "BPR:ml-1m"])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    print("| case | device | batches (train, valid) | train: per row ms/batch | tensor | now | per row / now "
          "| valid: per row ms/batch | tensor | now | per row / now |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        data_path = None if case.split(":")[1] == "ml-100k" else args.data_path  # ml-100k ships with RecBole
        m = measure(case, args.epochs, data_path)
        cells = [" | ".join(f"{m['median'][way, p]:.3f}" for way in WAYS)
                 + f" | {m['median']['per row', p] / m['median']['now', p]:.2f}x" for p in ("train", "valid")]
        print(f"| {case} | {m['device']} | {m['batches'][0]}, {m['batches'][1]} | " + " | ".join(cells) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
