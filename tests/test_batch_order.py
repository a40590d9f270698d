"""A loader whose rows are handed over as tensors (seams/batch_order.py) draws what torch's samplers draw:
the same batches, and its generator in the same state after every batch, at the epoch's end, and
after a resume's skipped batches."""

import pytest
import torch
from torch.utils.data import DataLoader

from recrunner.seams.batch_order import EpochOrder, epoch_order, rows_as_tensors
from recrunner.seams.loaders import row_numbers


def _loader(rows, batch_size, shuffle, seed=2020, **kwargs):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(list(range(rows)), batch_size=batch_size, shuffle=shuffle, generator=generator,
                      collate_fn=row_numbers, **kwargs)


def _pair(rows, batch_size, shuffle):
    torchs, ours = _loader(rows, batch_size, shuffle), _loader(rows, batch_size, shuffle)
    assert rows_as_tensors(ours)
    return torchs, ours


def _state(loader):
    return loader.generator.get_state()


@pytest.mark.parametrize("rows,batch_size", [(10, 4), (12, 4), (12, 12), (5, 8), (1, 3)])
@pytest.mark.parametrize("shuffle", [True, False])
def test_every_batch_and_generator_state_is_the_samplers(rows, batch_size, shuffle):
    torchs, ours = _pair(rows, batch_size, shuffle)
    assert len(ours) == len(torchs)
    for _ in range(2):  # two epochs: the second starts from the state the first left
        a, b = iter(torchs), iter(ours)
        assert torch.equal(_state(torchs), _state(ours))  # the iterator's base seed drawn alike
        for _ in range(len(torchs)):  # as the step loop draws: never past the last batch
            x, y = next(a), next(b)
            assert isinstance(y, torch.Tensor) and torch.equal(x, y)
            assert torch.equal(_state(torchs), _state(ours))
        assert next(a, None) is None and next(b, None) is None  # as a for loop ends
        assert torch.equal(_state(torchs), _state(ours))


@pytest.mark.parametrize("rows,batch_size", [(10, 4), (12, 4)])
def test_batches_skipped_without_building_them_draw_what_the_epoch_drew(rows, batch_size):
    from recrunner.training.distributed.iteration import skip_batches

    torchs, ours = _pair(rows, batch_size, True)
    a, b = iter(torchs), iter(ours)
    skip_batches(a, 2)
    skip_batches(b, 2)
    assert torch.equal(_state(torchs), _state(ours))
    assert [x.tolist() for x in a] == [y.tolist() for y in b]
    assert torch.equal(_state(torchs), _state(ours))


def test_the_order_is_a_permutation_cut_in_batches():
    order = EpochOrder(10, 4, torch.Generator().manual_seed(1))
    batches = list(order)
    assert [len(b) for b in batches] == [4, 4, 2] and len(order) == 3
    assert sorted(torch.cat(batches).tolist()) == list(range(10))
    assert [b.tolist() for b in EpochOrder(5, 2, None)] == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("kwargs", [{"drop_last": True}, {"num_workers": 1}])
def test_loaders_in_other_arrangements_are_left_as_they_are(kwargs):
    loader = _loader(10, 4, True, **kwargs)
    assert epoch_order(loader) is None and not rows_as_tensors(loader)
    assert loader.batch_sampler is not None


def test_a_sampler_of_its_own_is_left_as_it_is():
    loader = DataLoader(list(range(10)), batch_size=4, sampler=torch.utils.data.RandomSampler(range(10), replacement=True))
    assert not rows_as_tensors(loader)
    generatorless = DataLoader(list(range(10)), batch_size=4, shuffle=True)  # draws a seed from the global RNG
    assert not rows_as_tensors(generatorless)
