"""Fast mode's training negatives drawn by torch (recrunner.seams.negatives, training/fast/data.py): RecBole's
distribution, never a used item, numpy's RNG left alone, a resumed run drawing what the uninterrupted one drew."""

import json
import types

import numpy as np
import pytest
import torch
from scipy import stats

from recrunner import Experiment, run_experiment
from recrunner.core.errors import ConfigError
from recrunner.seams.negatives import (NO_NEGATIVES, PopularItems, TorchNegatives, UnusedItems, draw_with_torch,
                                       popularity_weights, torch_negatives_for)
from recrunner.training.fast.data import negatives_choice, training_draws
from recrunner.training.fast.plan import choose

from .conftest import TINY_BPR


# ---------------------------------------------------------------- the draw
USED = [set(), {1}, {9}, {1, 2, 3}, {2, 4, 6, 8}, set(range(1, 9)), {0, 5, 10, 12}]  # 0 and >= item_num: not items


def test_each_rank_is_that_unused_item_of_its_key():
    unused = UnusedItems(np.array(USED, dtype=object), item_num=10, device="cpu")
    for key, used in enumerate(USED):
        expected = [item for item in range(1, 10) if item not in used]
        assert int(unused.unused[key]) == len(expected)
        ranks = torch.arange(len(expected))
        items = unused.item(torch.full_like(ranks, key), ranks)
        assert items.tolist() == expected  # every rank, in order: none skipped, none used, none out of [1, 10)


def _sampler(used, item_num, kind="Sampler"):
    return type(kind, (), {"used_ids": np.array(used, dtype=object), "item_num": item_num})()


def test_negatives_are_uniform_over_each_users_unused_items():
    torch.manual_seed(0)
    used = [{1, 2, 3, 50}, set(range(10, 60))]  # of items 1..59
    draws = TorchNegatives(_sampler(used, 60))(torch.tensor([0, 1]), torch.tensor([1, 10]), 30000)
    assert draws.shape == (60000,)
    for user in (0, 1):
        mine = draws[user::2]  # RecBole's order: every row's first negative, then every row's second, ...
        allowed = sorted(set(range(1, 60)) - used[user])
        counts = np.bincount(mine.numpy(), minlength=60)
        assert counts[sorted(used[user])].sum() == 0 and counts[0] == 0
        assert stats.chisquare(counts[allowed]).pvalue > 1e-4  # each unused item as likely


def test_a_repeatable_sampler_excludes_each_rows_own_item():
    torch.manual_seed(1)
    items = torch.tensor([1, 5, 9])
    draws = TorchNegatives(_sampler([], 10, "RepeatableSampler"))(torch.tensor([0, 0, 0]), items, 20000)
    for row, own in enumerate(items.tolist()):
        counts = np.bincount(draws[row::3].numpy(), minlength=10)
        assert counts[own] == 0 and counts[0] == 0
        assert stats.chisquare(counts[[i for i in range(1, 10) if i != own]]).pvalue > 1e-4


def test_the_unused_items_are_rebuilt_when_the_used_ones_change():
    sampler = _sampler([{1}], 4)
    negatives = TorchNegatives(sampler)
    assert set(negatives(torch.zeros(200, dtype=torch.long), torch.ones(200, dtype=torch.long), 1).tolist()) == {2, 3}
    sampler.used_ids = np.array([{3}], dtype=object)  # as RecBole's set_phase gives another phase's
    assert set(negatives(torch.zeros(200, dtype=torch.long), torch.ones(200, dtype=torch.long), 1).tolist()) == {1, 2}


# ---------------------------------------------------------------- popularity negatives
WEIGHTS = np.array([0, 5, 1, 0, 7, 2, 3, 1, 4, 6])  # item 0 (padding) and item 3 are never drawn


def test_each_rank_of_a_users_unused_weight_is_an_unused_item_as_often_as_its_weight():
    popular = PopularItems(WEIGHTS, np.array(USED, dtype=object), device="cpu")
    for key, used in enumerate(USED):
        unused = [item for item in range(1, 10) if item not in used]
        assert int(popular.unused[key]) == WEIGHTS[unused].sum()
        ranks = torch.arange(int(popular.unused[key]))
        items = popular.item(torch.full_like(ranks, key), ranks)
        expected = [item for item in unused for _ in range(WEIGHTS[item])]  # every rank, in order
        assert items.tolist() == expected, key


def test_a_repeatable_samplers_popular_items_are_any_but_the_rows_own():
    popular = PopularItems(WEIGHTS, np.array([], dtype=object), device="cpu")
    for own in range(10):
        ranks = torch.arange(int(popular.not_own(torch.tensor(own))))
        items = popular.other_than(torch.full_like(ranks, own), ranks)
        assert items.tolist() == [item for item in range(10) if item != own for _ in range(WEIGHTS[item])], own


def test_popularity_weights_are_recboles_alias_table_distribution():
    from recbole.sampler.sampler import AbstractSampler

    class Candidates(AbstractSampler):
        def __init__(self, candidates, alpha):
            self.candidates, self.alpha, self.item_num = candidates, alpha, 12

        def _get_candidates_list(self):
            return list(self.candidates)

    rng = np.random.default_rng(0)
    for alpha in (1.0, 0.5, 0.0):
        sampler = Candidates(rng.zipf(1.5, 4000) % 11 + 1, alpha)  # items 1..11, a long tail; none of 0
        sampler._build_alias_table()  # RecBole's: prob and alias per item, as _pop_sampling reads them
        recbole = np.zeros(12)
        for item, prob in sampler.prob.items():
            recbole[item] += prob
            if sampler.alias[item] != -1:
                recbole[sampler.alias[item]] += 1 - prob
        recbole /= len(sampler.prob)
        weights = popularity_weights(sampler, keys=943)
        assert weights[0] == 0 and (weights[1:] > 0).all()
        assert weights / weights.sum() == pytest.approx(recbole, abs=1e-9), alpha


def test_popularity_negatives_follow_the_weights_over_each_users_unused_items():
    torch.manual_seed(2)
    used = [{1, 2, 3}, set(range(5, 12))]
    candidates = [item for item in range(1, 12) for _ in range(item)]  # item i seen i times
    sampler = type("Sampler", (), {"used_ids": np.array(used, dtype=object), "item_num": 12, "alpha": 1.0,
                                   "distribution": "popularity", "_get_candidates_list": lambda self: candidates})()
    draws = TorchNegatives(sampler)(torch.tensor([0, 1]), torch.tensor([1, 5]), 40000)
    for user in (0, 1):
        counts = np.bincount(draws[user::2].numpy(), minlength=12)
        allowed = sorted(set(range(1, 12)) - used[user])
        assert counts[sorted(used[user])].sum() == 0 and counts[0] == 0
        expected = np.array(allowed, dtype=float) / sum(allowed) * counts.sum()
        assert stats.chisquare(counts[allowed], expected).pvalue > 1e-4


# ---------------------------------------------------------------- decisions (pure)
def test_who_draws_the_negatives():
    assert negatives_choice("auto", "cpu", "uniform") == ("numpy", "")  # RecBole's sampler costs less on a CPU
    where, why = negatives_choice("auto", "cuda", "uniform")
    assert where == "torch" and "not exact mode's negatives" in why and "fast_negatives: numpy" in why
    assert negatives_choice("torch", "cpu", "uniform")[0] == "torch"
    assert negatives_choice("numpy", "cuda", "uniform") == ("numpy", "")
    assert negatives_choice("auto", "cuda", "") == ("numpy", "")  # nothing drawn before the model sees a batch
    where, why = negatives_choice("torch", "cuda", "popularity")
    assert where == "torch" and "RecBole's popularity distribution" in why
    where, why = negatives_choice("torch", "cuda", "inverse")  # no such distribution in RecBole 1.2.1 yet
    assert where == "numpy" and "inverse negatives are drawn by RecBole's sampler" in why
    with pytest.raises(ConfigError, match="fast_negatives must be one of auto, numpy, torch"):
        negatives_choice("gpu", "cuda", "uniform")


def test_the_plan_draws_them_apart_from_what_it_does_to_the_model():
    gpu = choose(device_type="cuda", native_bf16=True, model="BPR", drawn="uniform")
    assert gpu.negatives == "torch" and gpu.settings() == "bf16, compiled, negatives drawn by torch, fused optimizer step"
    cpu = choose(model="BPR", drawn="uniform")  # its CPU fact: exact; numpy's negatives under auto
    assert cpu.changes_nothing and cpu.negatives == "numpy"
    asked = choose(model="BPR", drawn="uniform", negatives="torch")
    assert asked.model_unchanged and not asked.changes_nothing and asked.settings() == "fp32, eager, negatives drawn by torch"
    assert "BPR runs exactly on cpu" in asked.reason and "training negatives drawn by torch on cpu" in asked.reason
    assert choose(device_type="cuda", model="SASRec", drawn="").negatives == "numpy"  # cross-entropy: none drawn
    assert choose(device_type="cuda", model="Pop", single_pass=True, drawn="uniform").negatives == "numpy"


def test_a_bad_fast_negatives_is_refused_before_a_run(workspace):
    with pytest.raises(ConfigError, match="fast_negatives 'gpu' is not a generator of negatives; choose one of auto"):
        run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "fast": True, "fast_negatives": "gpu"}),
                       workspace, console=False)


def test_a_configs_training_draws():
    config = {"train_neg_sample_args": {"distribution": "uniform", "sample_num": 1, "dynamic": False}}
    assert training_draws(config) == "uniform"
    assert training_draws({"train_neg_sample_args": {"distribution": "none", "sample_num": "none"}}) == ""
    assert training_draws({"train_neg_sample_args": {"distribution": "uniform", "sample_num": 1, "dynamic": True}}) == ""
    assert training_draws({"train_neg_sample_args": None}) == ""


def test_only_a_training_loaders_uniform_and_popularity_negatives_are_drawn_by_torch():
    def loader(kind, sampler, distribution="uniform"):
        args = {"distribution": distribution, "sample_num": 1, "dynamic": False}
        return type(kind, (), {"_sampler": sampler, "neg_sample_args": args})()

    uniform = types.SimpleNamespace(distribution="uniform")
    assert torch_negatives_for(loader("TrainDataLoader", type("Sampler", (), {"distribution": "uniform"})())) == ""
    assert "no training negatives" in torch_negatives_for(loader("FullSortEvalDataLoader", uniform))
    popular = type("Sampler", (), {"distribution": "popularity"})()
    assert torch_negatives_for(loader("TrainDataLoader", popular, "popularity")) == ""
    other = type("Sampler", (), {"distribution": "inverse"})()
    assert "inverse negatives are drawn by RecBole's sampler" in torch_negatives_for(loader("TrainDataLoader", other, "inverse"))
    assert "SeqSampler draws them" in torch_negatives_for(loader("TrainDataLoader", type("SeqSampler", (), {})()))
    kept = loader("TrainDataLoader", type("Sampler", (), {"distribution": "uniform"})())
    assert draw_with_torch(kept, gathered=False) == "its batches are built by RecBole's collate"
    assert "torch_negatives" not in kept.__dict__
    assert draw_with_torch(kept) == "" and isinstance(kept.torch_negatives, TorchNegatives)
    eval_loader = loader("FullSortEvalDataLoader", uniform)
    assert draw_with_torch(eval_loader, gathered=False) == NO_NEGATIVES  # nothing to say where none are drawn


# ---------------------------------------------------------------- runs
def _device_type(run) -> str:
    return torch.device(run.device["device"]).type  # cpu, or cuda where the tests run on a GPU machine


def test_a_fast_run_draws_its_negatives_with_torch_and_leaves_numpys_rng_alone(workspace):
    params = {**TINY_BPR, "epochs": 1}
    exact = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    only_negatives = {"fast": True, "fast_negatives": "torch", "fast_precision": "fp32", "fast_compile": False}  # on a GPU too
    fast = run_experiment(Experiment("BPR", "ml-100k", {**params, **only_negatives}), workspace, console=False)
    log = (fast.run_dir / "run.log").read_text()
    assert "fast mode: fp32, eager, negatives drawn by torch (" in log
    assert f"training negatives drawn by torch on {_device_type(fast)}" in log
    record = json.loads((fast.run_dir / "metrics.json").read_text())
    assert record["provenance"]["fast"]["negatives"] == "torch"
    assert fast.test != exact.test  # other negatives, another model

    from recbole.utils import init_seed

    from recrunner.data.cache import load_data
    from recrunner.run.preparation import prepare

    config = prepare(Experiment("BPR", "ml-100k", params), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    train, _, _ = load_data(config, None, torch_negatives=True)
    before = np.random.get_state()[1].copy()
    batches = [(batch["user_id"], batch["neg_item_id"]) for batch in train]
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's generator never drew
    used = train._sampler.used_ids
    assert not any(int(item) in used[int(user)] for users, items in batches for user, item in zip(users, items))


def test_a_fast_run_draws_popularity_negatives_with_torch(workspace):
    negatives = {"distribution": "popularity", "sample_num": 1, "alpha": 1.0, "dynamic": False}
    params = {**TINY_BPR, "epochs": 1, "train_neg_sample_args": negatives}
    fast = run_experiment(Experiment("BPR", "ml-100k", {**params, "fast": True, "fast_negatives": "torch"}),
                          workspace, console=False)
    assert fast.status == "ok", fast.error
    assert f"training negatives drawn by torch on {_device_type(fast)}: RecBole's popularity distribution" in \
        (fast.run_dir / "run.log").read_text()

    from recbole.utils import init_seed

    from recrunner.data.cache import load_data
    from recrunner.run.preparation import prepare

    config = prepare(Experiment("BPR", "ml-100k", params), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    train, _, _ = load_data(config, None, torch_negatives=True)
    before = np.random.get_state()[1].copy()
    batches = [(batch["user_id"], batch["neg_item_id"]) for _ in range(3) for batch in train]  # 3 epochs
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's generator never drew
    used = train._sampler.used_ids
    assert not any(int(item) in used[int(user)] for users, items in batches for user, item in zip(users, items))
    drawn = np.bincount(torch.cat([items for _, items in batches]).numpy(), minlength=train._sampler.item_num)
    seen = np.bincount(train._sampler._get_candidates_list(), minlength=train._sampler.item_num)
    assert stats.spearmanr(drawn[1:], seen[1:]).statistic > 0.9  # the popular items drawn most


def test_a_knowledge_graph_loader_draws_its_user_item_negatives_with_torch(workspace, caplog):
    from recrunner.data.cache import load_data
    from recrunner.run.preparation import prepare

    config = prepare(Experiment("CKE", "ml-100k", {"embedding_size": 8, "kg_embedding_size": 8}), workspace).config
    with caplog.at_level("INFO", logger="recrunner"):
        train, _, _ = load_data(config, None, torch_negatives=True)
    assert isinstance(train.general_dataloader.torch_negatives, TorchNegatives)
    assert "torch_negatives" not in train.kg_dataloader.__dict__  # its triples: RecBole's own sampling
    assert "after all" not in caplog.text
    batch = next(iter(train.general_dataloader))
    used = train.general_dataloader._sampler.used_ids
    assert not any(int(item) in used[int(user)] for user, item in zip(batch["user_id"], batch["neg_item_id"]))
