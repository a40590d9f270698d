"""Batches built where the model is (recrunner/data/placement.py) against the previous data path, on the same work.

    python bench/bench_placement.py [--cases SASRec:ml-1m BPR:ml-1m BPR:ml-1m:uni100] [--epochs 3] [--data-path DIR]

A case is MODEL:DATASET, or MODEL:DATASET:MODE with MODE RecBole's evaluation mode (`eval_args`'s
`mode`: full, uni100, labeled, ...).

Per case, one process builds RecBole's loaders once (recrunner's config layers, RecBole's full
sizes), then times, alternating, the two ways recrunner has built batches:

  previous  training batches gathered on the host (the seam of seams/loaders.py before
            placement.py), evaluation batches by RecBole's collate; the trainer copies each batch
            to the device
  placed    what runs do now: the tables placed by `place_tables` (on a GPU: copied there once,
            every batch a gather there; on a CPU: the same code on the host tables), training
            and evaluation batches gathered (full sort, sampled and labeled evaluation)

Timed: a training epoch of the loader alone (batches and negatives, each moved to the device as the
trainer moves it), a validation pass of the loader alone, and a full validation (`trainer.evaluate`,
the model scoring every item). Before timing, it checks that both give identical batches and the same
validation result. Reported: medians over `--epochs` per mode (the modes take turns going first), and
previous / placed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _build(model: str, dataset: str, data_path: str | None, mode: str | None = None):
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    from recrunner.seams.models import model_class  # as runs build it: RecBole's anomaly detection off
    from recrunner.config.layers import layered_params
    from recrunner.seams.config import recbole_argv_cleared
    from recrunner.seams.environment import quiet_known_warnings
    from recrunner.training.loop.trainer import CustomTrainer

    quiet_known_warnings()
    params = {**layered_params(REPO / "configs", model, dataset, {}), "show_progress": False, "progress_bar": False,
              **({"data_path": data_path} if data_path else {})}
    if mode:
        params["eval_args"] = {**(params.get("eval_args") or {}), "mode": mode}
    with recbole_argv_cleared():
        config = Config(model=model, dataset=dataset, config_dict=params)
    init_seed(config["seed"], config["reproducibility"])
    loaders = data_preparation(config, create_dataset(config))
    trainer = CustomTrainer(config, model_class(model)(config, loaders[0]._dataset).to(config["device"]))
    return config, loaders, trainer


class _Modes:
    """Switch the loaders between the previous data path and the placed one."""

    def __init__(self, config, loaders):
        from recrunner.data.placement import place_tables
        from recrunner.seams.loaders import vectorise_loaders
        from recrunner.seams.batch_tables import plain_tables

        self.loaders = [loader for loader in loaders[:2]]
        recbole = self._current()
        vectorise_loaders(loaders, lambda loader: plain_tables(loader._dataset) if type(loader).__name__ == "TrainDataLoader" else None)
        self.previous = self._current()
        self._set(recbole)
        vectorise_loaders(loaders, place_tables(config, loaders))
        self.placed = self._current()

    def _current(self):
        return [(vars(loader).get("collate_fn"), vars(loader._dataset).get("join")) for loader in self.loaders]

    def _set(self, state):
        for loader, (collate, join) in zip(self.loaders, state):
            for owner, name, value in ((loader, "collate_fn", collate), (loader._dataset, "join", join)):
                if value is None:
                    vars(owner).pop(name, None)
                else:
                    setattr(owner, name, value)

    def use(self, mode: str):
        self._set(getattr(self, mode))


def _batches(loader, device):
    """A pass over the loader as the trainer sees it: each batch moved to the device."""
    import torch

    for batch in loader:
        interaction = batch if not isinstance(batch, tuple) else batch[0]
        interaction.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _check_same(config, loaders, trainer, modes) -> int:
    import torch
    from recbole.utils import init_seed

    seen = []
    for mode in ("previous", "placed"):
        modes.use(mode)
        init_seed(config["seed"], config["reproducibility"])
        loaders[0].generator.manual_seed(config["seed"])
        train = [{k: v.cpu() for k, v in batch.interaction.items()} for batch in loaders[0]]
        seen.append((train, trainer.evaluate(loaders[1], load_best_model=False)))
    (a_train, a_eval), (b_train, b_eval) = seen
    for a, b in zip(a_train, b_train, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "the batches differ"
    assert a_eval == b_eval, f"validation differs: {a_eval} against {b_eval}"
    return len(a_train)


def measure(case: str, epochs: int, data_path: str | None) -> dict:
    model, dataset, *mode = case.split(":")
    config, loaders, trainer = _build(model, dataset, data_path, *mode)
    modes = _Modes(config, loaders)
    batches = _check_same(config, loaders, trainer, modes)
    device = trainer.device
    timed = {"train loader": lambda: _batches(loaders[0], device), "valid loader": lambda: _batches(loaders[1], device),
             "validation": lambda: trainer.evaluate(loaders[1], load_best_model=False)}
    times = {(mode, what): [] for mode in ("previous", "placed") for what in timed}
    for epoch in range(epochs):
        for mode in ("previous", "placed") if epoch % 2 == 0 else ("placed", "previous"):  # no mode always first
            modes.use(mode)
            for what, work in timed.items():
                start = time.perf_counter()
                work()
                times[mode, what].append(time.perf_counter() - start)
    median = {key: statistics.median(values) for key, values in times.items()}
    return {"case": case, "device": str(device), "batches": batches, "median": median}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["SASRec:ml-1m", "BPR:ml-1m", "BPR:ml-1m:uni100"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    whats = ("train loader", "valid loader", "validation")
    print("| case | device | batches | " + " | ".join(f"{w}: previous s | placed s | ratio" for w in whats) + " |")
    print("|---|---|---|" + "---|---|---|" * len(whats))
    for case in args.cases:
        data_path = None if case.split(":")[1] == "ml-100k" else args.data_path  # ml-100k ships with RecBole
        m = measure(case, args.epochs, data_path)
        cells = [f"{m['median']['previous', w]:.3f} | {m['median']['placed', w]:.3f} | "
                 f"{m['median']['previous', w] / m['median']['placed', w]:.2f}x" for w in whats]
        print(f"| {case} | {m['device']} | {m['batches']} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
