"""RecBole's training batches against recrunner's, built as arrays (recrunner/seams/loaders.py), on the same work.

    python bench/bench_loaders.py [--cases BPR:ml-1m BPR:ml-100k] [--epochs 3] [--data-path ../shared/datasets]

Per case, one process builds RecBole's loaders once, then times epochs alternately with RecBole's
collate, sampler and row-by-row index and with recrunner's as every run has them (`vectorise_loaders`:
the collate and the sampler as arrays, each batch's rows as one tensor): the loader alone (batches and
negatives, no model) and a whole training epoch (CustomTrainer's `_train_epoch`). Before timing, it
checks that the two give identical batches for an epoch. Reported: medians over `--epochs` epochs
per mode, and the ratios.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _build(model: str, dataset: str, data_path: str | None):
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    from recrunner.seams.models import model_class  # as runs build it: RecBole's anomaly detection off
    from recrunner.config.layers import layered_params
    from recrunner.seams.config import recbole_argv_cleared
    from recrunner.seams.environment import quiet_known_warnings
    from recrunner.training.loop.trainer import CustomTrainer

    quiet_known_warnings()
    work = Path(tempfile.mkdtemp(prefix="bench-sampler-"))
    os.chdir(work)
    params = {**layered_params(REPO / "configs", model, dataset, {}), "show_progress": False,
              "checkpoint_dir": str(work / "ckpt"), **({"data_path": data_path} if data_path else {})}
    with recbole_argv_cleared():
        config = Config(model=model, dataset=dataset, config_dict=params)
    init_seed(config["seed"], config["reproducibility"])
    train, _, _ = data_preparation(config, create_dataset(config))
    trainer = CustomTrainer(config, model_class(model)(config, train._dataset).to(config["device"]))
    return config, train, trainer


class _Modes:
    """Switch one training loader between RecBole's batches and recrunner's."""

    ORDER = ("sampler", "batch_sampler", "dataset")  # torch's DataLoader's: how it hands rows to the collate

    def __init__(self, train):
        from recrunner.seams.loaders import gather_batches
        from recrunner.seams.batch_order import rows_as_tensors
        from recrunner.seams.batch_tables import plain_tables
        from recrunner.seams.samplers import vectorise

        self.train, dataset = train, train._dataset
        order = {name: vars(train)[name] for name in self.ORDER}
        self.recbole = (train._sampler, vars(train).get("collate_fn"), vars(dataset).get("join"), order)
        sampler = copy.copy(train._sampler)
        vectorise(sampler)
        tables = plain_tables(dataset)
        assert tables is not None, "this dataset keeps RecBole's collate"
        gather_batches(train, tables)
        assert rows_as_tensors(train), "this loader keeps torch's row-by-row index"  # as every run's loader
        self.vectorised = (sampler, train.collate_fn, dataset.join, {name: vars(train)[name] for name in self.ORDER})

    def use(self, mode: str):
        sampler, collate, join, order = getattr(self, mode)
        self.train._sampler = sampler
        for name, value in order.items():
            object.__setattr__(self.train, name, value)  # past the DataLoader's guard, as rows_as_tensors sets them
        for owner, name, value in ((self.train, "collate_fn", collate), (self.train._dataset, "join", join)):
            if value is None:
                vars(owner).pop(name, None)
            else:
                setattr(owner, name, value)


def _same_batches(config, train, modes) -> int:
    import torch
    from recbole.utils import init_seed

    epochs = []
    for mode in ("recbole", "vectorised"):
        modes.use(mode)
        init_seed(config["seed"], config["reproducibility"])
        train.generator.manual_seed(config["seed"])
        epochs.append([batch.interaction for batch in train])
    for a, b in zip(*epochs, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "the batches differ"
    return len(epochs[0])


def measure(case: str, epochs: int, data_path: str | None) -> dict:
    model, dataset = case.split(":")
    config, train, trainer = _build(model, dataset, data_path)
    modes = _Modes(train)
    batches = _same_batches(config, train, modes)
    times = {(mode, what): [] for mode in ("recbole", "vectorised") for what in ("loader", "epoch")}
    for epoch in range(epochs):
        for mode in ("recbole", "vectorised"):
            modes.use(mode)
            start = time.perf_counter()
            for _ in train:
                pass
            times[mode, "loader"].append(time.perf_counter() - start)
            trainer.epoch = epoch
            start = time.perf_counter()
            trainer._train_epoch(train, epoch)
            times[mode, "epoch"].append(time.perf_counter() - start)
    median = {key: statistics.median(values) for key, values in times.items()}
    return {"case": case, "batches": batches, **{f"{mode} {what}": value for (mode, what), value in median.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["BPR:ml-100k", "BPR:ml-1m"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--data-path", type=lambda path: str(Path(path).resolve()),  # the run works in its own folder
                        default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    print("| case | batches | RecBole loader s | vectorised loader s | ratio | RecBole epoch s | vectorised epoch s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        data_path = None if case.endswith(":ml-100k") else args.data_path  # ml-100k ships with RecBole
        m = measure(case, args.epochs, data_path)
        print(f"| {case} | {m['batches']} | {m['recbole loader']:.3f} | {m['vectorised loader']:.3f} | "
              f"{m['recbole loader'] / m['vectorised loader']:.2f}x | {m['recbole epoch']:.3f} | "
              f"{m['vectorised epoch']:.3f} | {m['recbole epoch'] / m['vectorised epoch']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
