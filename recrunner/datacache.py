"""Shared preprocessing: each (dataset files, data settings) is filtered, remapped and split once.

RecBole rebuilds the dataset for every run (`create_dataset` then `dataset.build()` in
`data_preparation`): reading the atomic files, filtering, remapping ids, sequence augmentation and
the split. recrunner keeps the result in `<output>/.cache/data/` under a key made of

- the dataset class RecBole picks for the model (Dataset, SequentialDataset, KG...),
- every setting RecBole itself lists as shaping a dataset (`recbole.utils.argument_list.
  dataset_arguments`), plus `eval_args` and `repeatable`, and the seed when the split is random,
- the size and SHA-256 of every file of the dataset folder, and the RecBole version,

so a changed file or setting is a different key (a cache miss), never stale data. Samplers and
dataloaders, which depend on the model, are built per run by RecBole's own `data_preparation`.
Parallel workers that need the same entry wait on a file lock while one of them builds it.
The files are pickles written by recrunner into its own output folder; delete `.cache/` at will.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import pickle
from pathlib import Path

from .errors import DataError, one_line
from .rundir import atomic_file, file_lock
from .seams.dataset import dataset_class_name, reuse_built

logger = logging.getLogger("recrunner")

CACHE_FORMAT = 1


def load_data(config, cache_dir: Path | None):
    """(train, valid, test) dataloaders, as `data_preparation(config, create_dataset(config))`."""
    if cache_dir is None:
        return _prepared(config, _dataset(config))
    path = Path(cache_dir) / f"{config['dataset']}-{data_key(config)[:16]}.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):
        entry = _read(path)
        if entry is None:
            dataset = _dataset(config)
            entry = (dataset, _prepared(config, dataset, split_only=True))
            _write(entry, path)
            logger.info(f"data cache: built and saved {path.name}")
        else:
            logger.info(f"data cache: reusing {path.name} (the dataset and its split)")
    dataset, built = entry
    return _prepared(config, reuse_built(config, dataset, built))


def _dataset(config):
    """RecBole's dataset, filtered; a DataError when nothing usable is left (recrunner.data)."""
    from recbole.data import create_dataset

    try:
        dataset = create_dataset(config)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"RecBole could not build {config['dataset']} from its files ({one_line(exc)[:160]}); "
                        "check the filters (user_inter_num_interval, item_inter_num_interval, val_interval) "
                        "and the atomic files' columns") from None
    if dataset.inter_num == 0 or dataset.user_num <= 2 or dataset.item_num <= 2:
        raise DataError(
            f"{config['dataset']} has {dataset.inter_num} interactions, {dataset.user_num - 1} users and "
            f"{dataset.item_num - 1} items left after filtering (user_inter_num_interval "
            f"{config['user_inter_num_interval']}, item_inter_num_interval {config['item_inter_num_interval']}, "
            f"val_interval {config['val_interval']}); loosen the filters or use a larger dataset")
    return dataset


def _prepared(config, dataset, split_only=False):
    """The split (`dataset.build()`) or the dataloaders; RecBole's complaints about the data as one line."""
    from recbole.data import data_preparation

    try:
        return dataset.build() if split_only else data_preparation(config, dataset)
    except ValueError as exc:
        raise DataError(f"{config['dataset']}: {one_line(exc)[:300]}") from None


def data_key(config) -> str:
    """The cache key of this run's dataset and split (see the module docstring)."""
    import recbole
    from recbole.utils.argument_list import dataset_arguments

    eval_args = config["eval_args"] or {}
    settings = {arg: config[arg] for arg in dataset_arguments + ["repeatable", "eval_args"]}
    random_split = eval_args.get("order") == "RO"
    description = {
        "format": CACHE_FORMAT,
        "recbole": recbole.__version__,
        "dataset": config["dataset"],
        "class": dataset_class_name(config),
        "settings": settings,
        "seed": config["seed"] if random_split else None,
        "files": folder_fingerprint(Path(config["data_path"])),
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode()).hexdigest()




def folder_fingerprint(folder: Path) -> list:
    """(name, bytes, SHA-256) of every file in a dataset's folder; digests cached by size and mtime."""
    if not folder.is_dir():
        return []
    return [(p.name, *_file_digest(str(p), p.stat().st_size, p.stat().st_mtime_ns))
            for p in sorted(folder.iterdir()) if p.is_file()]


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int) -> tuple[int, str]:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return size, digest.hexdigest()


def _read(path: Path):
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception as exc:  # a damaged entry is rebuilt, never trusted
        logger.warning(f"data cache: {path.name} is unreadable ({type(exc).__name__}); rebuilding it")
        return None


def _write(entry, path: Path) -> None:
    with atomic_file(path) as f:
        pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
