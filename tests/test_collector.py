"""seams/collector.py: collected parts concatenated once, top-k hits built per group of batches;
RecBole's tensors exactly."""

import copy

import pytest
import torch

from recrunner.seams import collector as seam
from recrunner.seams.collector import ConcatenatedOnRead, collect_once
from tests.conftest import TINY_BPR


def test_collected_parts_are_concatenated_once_into_recbole_s_tensors():
    from recbole.evaluator.collector import DataStruct

    parts = [torch.arange(i * 3, i * 3 + 6, dtype=torch.int32).view(2, 3) for i in range(5)]
    recbole, ours = DataStruct(), ConcatenatedOnRead()
    for struct in (recbole, ours):
        struct.set("data.num_items", 7)
        for part in parts:
            struct.update_tensor("rec.topk", part)
    assert ours._parts["rec.topk"][0] is not parts[0]  # kept as copies, as RecBole's are
    assert "rec.topk" in ours and torch.equal(ours["rec.topk"], recbole["rec.topk"]) and not ours._parts
    ours.update_tensor("rec.topk", parts[0])  # after a read: appended to what was read
    recbole.update_tensor("rec.topk", parts[0])
    assert torch.equal(copy.deepcopy(ours)["rec.topk"], recbole["rec.topk"])
    del ours["rec.topk"]
    assert "rec.topk" not in ours and ours.get("data.num_items") == 7
    with pytest.raises(ValueError, match="data.num_items is not a tensor"):
        ours.update_tensor("data.num_items", parts[0])


def test_a_trainer_s_collector_concatenates_once_and_gives_recbole_s_struct(workspace):
    from recbole.evaluator.collector import Collector, DataStruct

    from tests.conftest import trainer_and_data

    trainer, *_ = trainer_and_data(workspace, "BPR", TINY_BPR)
    assert isinstance(trainer.eval_collector.data_struct, ConcatenatedOnRead)
    plain = Collector(trainer.config)
    assert type(plain.data_struct) is DataStruct
    collect_once(plain)
    collect_once(plain)  # once is enough; twice changes nothing
    scores = torch.rand(4, 20, generator=torch.Generator().manual_seed(0))
    plain.eval_batch_collect(scores, None, torch.tensor([0, 1, 3]), torch.tensor([2, 5, 8]))
    plain.eval_batch_collect(scores[:2], None, torch.tensor([1]), torch.tensor([4]))
    recbole = Collector(trainer.config)
    recbole.eval_batch_collect(scores, None, torch.tensor([0, 1, 3]), torch.tensor([2, 5, 8]))
    recbole.eval_batch_collect(scores[:2], None, torch.tensor([1]), torch.tensor([4]))
    got, expected = plain.get_data_struct(), recbole.get_data_struct()
    assert torch.equal(got["rec.topk"], expected["rec.topk"]) and got["rec.topk"].shape == (6, 11) and got["rec.topk"].sum() > 0
    assert "rec.topk" not in plain.data_struct  # reset for the next evaluation, as RecBole's


def _config(workspace, **params):
    from recrunner import Experiment, prepare

    return prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, **params}), workspace).config


def _batches(seed=0, items=40, batches=30):
    """(scores, positive_u, positive_i) of one-to-three-user batches, with many tied scores."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(batches):
        users = int(torch.randint(1, 4, (1,), generator=generator))
        scores = torch.randint(0, 5, (users, items), generator=generator).float()  # ties everywhere
        scores[:, 0] = -torch.inf
        count = int(torch.randint(1, 3 * users + 1, (1,), generator=generator))
        positive_u = torch.sort(torch.randint(0, users, (count,), generator=generator)).values
        yield scores, positive_u, torch.randint(1, items, (count,), generator=generator)


@pytest.mark.parametrize("metrics", [["Recall", "NDCG", "MRR", "Hit", "Precision"], ["NDCG", "ItemCoverage"],
                                     ["Recall", "GAUC"]])
@pytest.mark.parametrize("group_rows", [4096, 5])  # one group; a group every few batches
def test_top_k_hits_built_in_groups_are_recbole_s(workspace, monkeypatch, metrics, group_rows):
    from recbole.evaluator.collector import Collector

    monkeypatch.setattr(seam, "GROUP_ROWS", group_rows)
    config = _config(workspace, metrics=metrics, topk=[5, 10], valid_metric=f"{metrics[0]}@10")
    recbole, ours = Collector(config), Collector(config)
    collect_once(ours)
    for scores, positive_u, positive_i in _batches():  # the scores where the run's model is, the positives on the host
        scores = scores.to(config["device"])
        recbole.eval_batch_collect(scores, None, positive_u, positive_i)
        ours.eval_batch_collect(scores.clone(), None, positive_u, positive_i)
    expected, got = recbole.get_data_struct(), ours.get_data_struct()
    names = [name for name in ("rec.topk", "rec.items", "rec.meanrank") if name in expected]
    assert names and all(name in got for name in names)
    for name in names:
        assert got[name].dtype == expected[name].dtype and torch.equal(got[name], expected[name]), name
    assert not ours.eval_batch_collect.group and "rec.topk" not in ours.data_struct  # nothing left for the next


def test_a_validation_of_one_user_a_batch_has_recbole_s_hits_and_metrics(workspace):
    from recbole.evaluator.collector import Collector
    from recbole.utils import get_model, init_seed

    from recrunner import Experiment, prepare
    from recrunner.data.cache import load_data
    from recrunner.training.loop.evaluation import split_when_out_of_memory

    prepared = prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "eval_batch_size": 1683}), workspace)
    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    train, valid, _ = load_data(config, workspace.cache_dir)
    trainer = prepared.trainer_class(config, get_model("BPR")(config, train._dataset).to(config["device"]))
    trainer.eval_collector.data_collect(train)
    hits, evaluate = [], trainer.evaluator.evaluate
    trainer.evaluator.evaluate = lambda struct: hits.append(struct.get("rec.topk")) or evaluate(struct)
    ours = trainer.evaluate(valid, load_best_model=False)
    trainer.eval_collector = Collector(config)  # RecBole's, batch by batch
    trainer.eval_collector.data_collect(train)
    split_when_out_of_memory(trainer)
    assert len(valid) > 400 and dict(trainer.evaluate(valid, load_best_model=False)) == dict(ours)
    assert torch.equal(hits[0], hits[1]) and len(hits[0]) == len(valid)


def test_positives_on_the_host_are_counted_against_top_k_on_the_device(workspace):
    """What a GPU run met: RecBole's loaders give each batch's positives on the host while its scores are
    on the GPU (RecBole indexes the scores' matrix with them); the group's hits are built on the scores'
    device, with RecBole's values."""
    from recbole.evaluator.collector import Collector

    from tests.conftest import Unmixable

    config = _config(workspace, metrics=["Recall", "NDCG"], topk=[5, 10], valid_metric="Recall@10")
    recbole, ours = Collector(config), Collector(config)
    collect_once(ours)
    for scores, positive_u, positive_i in _batches():
        recbole.eval_batch_collect(scores, None, positive_u, positive_i)
        ours.eval_batch_collect(scores.clone(), None, positive_u.as_subclass(Unmixable),
                                positive_i.as_subclass(Unmixable))
    got, expected = ours.get_data_struct()["rec.topk"], recbole.get_data_struct()["rec.topk"]
    assert type(got) is torch.Tensor and torch.equal(got, expected)
