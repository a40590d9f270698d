"""seams/replay.py: a validation's batches built once and replayed, RecBole's batches and generator
states exactly."""

import copy
import logging

import pytest
import torch

from recrunner import Experiment, prepare
from recrunner.data import placement
from recrunner.data.cache import load_data
from recrunner.seams import replay
from tests.conftest import TINY_BPR, TINY_SASREC


def _loaders(workspace, model, params):
    from recbole.utils import init_seed

    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    return load_data(config, workspace.cache_dir)


def _counting(loader) -> list:
    """Count the batches `loader`'s collate builds (torch's iterator reads the collate when it starts)."""
    built, collate = [], loader.collate_fn

    def counted(index):
        built.append(1)
        return collate(index)

    loader.collate_fn = counted
    return built


def _flat(batch) -> list:
    """Every tensor of an evaluation batch, in order, on the host."""
    if isinstance(batch, torch.Tensor):
        return [batch.cpu()]
    if isinstance(batch, (tuple, list)):
        return [t for part in batch for t in _flat(part)]
    if batch is None:
        return [None]
    return [t for key in sorted(batch.interaction) for t in [key, *_flat(batch.interaction[key])]]


def _equal(a, b) -> bool:
    flat_a, flat_b = _flat(a), _flat(b)
    return len(flat_a) == len(flat_b) and all(
        x == y if not isinstance(x, torch.Tensor) else (x.dtype == y.dtype and torch.equal(x, y))
        for x, y in zip(flat_a, flat_b))


@pytest.mark.parametrize("model, params", [
    ("BPR", {**TINY_BPR, "eval_batch_size": 1683}),  # a general model's full sort: one user a batch
    ("SASRec", {**TINY_SASREC, "eval_batch_size": 64}),  # a sequential model's: rows of the interactions
])
def test_a_validation_s_batches_are_built_once_and_replayed_as_built(workspace, model, params):
    valid = _loaders(workspace, model, params)[1]
    assert isinstance(vars(valid).get("_get_iterator"), replay.Replay)
    built = _counting(valid)
    generator = copy.deepcopy(valid.generator)  # what RecBole's loader draws from, as checkpoints save it
    passes = [list(valid) for _ in range(3)]
    assert len(built) == len(valid) > 1  # the first pass built each batch once; the others none
    del valid._get_iterator
    fresh = list(valid)  # torch's own iterator: built anew
    for one_pass in passes:
        assert len(one_pass) == len(fresh) and all(_equal(a, b) for a, b in zip(one_pass, fresh))
    for _ in range(4):  # three passes and the fresh one: torch's iterator draws once from the generator each
        torch.empty((), dtype=torch.int64).random_(generator=generator)
    assert torch.equal(valid.generator.get_state(), generator.get_state())


def test_batches_past_the_limit_are_built_at_every_validation_with_one_line(workspace, caplog):
    valid = _loaders(workspace, "BPR", {**TINY_BPR, "eval_batch_size": 1683})[1]
    assert replay.replay_batches(valid, limit=1000)  # a few batches' worth of bytes
    built = _counting(valid)
    with caplog.at_level(logging.INFO, logger="recrunner"):
        first, second = list(valid), list(valid)
    assert len(first) == len(second) == len(valid) and len(built) == 2 * len(valid)
    assert all(_equal(a, b) for a, b in zip(first, second))
    assert [r.getMessage() for r in caplog.records].count(
        "evaluation: its batches take more than 0 MiB; each validation builds them again (the metrics are the same)") == 1


def test_only_loaders_that_draw_nothing_are_replayed(workspace):
    train, valid, test = _loaders(workspace, "BPR", {**TINY_BPR, "eval_args": {"mode": "uni100"}})
    assert not replay.replayable(train)  # shuffled, negatives
    assert not replay.replayable(valid) and "_get_iterator" not in vars(valid)  # sampled negatives each time
    full = _loaders(workspace, "BPR", TINY_BPR)
    assert replay.replayable(full[2]) and "_get_iterator" not in vars(full[2])  # the test set is scored once
    full[1].transform = object()  # a transform of RecBole's other than the identity may draw
    assert not replay.replayable(full[1])


def test_a_batch_s_bytes_count_every_tensor():
    from recbole.data.interaction import Interaction

    batch = (Interaction({"user_id": torch.zeros(3, dtype=torch.int64)}), (torch.zeros(2), torch.zeros(2)), None,
             torch.zeros(5, dtype=torch.int32))
    assert replay.batch_bytes(batch) == 3 * 8 + 2 * 4 * 2 + 5 * 4


def test_the_replay_limit_is_a_gigabyte_and_a_small_share_of_a_gpu_s_free_memory():
    assert placement.replay_limit(None) == 2**30  # a CPU
    assert placement.replay_limit(139 * 2**30) == 2**30
    assert placement.replay_limit(8 * 2**30) == int(0.05 * 8 * 2**30)
