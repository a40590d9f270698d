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

An entry stores what the split produced, not pickled copies of it (`compact`): the interactions
once, as arrays, and each part (the whole dataset, train, valid, test) as the indices of its rows;
a sequential dataset's history lists are rebuilt from those indices and each row's history length.
Id maps, features and every other attribute are stored once (`entry`: one file, arrays raw).
Whole ml-1m for SASRec: 1.2 GB pickled, 21 MB here. `recrunner cache list|prune` (`store`).

With or without the cache, a sequential dataset is augmented by `seams.augmentation`: RecBole's
rows, from array operations, with the whole dataset's history lists made only if read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import pickle
import time
from pathlib import Path

import numpy as np

from ..core.errors import DataError, one_line
from ..core.files import file_lock
from .augmentation import WindowedColumns, build_split, from_recipe, settled
from ..seams.batch_order import drop_last_batch
from ..seams.dataset import dataset_class_name, history_columns, reuse_built
from ..seams.loaders import batch_loaders, vectorise_loaders
from ..seams.negatives import NO_NEGATIVES, draw_with_torch
from ..seams.replay import replay_batches
from . import entry
from .compact import describe
from .describe import check_split, too_little
from .placement import free_memory, place_tables, replay_limit, run_device, small_evaluation_batches, wider_full_sort

logger = logging.getLogger("recrunner")

SUFFIX = ".entry"
_EXTERNAL = 256  # arrays and tensors with at least this many elements are stored raw, outside the pickle


def load_data(config, cache_dir: Path | None, full_sort_users: int | None = None, torch_negatives: bool = False,
              drop_last: bool = False):
    """(train, valid, test) dataloaders, as `data_preparation(config, create_dataset(config))`; what
    fast mode changes (recrunner.training.fast.data): `full_sort_users`, at least this many users a
    batch in a general model's full-sort evaluation; `torch_negatives`, training negatives drawn by
    torch where the batches are (seams/negatives.py); `drop_last`, each epoch's last, shorter training
    batch left out (seams/batch_order.py)."""
    if cache_dir is None:
        dataset = _dataset(config)
        built, _ = _split(config, dataset)
        return _prepared(config, reuse_built(config, dataset, built), full_sort_users, torch_negatives, drop_last)
    path = entry_path(Path(cache_dir), config)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):
        found = _read(path)
        if found is None:
            started = time.perf_counter()
            dataset = _dataset(config)
            built, base = _split(config, dataset)
            found = dataset, built
            size = _write(path, description(config), dataset, built, base)
            logger.info(f"data cache: built and saved {path.name} ({size / 1e6:.1f} MB, "
                        f"{time.perf_counter() - started:.1f} s)")
        else:
            os.utime(path)  # last used: what `recrunner cache prune --unused-days` goes by
            logger.info(f"data cache: reusing {path.name} (the dataset and its split)")
    dataset, built = found
    return _prepared(config, reuse_built(config, dataset, built), full_sort_users, torch_negatives, drop_last)


def entry_path(cache_dir: Path, config) -> Path:
    return cache_dir / f"{config['dataset']}-{data_key(config)[:16]}{SUFFIX}"


def _dataset(config):
    """RecBole's dataset, filtered; a DataError when nothing usable is left (recrunner.data)."""
    from recbole.data import create_dataset

    try:
        dataset = create_dataset(config)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"RecBole could not build {config['dataset']} from its files ({one_line(exc)[:160]}); "
                        "check the filters (user_inter_num_interval, item_inter_num_interval, val_interval) "
                        "and the atomic files' columns") from None
    if too_little(dataset.inter_num, dataset.user_num - 1, dataset.item_num - 1):
        raise DataError(
            f"{config['dataset']} has {dataset.inter_num} interactions, {dataset.user_num - 1} users and "
            f"{dataset.item_num - 1} items left after filtering (user_inter_num_interval "
            f"{config['user_inter_num_interval']}, item_inter_num_interval {config['item_inter_num_interval']}, "
            f"val_interval {config['val_interval']}); loosen the filters or use a larger dataset "
            f"(`recrunner data describe {config['dataset']}` counts what each filter leaves)")
    return dataset


def _prepared(config, dataset, full_sort_users: int | None = None, torch_negatives: bool = False,
              drop_last: bool = False):
    """The dataloaders; RecBole's complaints about the data as one line."""
    from recbole.data import data_preparation

    wider = wider_full_sort(config, dataset.item_num, full_sort_users)
    if wider is not None:
        config["eval_batch_size"], line = wider
        logger.info(line)
    with _data_errors(config):
        loaders = data_preparation(config, dataset)
    # RecBole's batches and negatives, built as arrays (seams/loaders.py), on the run's device (placement.py)
    building = batch_loaders(loaders)
    gathering = vectorise_loaders(building, place_tables(config, building))
    if torch_negatives:
        _draw_with_torch(building, gathering)
    if drop_last:
        logger.info(drop_last_batch(loaders[0]))
    if loaders[1] is not None:  # validations after the first replay its batches (seams/replay.py)
        replay_batches(loaders[1], replay_limit(free_memory(run_device(config))))
    small = small_evaluation_batches(config, loaders)
    if small:
        logger.info(small)
    return loaders


def _draw_with_torch(loaders, gathering) -> None:
    """Fast mode's training negatives drawn by torch where each loader gathers its batches; one line
    for a loader that keeps RecBole's sampler."""
    for loader in loaders:
        why = draw_with_torch(loader, gathered=loader in gathering)
        if why and why != NO_NEGATIVES:
            logger.info(f"fast mode: training negatives drawn by RecBole's sampler after all: {why}")


def _split(config, dataset):
    """(train, valid, test) datasets and the base a sequential dataset's histories are windows of; a
    DataError where a part is empty (`data describe` decides the same: describe.check_split)."""
    with _data_errors(config):
        built, base = build_split(dataset)
    check_split(config, dataset, built)
    return built, base


@contextlib.contextmanager
def _data_errors(config):
    try:
        yield
    except ValueError as exc:
        raise DataError(f"{config['dataset']}: {one_line(exc)[:300]}") from None


def data_key(config) -> str:
    """The cache key of this run's dataset and split (see the module docstring)."""
    return hashlib.sha256(json.dumps(description(config), sort_keys=True, default=str).encode()).hexdigest()


def description(config) -> dict:
    """Everything the built dataset depends on; its hash is the key, and entries carry it readable."""
    import recbole
    from recbole.utils.argument_list import dataset_arguments

    eval_args = config["eval_args"] or {}
    settings = {arg: config[arg] for arg in dataset_arguments + ["repeatable", "eval_args"]}
    random_split = eval_args.get("order") == "RO"
    return {
        "recbole": recbole.__version__,
        "dataset": config["dataset"],
        "data_path": str(config["data_path"]),
        "class": dataset_class_name(config),
        "settings": settings,
        "seed": config["seed"] if random_split else None,
        "files": folder_fingerprint(Path(config["data_path"])),
    }


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


def _write(path: Path, about: dict, dataset, built, base: dict | None) -> int:
    """Store (dataset, built) compactly: the parts' interactions as recipes over one base table
    (`base`, a sequential dataset's sorted interactions; else the whole dataset's)."""
    parts = [dataset.inter_feat, *(d.inter_feat for d in built)]
    base_columns = dict(base if base is not None else parts[0].interaction)
    sources, length_field = history_columns(dataset)
    recipes = [p.interaction.recipe() if isinstance(p.interaction, WindowedColumns) else  # windows already
               describe(p.interaction, base_columns, window_sources=sources, length_field=length_field)
               for p in parts]
    used = {name for r in recipes for name, how in r.columns.items() if how[0] == "take"} | \
           {how[1] for r in recipes for how in r.columns.values() if how[0] == "window"}
    base_columns = {k: v for k, v in base_columns.items() if k in used}
    arrays: list[np.ndarray] = []
    tables = _dumps((base_columns, recipes), arrays)
    objects = _dumps((dataset, built), arrays, parts=parts)
    source_bytes = sum(size for _, size, _ in about["files"])
    header = {"about": about, "created": time.time(), "source_bytes": source_bytes,
              "rows": [r.length for r in recipes], "stored_whole": sorted({c for r in recipes for c in r.full_columns})}
    return entry.write(path, header, {"tables": tables, "objects": objects}, arrays)


def _read(path: Path):
    """(dataset, built) from the entry; None when there is none or it cannot be used (rebuilt then)."""
    if not path.exists():
        return None
    try:
        _, payload, arrays = entry.read(path)
        base, recipes = _loads(payload["tables"], arrays)
        whole, *split = (from_recipe(recipe, base) for recipe in recipes)  # columns made only if read
        parts = [whole, *settled(split)]
        return _loads(payload["objects"], arrays, parts=parts)
    except Exception as exc:  # a damaged entry is rebuilt, never trusted
        logger.warning(f"data cache: {path.name} is unreadable ({one_line(exc)[:120]}); rebuilding it")
        return None


class _Pickler(pickle.Pickler):
    """Large arrays and tensors go to `arrays` (stored raw); the parts' interactions are left out."""

    def __init__(self, file, arrays: list, parts: list):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arrays, self.parts = arrays, {id(p): i for i, p in enumerate(parts)}

    def persistent_id(self, obj):
        import torch

        if id(obj) in self.parts:
            return ("part", self.parts[id(obj)])
        if isinstance(obj, torch.Tensor) and obj.numel() >= _EXTERNAL and obj.layout == torch.strided:
            self.arrays.append(obj.detach().cpu().numpy())
            return ("tensor", len(self.arrays) - 1)
        if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf" and obj.size >= _EXTERNAL:
            self.arrays.append(obj)
            return ("ndarray", len(self.arrays) - 1)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, arrays: list, parts: list):
        super().__init__(file)
        self.arrays, self.parts = arrays, parts

    def persistent_load(self, pid):
        import torch

        kind, index = pid
        if kind == "part":
            return self.parts[index]
        return torch.from_numpy(self.arrays[index]) if kind == "tensor" else self.arrays[index]


def _dumps(obj, arrays: list, parts=()) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, arrays, list(parts)).dump(obj)
    return buffer.getvalue()


def _loads(data: bytes, arrays: list, parts=()):
    return _Unpickler(io.BytesIO(data), arrays, list(parts)).load()
