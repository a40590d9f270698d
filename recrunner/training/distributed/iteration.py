"""Which batches a process iterates: skipping batches without building them (a resume within an
epoch, recrunner.training.loop.steps) and a data-parallel process's part of each batch
(recrunner.training.distributed.world)."""

from __future__ import annotations


def skip_batches(iterator, count: int) -> None:
    """Advance a DataLoader iterator by `count` batches; a single-process one without building them."""
    from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

    for _ in range(count):
        if isinstance(iterator, _SingleProcessDataLoaderIter):
            iterator._next_index()
        else:
            next(iterator)


def part_bounds(length: int, rank: int, size: int) -> tuple[int, int]:
    """Rank `rank`'s contiguous share of `length` items split in `size` parts differing by at most one (pure)."""
    return length * rank // size, length * (rank + 1) // size


def rank_part(indices, rank: int, size: int):
    """This rank's part of one global batch's sample indices, a slice of them (a list of a list, a
    tensor of a tensor) (pure). A batch with fewer samples than processes repeats samples (as torch's
    DistributedSampler pads), so no process gets none."""
    if len(indices) < size:
        one = rank % len(indices)
        return indices[one:one + 1]
    start, end = part_bounds(len(indices), rank, size)
    return indices[start:end]


def rank_batches(iterator, loader, world):
    """This process's part of each global batch the loader's iterator draws, built here only.

    The iterator must be a single-process one (`worker: 0`): its `_next_index` gives the global
    batch's sample indices without building the batch; RecBole's loaders collate indices."""
    while True:
        try:
            indices = iterator._next_index()
        except StopIteration:
            return
        yield loader.collate_fn(rank_part(indices, world.rank, world.size))
