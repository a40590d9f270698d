"""seams/samplers.py and seams/loaders.py: RecBole's negatives, checked as arrays, identical draw for draw."""

import copy

import numpy as np
import pytest
import torch

from recrunner import Experiment, prepare
from recrunner.seams.loaders import vectorise_loaders
from recrunner.seams.samplers import UsedPairs, vectorise
from tests.conftest import TINY_BPR, TINY_SASREC


@pytest.mark.parametrize("limit", [2**31, 0])  # a bitmap; sorted codes (a dataset too large for one)
def test_used_pairs_say_what_python_sets_say(limit):
    rng = np.random.default_rng(0)
    used = np.array([set(rng.integers(0, 30, rng.integers(0, 8)).tolist()) for _ in range(50)], dtype=object)
    pairs = UsedPairs(used, limit=limit)
    assert (pairs.bitmap is None) == (limit == 0)
    keys = rng.integers(0, 50, 5000)
    values = rng.integers(-2, 40, 5000)  # below 0 and beyond every used value: never used
    expected = np.array([v in used[k] for k, v in zip(keys, values)])
    assert (pairs.contains(keys, values) == expected).all()
    empty = UsedPairs(np.array([set(), set()], dtype=object), limit=limit)
    assert not empty.contains(np.array([0, 1]), np.array([1, 2])).any()


def _loaders(workspace, model, params):
    from recbole.data import create_dataset, data_preparation

    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    return data_preparation(config, create_dataset(config))  # RecBole's, without the seam


def _same_draws(original, fast, key_ids, num, seed):
    np.random.seed(seed)
    expected = original.sample_by_key_ids(key_ids, num)
    expected_state = np.random.get_state()[1].copy()
    np.random.seed(seed)
    got = fast.sample_by_key_ids(key_ids, num)
    assert torch.equal(got, expected)
    assert (np.random.get_state()[1] == expected_state).all()  # numpy's RNG moved exactly as in RecBole


@pytest.mark.parametrize("distribution", ["uniform", "popularity"])
def test_the_train_sampler_draws_recbole_s_negatives(workspace, distribution):
    train, _, _ = _loaders(workspace, "BPR", TINY_BPR)
    original = train._sampler
    original.set_distribution(distribution)
    fast = copy.copy(original)
    vectorise(fast)
    users = train._dataset.inter_feat["user_id"].numpy()
    rng = np.random.default_rng(1)
    for seed, num in [(0, 1), (1, 3), (2, 1)]:
        _same_draws(original, fast, rng.choice(users, 700), num, seed)
    _same_draws(original, fast, np.full(50, users[0]), 2, 3)  # one user: RecBole's own array path
    with pytest.raises(ValueError, match="not exist"):
        fast.sample_by_user_ids(np.array([1, 10**6]), np.array([1, 1]), 1)


def test_a_repeatable_sampler_rebuilds_its_codes_per_call(workspace):
    from recbole.sampler import RepeatableSampler

    train, _, _ = _loaders(workspace, "BPR", TINY_BPR)
    original = RepeatableSampler(["train"], train._dataset).set_phase("train")
    fast = copy.copy(original)
    vectorise(fast)
    users = train._dataset.inter_feat["user_id"].numpy()[:300]
    for seed, items in enumerate([train._dataset.inter_feat["item_id"].numpy()[:300], np.arange(1, 301)]):
        np.random.seed(seed)
        expected = original.sample_by_user_ids(users, items, 2)
        np.random.seed(seed)
        assert torch.equal(fast.sample_by_user_ids(users, items, 2), expected)


@pytest.mark.parametrize("model, params", [
    ("BPR", {**TINY_BPR, "train_neg_sample_args": {"uniform": 2}}),          # pairwise negatives
    ("NeuMF", {"user_inter_num_interval": "[10,60]"}),                       # pointwise negatives, labels
    ("DeepFM", {"user_inter_num_interval": "[10,60]", "embedding_size": 8}),  # user and item features joined
    ("SASRec", {**TINY_SASREC, "loss_type": "BPR", "train_neg_sample_args": {"uniform": 1}}),  # histories
])
def test_a_whole_epoch_of_batches_is_recbole_s(workspace, model, params):
    from recbole.utils import init_seed

    def epoch(vectorised):
        init_seed(2020, True)  # the split shuffles too
        train, valid, test = _loaders(workspace, model, params)
        if vectorised:
            vectorise_loaders([train, valid, test])
            assert train.collate_fn.__qualname__.startswith("gather_batches.")  # the batches are gathered
        init_seed(2020, True)
        batches = [batch.interaction for batch in train]
        return batches, np.random.get_state()[1].copy()

    (expected, expected_rng), (got, got_rng) = epoch(False), epoch(True)
    assert len(got) == len(expected) > 1
    for a, b in zip(expected, got):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    assert (got_rng == expected_rng).all()


def test_windowed_histories_keep_recbole_s_collate():
    from recbole.data.interaction import Interaction

    from recrunner.data.augmentation import WindowedColumns
    from recrunner.seams import batch_tables as tables

    windowed = Interaction({"item_id": torch.arange(3)})
    windowed.interaction = WindowedColumns({}, torch.arange(3), None, {})
    assert not tables._plain(windowed) and tables._plain(Interaction({"item_id": torch.arange(3)}))
