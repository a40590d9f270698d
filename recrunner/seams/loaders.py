"""RecBole builds each batch with Python loops; recrunner gathers the same batches with tensor indexing.

| RecBole 1.2.1                                           | recrunner                                        |
|---------------------------------------------------------|--------------------------------------------------|
| `TrainDataLoader.collate_fn` -> `Dataset.__getitem__`   | `gather_batches`: the rows and the joined user   |
| and `Dataset.join` -> `Interaction.__getitem__`, which  | and item features gathered with a tensor index   |
| turns the index into a Python list for every column     | (what indexing with that list gives)             |
| `FullSortEvalDataLoader.collate_fn` (sequential        | `gather_eval_batches`: the same 4-tuple, from   |
| models): `Dataset.__getitem__`, as in training         | the gathered rows                                |
| `FullSortEvalDataLoader.collate_fn` (other models):    | `gather_user_batches`: the users' rows, their    |
| a `torch.full_like` and a `torch.cat` over the batch's | histories and positives sliced from one flat     |
| users' history and positive tensors, a list per user   | tensor each (`UserTables`, `Ragged`)             |

Batches are identical to RecBole's, element for element, and the samplers' negatives and numpy's
RNG too (`seams/samplers.py`; tests/test_loaders_seam.py and tests/test_placement.py compare whole
epochs), so exact mode stays bit-identical: this seam is on in every run (`data/cache.py`).

Where the rows are gathered is a `Tables` (training and a sequential model's evaluation: the
interactions' columns and the user and item features joined to them, each a `Rows`) or a
`UserTables` (a full-sort evaluation's users), all on one device. On a GPU
(`recrunner.data.placement` decides) the tables are copied there once and a batch is a gather
there: only the batch's row numbers cross from the host (none for the evaluation's consecutive
users), and, where negatives are drawn, the user and item ids RecBole's sampler reads (gathered
from host copies) and the negatives it draws with numpy's RNG, as RecBole draws them (pointwise
negatives' labels, which RecBole makes on the host, are made there). Loaders this
module does not know (a knowledge-graph model's triples, sampled evaluation with a transform) keep
RecBole's collate; `batch_loaders` finds the user-item loader inside a knowledge-graph one.
"""

from __future__ import annotations

import types

import numpy as np
import torch

from .batch_order import rows_as_tensors
from .samplers import vectorise_sampler
from .batch_tables import Tables, UserTables, plain_tables, to_device


def vectorise_loaders(loaders, tables=None) -> list:
    """Give every RecBole sampler behind `loaders` the array check, and every loader this module can
    collate (`gathered`) gathered batches, each once, their row numbers handed over as one tensor
    (`seams/batch_order.py`); the loaders that gather. `tables(loader)`: where the loader's rows are
    gathered (a `Tables` or `UserTables`, or None: RecBole's collate); without it, on the host."""
    gathering = []
    for loader in loaders:
        if loader is None:
            continue
        sampler = getattr(loader, "_sampler", None)
        if sampler is not None:
            vectorise_sampler(sampler)
        kind = gathered(loader)
        found = None if kind is None else tables(loader) if tables is not None else host_tables(loader)
        if found is not None:
            COLLATES[kind](loader, found)
            rows_as_tensors(loader)
            gathering.append(loader)
    return gathering


# RecBole's KnowledgeBasedDataLoader is no DataLoader: it holds two, by attribute, named here by suffix
_INNER_LOADERS = (("general_dataloader", ""), ("kg_dataloader", ".kg"))


def inner_loaders(loader) -> dict:
    """The DataLoaders that build `loader`'s batches, by suffix: {"": loader} itself, or a
    knowledge-graph loader's user-item loader ("") and triples' loader (".kg", RecBole's collate)."""
    found = {suffix: getattr(loader, name) for name, suffix in _INNER_LOADERS if getattr(loader, name, None) is not None}
    return found or {"": loader}


def batch_loaders(loaders) -> list:
    """The loaders that build batches: `loaders`, a knowledge-graph one as the two it holds."""
    return [part for loader in loaders for part in inner_loaders(loader).values()]


def gathered(loader) -> str | None:
    """Which of this module's collates `loader` can take: "train", "eval" (a sequential model's full
    sort: rows of the interactions), "users" (another model's full sort: the users, their histories
    and positives), or None (RecBole's own stays)."""
    kind = type(loader).__name__
    if kind == "TrainDataLoader":
        return "train"
    if kind == "FullSortEvalDataLoader":
        return "eval" if getattr(loader, "is_sequential", False) else "users"
    if kind == "NegSampleEvalDataLoader":
        return "sampled"
    return None


def host_tables(loader):
    """The tables `loader` gathers its batches from, on the host (None: it keeps RecBole's collate)."""
    kind = gathered(loader)
    if kind == "users":
        return UserTables.of(loader)
    if kind == "sampled" and static_negatives(loader) and not _pointwise_as_drawn(loader):
        return None
    return plain_tables(loader._dataset)


def _pointwise_as_drawn(loader) -> bool:
    """Whether a sampled evaluation's per-user batches can be gathered whole: RecBole's pointwise
    negatives (every evaluation loader's) and no transform (RecBole transforms each user's rows)."""
    return _sampling_name(loader) == "_neg_sample_by_point_wise_sampling" and identity_transform(loader)


def identity_transform(loader) -> bool:
    """Whether `loader`'s transform is RecBole's identity (`Equal`): its batches are the gathered rows."""
    return type(getattr(loader, "transform", None)).__name__ == "Equal"


def _sampling_name(loader) -> str:
    """The name of the RecBole method that adds `loader`'s negatives to a batch ("" if none)."""
    sampling = getattr(loader, "sampling_func", None)
    return getattr(getattr(sampling, "__func__", sampling), "__name__", "")


def _pointwise_batch(loader, data, drawn):
    """RecBole's `_neg_sample_by_point_wise_sampling` (the rows, then the rows again with the drawn
    items, labeled 1.0 and 0.0) with its labels made where the rows are: RecBole makes them on the
    host, to be copied with every batch."""
    from recbole.data.interaction import Interaction

    count = len(data)
    batch = data.repeat(loader.times)
    batch[loader.iid_field][count:] = drawn
    batch = loader._dataset.join(batch)
    labels = batch[loader.iid_field].new_zeros(count * loader.times, dtype=torch.get_default_dtype())
    labels[:count] = 1.0
    batch.update(Interaction({loader.label_field: labels}))
    return batch


def static_negatives(loader) -> bool:
    """Whether `loader` draws negatives before the model sees the batch (RecBole's `_neg_sampling`'s
    second branch); a dynamic sampler scores candidates with the model and stays RecBole's."""
    args = getattr(loader, "neg_sample_args", None) or {}
    return not args.get("dynamic", False) and args.get("distribution", "none") != "none" \
        and args.get("sample_num", "none") != "none"


def gather_batches(loader, tables: Tables) -> None:
    """Make `loader` (RecBole's TrainDataLoader) build its batches by gathering rows of `tables`."""
    dataset = _joined_from(loader._dataset, tables)  # negatives' features too
    negatives = static_negatives(loader)
    sampling = _pointwise_batch if _sampling_name(loader) == "_neg_sample_by_point_wise_sampling" else \
        (lambda loader, data, drawn: loader.sampling_func(data, drawn))

    def collate_fn(index):
        rows = row_numbers(index)
        placed = tables.placed(rows)
        data = loader.transform(dataset, tables.batch(placed))
        if not negatives:
            return loader._neg_sampling(data)  # none, or dynamic (the model picks among candidates)
        return sampling(loader, data, _negatives(loader, tables, rows, placed))

    loader.collate_fn = collate_fn  # the DataLoader reads it when an epoch's iterator starts


def _negatives(loader, tables: Tables, rows: torch.Tensor, placed: torch.Tensor) -> torch.Tensor:
    """The negatives of the batch of rows `rows` (`placed`: on the tables' device), where the rows are:
    RecBole's sampler's with numpy's RNG, or, in fast mode, torch's (`torch_negatives`, negatives.py)."""
    drawn_by_torch = loader.__dict__.get("torch_negatives")
    if drawn_by_torch is not None:
        return drawn_by_torch(*tables.user_item_ids(placed), loader.neg_sample_num)
    users, items = tables.sampled_ids(rows.numpy())
    return to_device(loader._sampler.sample_by_user_ids(users, items, loader.neg_sample_num), tables.device)


def gather_eval_batches(loader, tables: Tables) -> None:
    """Make a sequential model's FullSortEvalDataLoader gather its batches from `tables`: RecBole's
    (interaction, None, positive_u, positive_i), with the positives where the interaction is."""
    dataset = _joined_from(loader._dataset, tables)

    def collate_fn(index):
        interaction = loader.transform(dataset, tables.batch(row_numbers(index)))
        positive_i = interaction[loader.iid_field]
        return interaction, None, torch.arange(len(interaction), device=positive_i.device), positive_i

    loader.collate_fn = collate_fn


def gather_sampled_batches(loader, tables: Tables) -> None:
    """Make a NegSampleEvalDataLoader gather its batches from `tables`: RecBole's (interaction, each
    row's user, positive users, positive items) where it draws negatives (uni100: each user's rows,
    then those rows again with a negative item each, with labels 1 and 0), else (interaction, None,
    None, None). Negatives are drawn user by user, as RecBole draws them: numpy's RNG moves as there."""
    dataset = _joined_from(loader._dataset, tables)
    if not static_negatives(loader):
        def collate_fn(index):
            return loader._neg_sampling(loader.transform(dataset, tables.batch(row_numbers(index)))), None, None, None
    else:
        def collate_fn(index):
            return _sampled_batch(loader, tables, loader.uid_list[row_numbers(index).numpy()])

    loader.collate_fn = collate_fn


def row_numbers(index) -> torch.Tensor:
    """A batch's row numbers as a host int64 tensor: a tensor as `seams/batch_order.py` hands them
    over, or the list RecBole's DataLoader builds (a data-parallel process's part of a batch, a loader
    left as it was)."""
    if isinstance(index, torch.Tensor):
        return index
    return torch.as_tensor(np.asarray(index, dtype=np.int64))


def _sampled_batch(loader, tables: Tables, users):
    """RecBole's NegSampleEvalDataLoader batch of `users`: per user, cat_interactions of its rows made
    pointwise (rows, then the rows `times - 1` times more with drawn items), in one gather and one join."""
    from recbole.data.interaction import Interaction

    spans = [loader.uid2index[user] for user in users]  # each user's rows of the sorted interactions
    counts = np.fromiter((span.stop - span.start for span in spans), dtype=np.int64, count=len(spans))
    times, device = loader.times, tables.device
    drawn = [loader._sampler.sample_by_user_ids(*tables.sampled_ids(span), loader.neg_sample_num)
             for span in spans]  # one call per user, in order: numpy's RNG moves as in RecBole
    rows = np.concatenate([np.tile(np.arange(span.start, span.stop), times) for span in spans])
    owner = np.repeat(np.arange(len(users), dtype=np.int64), counts * times)  # each row's user
    block = np.cumsum(counts * times) - counts * times  # where each user's rows begin
    positive = to_device(torch.from_numpy(np.arange(len(rows)) - block[owner] < counts[owner]), device)  # its first rows
    data = Interaction(tables.inter.take(to_device(torch.from_numpy(rows), device)))
    items = data[tables.iid_field]
    positive_i = items[positive]
    items[~positive] = to_device(torch.cat(drawn), device)  # in order: each user's rows repeated, as drawn
    data = tables.join(data)
    data.update(Interaction({loader.label_field: positive.to(torch.get_default_dtype())}))  # RecBole's 1.0 and 0.0
    positive_u = np.repeat(np.arange(len(users), dtype=np.int64), counts)
    return data, to_device(torch.from_numpy(owner), device), to_device(torch.from_numpy(positive_u), device), positive_i


def _joined_from(dataset, tables: Tables):
    """`dataset`, whose `join` (RecBole's, which the loader's negative sampling calls) now reads `tables`."""
    dataset.join = types.MethodType(lambda self, df: tables.join(df), dataset)
    return dataset


def gather_user_batches(loader, tables: UserTables) -> None:
    """Make a general model's FullSortEvalDataLoader gather its batches of users from `tables`."""

    def collate_fn(index):
        return tables.batch(index)

    loader.collate_fn = collate_fn


COLLATES = {"train": gather_batches, "eval": gather_eval_batches, "users": gather_user_batches,
            "sampled": gather_sampled_batches}
