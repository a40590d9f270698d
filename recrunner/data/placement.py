"""Batches built where the model is: a run's tables copied to its device once, each batch a gather there.

RecBole builds every batch on the host and the trainer copies it to the GPU (`interaction.to(
device)` in `Trainer._train_epoch`): on an H200 the main job's GPU waited for the host most of each
epoch. Here the tables a run's loaders read (the interactions, or for a sequential model the
sorted interactions its histories are windows of, with each row's end and length; the user and
item features) are copied to the run's device when its loaders are made, and a batch is a gather
there (`recrunner.seams.loaders`: `Tables`), by the row numbers RecBole's loader draws, so exact
mode trains on the same batches. Only the row numbers cross to the device, and, where negatives
are drawn, the user and item ids RecBole's sampler reads (from host copies of those two columns)
and the ids it draws.

    batches_on_device: true     (default) tables on the run's GPU where they fit
    batches_on_device: false    RecBole's way: batches built on the host, copied per batch

On a CPU the tables are the dataset's own tensors: the same code, with the CPU as the device.
Before copying, the run adds up the bytes of every tensor the tables hold (each once) and copies
them only if that is at most half of the device's free memory (`where_batches`); otherwise it says
so in one line and keeps the host path. A loader that needs the host keeps it too: DataLoader
worker processes (`worker` > 0), a transform other than RecBole's identity (`transform`), and a
dynamic negative sampler (it scores candidates with the model inside the loader).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from ..config.params import eval_modes, setting
from ..core.files import size_text
from ..seams.loaders import gathered, host_tables, static_negatives
from ..seams.batch_tables import Rows, Tables
from ..seams.replay import batch_bytes

logger = logging.getLogger("recrunner")

SHARE_OF_FREE = 0.5  # the tables may take at most this share of the device's free memory


@dataclass(frozen=True)
class Where:
    """Where a run's batches are built: `device`, and why, in one line (pure data)."""

    device: str
    reason: str


def where_batches(device: str, wanted: bool, table_bytes: int, free_bytes: int | None,
                  host_only: str | None = None) -> Where:
    """Where batches are built (pure): on `device` when asked, needed and the tables fit, else the host."""
    if device.startswith("cpu"):
        return Where("cpu", "")
    if not wanted:
        return Where("cpu", "batches: built on the host (batches_on_device: false)")
    if host_only:
        return Where("cpu", f"batches: built on the host: {host_only}")
    if free_bytes is not None and table_bytes > SHARE_OF_FREE * free_bytes:
        return Where("cpu", f"batches: built on the host: the tables ({size_text(table_bytes / 2**20)}) would take more "
                            f"than half of {device}'s free memory ({size_text(free_bytes / 2**20)}); "
                            "batches_on_device: false silences this")
    return Where(device, f"batches: built on {device} (tables {size_text(table_bytes / 2**20)}, copied once)")


def host_only(config, loaders) -> str | None:
    """Why a run's loaders must build their batches on the host, or None (pure over the config)."""
    if (config["worker"] or 0) > 0:
        return f"worker: {config['worker']} builds batches in DataLoader processes"
    if config["transform"] is not None:
        return f"transform: {config['transform']} runs on host batches"
    train = loaders[0]
    if train is not None and (getattr(train, "neg_sample_args", None) or {}).get("dynamic", False):
        return "dynamic negative sampling scores candidates inside the loader"
    return None


def place_tables(config, loaders):
    """`tables(loader)` for `vectorise_loaders`: each loader's Tables, on the run's device where they
    fit (one line says where, on a GPU), else on the host; None for a loader RecBole must collate."""
    found = {id(loader): host_tables(loader) for loader in loaders
             if loader is not None and gathered(loader) is not None}
    device = run_device(config)
    unique = {id(t): t for tables in found.values() if tables is not None for t in tables.tensors()}
    where = where_batches(device, bool(setting(config, "batches_on_device")), sum(batch_bytes(t) for t in unique.values()),
                          free_memory(device), host_only(config, loaders))
    if where.reason:
        logger.info(where.reason)
    if where.device != "cpu":
        moved: dict = {}
        for loader in loaders:
            tables = found.get(id(loader))
            if tables is not None:
                ids = _id_rows(loader._dataset) if isinstance(tables, Tables) else None
                keep_host = ids is None and static_negatives(loader)  # no ids for the sampler: RecBole's collate
                found[id(loader)] = None if keep_host else tables.to(where.device, moved, ids=ids)
    return lambda loader: found.get(id(loader))


REPLAY_BYTES, REPLAY_SHARE_OF_FREE = 2**30, 0.05  # what a validation's kept batches may take at most


def replay_limit(free_bytes: int | None) -> int:
    """The bytes a validation's batches may take where they are kept for the next validation
    (seams/replay.py): 1 GiB, on a GPU at most 5% of its free memory (`free_bytes`; None on a CPU) (pure)."""
    return REPLAY_BYTES if free_bytes is None else min(REPLAY_BYTES, int(REPLAY_SHARE_OF_FREE * free_bytes))


SMALL_EVALUATION = (2, 1000)  # at most this many users a batch, in at least this many batches: say so


def small_evaluation_batches(config, loaders) -> str | None:
    """The line for a general model's full-sort evaluation split into batches of one or two users
    (RecBole's `eval_batch_size` counts scores: 4096 holds one user's on ml-1m), else None (pure over
    the loaders): most of such an evaluation is per-batch work, on a GPU all of it."""
    for loader in loaders[1:]:
        if gathered(loader) != "users" or not hasattr(loader, "step"):
            continue
        users, batches = int(loader.step), len(loader)
        if users <= SMALL_EVALUATION[0] and batches >= SMALL_EVALUATION[1]:
            items = int(loader._dataset.item_num)
            return (f"evaluation: {batches} batches of {users} user{'s' if users > 1 else ''} (eval_batch_size "
                    f"{config['eval_batch_size']} holds {users * items} scores of {items} items), mostly per-batch work; "
                    f"eval_batch_size: 4096000 ({4096000 // items} users a batch) is faster, its scores can differ "
                    "in the last bits (docs/runs.md: Evaluation batches)")
    return None


def wider_full_sort(config, items: int, users: int | None) -> tuple[int, str] | None:
    """The eval_batch_size that gives a general model's full-sort evaluation batches of at least
    `users` users, and the line that says so; None where it has them already, where `users` is None,
    or where the evaluation is not a full sort of users (a sequential model's batches its users
    already; a sampled evaluation's eval_batch_size counts candidate rows) (pure over the config)."""
    from recbole.utils import ModelType

    asked = int(config["eval_batch_size"])
    if users is None or config["MODEL_TYPE"] == ModelType.SEQUENTIAL or set(eval_modes(config["eval_args"]).values()) != {"full"}:
        return None
    now = max(asked // items, 1)
    if now >= users:
        return None
    return users * items, (f"fast mode: full-sort evaluation in batches of {users} users ({now} a batch at "
                           f"eval_batch_size {asked}, {items} items); scores of several users in one product can "
                           "differ in the last bits (docs/runs.md: Evaluation batches)")


def _id_rows(dataset) -> Rows | None:
    """Host rows of the user and item ids (what RecBole's sampler reads), or None where there are none."""
    columns = dataset.inter_feat.interaction
    fields = [dataset.uid_field, dataset.iid_field]
    return Rows({f: columns[f] for f in fields}) if all(f in columns for f in fields) else None


def run_device(config) -> str:
    """The run's device as torch names it ("cpu", "cuda:0") (pure over the config)."""
    return str(torch.device(config["device"] or "cpu"))


def free_memory(device: str) -> int | None:
    """The device's free memory in bytes (None where torch cannot tell, or on a CPU)."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free)
