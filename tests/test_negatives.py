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
from recrunner.seams.negatives import NO_NEGATIVES, TorchNegatives, UnusedItems, draw_with_torch, torch_negatives_for
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


# ---------------------------------------------------------------- decisions (pure)
def test_who_draws_the_negatives():
    assert negatives_choice("auto", "cpu", "uniform") == ("numpy", "")  # RecBole's sampler costs less on a CPU
    where, why = negatives_choice("auto", "cuda", "uniform")
    assert where == "torch" and "not exact mode's negatives" in why and "fast_negatives: numpy" in why
    assert negatives_choice("torch", "cpu", "uniform")[0] == "torch"
    assert negatives_choice("numpy", "cuda", "uniform") == ("numpy", "")
    assert negatives_choice("auto", "cuda", "") == ("numpy", "")  # nothing drawn before the model sees a batch
    where, why = negatives_choice("torch", "cuda", "popularity")
    assert where == "numpy" and "popularity negatives are drawn by RecBole's sampler" in why
    with pytest.raises(ConfigError, match="fast_negatives must be one of auto, numpy, torch"):
        negatives_choice("gpu", "cuda", "uniform")


def test_the_plan_draws_them_apart_from_what_it_does_to_the_model():
    gpu = choose(device_type="cuda", native_bf16=True, model="BPR", drawn="uniform")
    assert gpu.negatives == "torch" and gpu.settings() == "bf16, compiled, negatives drawn by torch"
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


def test_only_a_training_loaders_uniform_negatives_are_drawn_by_torch():
    def loader(kind, sampler, distribution="uniform"):
        args = {"distribution": distribution, "sample_num": 1, "dynamic": False}
        return type(kind, (), {"_sampler": sampler, "neg_sample_args": args})()

    uniform = types.SimpleNamespace(distribution="uniform")
    assert torch_negatives_for(loader("TrainDataLoader", type("Sampler", (), {"distribution": "uniform"})())) == ""
    assert "no training negatives" in torch_negatives_for(loader("FullSortEvalDataLoader", uniform))
    popular = type("Sampler", (), {"distribution": "popularity"})()
    assert "popularity negatives" in torch_negatives_for(loader("TrainDataLoader", popular, "popularity"))
    assert "SeqSampler draws them" in torch_negatives_for(loader("TrainDataLoader", type("SeqSampler", (), {})()))
    kept = loader("TrainDataLoader", type("Sampler", (), {"distribution": "uniform"})())
    assert draw_with_torch(kept, gathered=False) == "its batches are built by RecBole's collate"
    assert "torch_negatives" not in kept.__dict__
    assert draw_with_torch(kept) == "" and isinstance(kept.torch_negatives, TorchNegatives)
    eval_loader = loader("FullSortEvalDataLoader", uniform)
    assert draw_with_torch(eval_loader, gathered=False) == NO_NEGATIVES  # nothing to say where none are drawn


# ---------------------------------------------------------------- runs
def test_a_fast_run_draws_its_negatives_with_torch_and_leaves_numpys_rng_alone(workspace):
    params = {**TINY_BPR, "epochs": 1}
    exact = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    fast = run_experiment(Experiment("BPR", "ml-100k", {**params, "fast": True, "fast_negatives": "torch"}),
                          workspace, console=False)
    log = (fast.run_dir / "run.log").read_text()
    assert "fast mode: fp32, eager, negatives drawn by torch (BPR runs exactly on cpu" in log
    assert "training negatives drawn by torch on cpu" in log
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
