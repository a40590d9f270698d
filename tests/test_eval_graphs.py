"""loop/eval_graphs.py: a validation's one-user batches scored in groups from one recorded graph, the same
top k per user as RecBole's loop. CI has no GPU: the recording is stood in by a function that runs the
recorded work again at each replay and writes over one output, as a replayed graph does."""

import logging

import numpy as np
import pytest
import torch

from recrunner import Experiment, prepare
from recrunner.core.errors import ConfigError
from recrunner.data.cache import load_data
from recrunner.seams.models import model_class
from recrunner.training.loop import eval_graphs
from recrunner.training.loop.eval_graphs import refusal, tried
from recrunner.training.loop.eval_groups import Group, padded_positions, plan, regrouped
from tests.conftest import TINY_BPR


def test_a_run_of_batches_of_one_shape_is_graphed_after_its_first_batch_in_spans_of_slots():
    a, b = ("a",), ("b",)
    assert plan([a] * 10, slots=4, least=5) == [(1, 5), (5, 9), (9, 10)]
    assert plan([a] * 10 + [b], slots=4, least=5) == [(1, 5), (5, 9), (9, 10)]  # the odd last batch: RecBole's
    assert plan([a] * 4 + [b] * 6, slots=8, least=5) == [(5, 10)]  # a run shorter than `least`: RecBole's
    assert plan([None] * 10, slots=4, least=2) == []  # batches that cannot be graphed
    assert plan([], slots=4, least=2) == []
    batches = list(range(11))
    items = list(regrouped(batches, [(1, 5), (5, 9), (9, 10)]))
    assert items == [0, Group([1, 2, 3, 4]), Group([5, 6, 7, 8]), Group([9]), 10]


def test_histories_are_padded_row_by_row():
    where = padded_positions(np.array([2, 0, 3]), width=4)
    assert where.tolist() == [0, 1, 8, 9, 10]


def test_what_refuses_a_graphed_validation_is_one_line_each():
    ok = dict(device_type="cuda", model="BPR", processes=False, collects_topk=True, host=[])
    assert refusal(**ok) is None
    assert "CUDA device" in refusal(**{**ok, "device_type": "cpu"})
    assert "data-parallel" in refusal(**{**ok, "processes": True})
    assert "AUC" in refusal(**{**ok, "collects_topk": False})
    assert ".cpu(" in refusal(**{**ok, "host": [".cpu("]})
    assert tried(True) and not tried("auto") and not tried(False)
    with pytest.raises(ConfigError, match="cuda_graph_eval"):
        tried("yes")


@pytest.mark.parametrize("model, host", [("BPR", []), ("LightGCN", []), ("NeuMF", []), ("EASE", [".cpu(", ".numpy("]),
                                         ("ItemKNN", [".cpu(", ".numpy("]), ("Random", ["torch.rand"])])
def test_a_model_s_scoring_is_read_for_host_work_and_draws(model, host):
    found = eval_graphs.host_scoring(model_class(model))
    assert all(any(part in name for name in found) for part in host) and bool(found) == bool(host)


def _trainer(workspace, model, params):
    from recbole.utils import init_seed

    prepared = prepare(Experiment(model, "ml-100k", {**params, "cuda_graph_eval": True}), workspace)
    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    train, valid, _ = load_data(config, workspace.cache_dir)  # the validation's batches replayed (seams/replay.py)
    init_seed(config["seed"], config["reproducibility"])
    trainer = prepared.trainer_class(config, model_class(model)(config, train._dataset).to(config["device"]))
    trainer.eval_collector.data_collect(train)
    trainer.epoch = 0
    trainer._train_epoch(train, 0)
    return trainer, valid


def _top_k_hits(trainer, valid) -> tuple[dict, torch.Tensor]:
    kept, evaluate = [], trainer.evaluator.evaluate
    trainer.evaluator.evaluate = lambda struct: kept.append(struct.get("rec.topk").clone()) or evaluate(struct)
    try:
        _, result = trainer._valid_epoch(valid)
    finally:
        del trainer.evaluator.evaluate
    return result, kept[0]


CASES = [
    ("BPR", {**TINY_BPR, "eval_batch_size": 1683}),  # one user a batch, as RecBole's default on ml-1m
    ("BPR", {**TINY_BPR, "eval_batch_size": 1683 * 2}),  # two a batch, the last batch one: RecBole's
    ("LightGCN", {"embedding_size": 8, "n_layers": 1, "user_inter_num_interval": "[10,60]", "epochs": 1,
                  "eval_batch_size": 1683}),  # its propagated embeddings cached at the validation's first batch
]


def _compare_with_recbole_s_loop(workspace, caplog, model, params) -> None:
    """Three validations (the first builds the batches, then all three score them in groups) against RecBole's
    loop batch by batch on the same weights: the same metrics and top-k hit matrix, element for element."""
    trainer, valid = _trainer(workspace, model, params)
    assert isinstance(trainer.eval_graphs, eval_graphs.GroupScoring)
    graphed = trainer.eval_graphs
    with caplog.at_level(logging.DEBUG, logger="recrunner"):
        runs = [_top_k_hits(trainer, valid) for _ in range(3)]
    recorded = [record for record in caplog.records if record.message.startswith("cuda_graph_eval: recorded")]
    assert [record.levelno for record in recorded] == [logging.INFO, logging.DEBUG, logging.DEBUG]  # anew each time
    trainer._full_sort_batch_eval, trainer.eval_graphs = graphed.inner, None  # RecBole's loop, batch by batch
    expected = _top_k_hits(trainer, valid)
    for result, hits in runs:
        assert result == expected[0] and hits.dtype == expected[1].dtype and torch.equal(hits, expected[1])


@pytest.mark.parametrize("model, params", CASES)
def test_a_validation_scored_in_groups_has_recbole_s_top_k_for_every_user(workspace, monkeypatch, caplog, model, params):
    replays = []

    def record(score):  # a CPU's stand-in for record_on_cuda: the output written over at each replay
        output = score()

        def replay():
            replays.append(1)
            output.copy_(score())
            return output
        return replay, output.clone()

    monkeypatch.setattr(eval_graphs, "trainer_refusal", lambda trainer: None)
    monkeypatch.setattr(eval_graphs, "record_on_cuda", record)
    _compare_with_recbole_s_loop(workspace, caplog, model, params)
    assert replays  # each validation's later groups were replays


@pytest.mark.skipif(not torch.cuda.is_available(), reason="records CUDA graphs (the GPU check runs it)")
@pytest.mark.parametrize("model, params", CASES)
def test_on_a_gpu_the_recorded_graph_gives_recbole_s_top_k_for_every_user(workspace, caplog, model, params):
    _compare_with_recbole_s_loop(workspace, caplog, model, params)


def test_a_scoring_that_cannot_be_recorded_runs_batch_by_batch_with_one_warning(workspace, monkeypatch, caplog):
    def refuses(score):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    monkeypatch.setattr(eval_graphs, "trainer_refusal", lambda trainer: None)
    monkeypatch.setattr(eval_graphs, "record_on_cuda", refuses)
    trainer, valid = _trainer(workspace, "BPR", {**TINY_BPR, "eval_batch_size": 1683})
    with caplog.at_level(logging.WARNING, logger="recrunner"):
        runs = [_top_k_hits(trainer, valid) for _ in range(3)]
    assert caplog.text.count("could not be recorded (RuntimeError: operation not permitted") == 1
    assert all(result == runs[0][0] and torch.equal(hits, runs[0][1]) for result, hits in runs)


def test_cuda_graph_eval_is_refused_on_a_cpu_with_one_warning(workspace, caplog):
    with caplog.at_level(logging.WARNING, logger="recrunner"):
        trainer, _ = _trainer(workspace, "BPR", {**TINY_BPR, "epochs": 1})
    assert trainer.eval_graphs is None and "cuda_graph_eval: CUDA graphs need a CUDA device" in caplog.text
