"""The training step replayed from CUDA graphs (`cuda_graph_step`, recrunner.training.loop.graphs):
the same batches, dropout draws and weights as the eager step. CI has no GPU: the recording is
stood in for on a CPU by `rehearsed`, which runs make_graphed_callables' warm-up and recording
passes (they draw dropout and move running statistics) and returns the eager module; the last test
records real graphs where CUDA is present (bench/gpu_check.py's tests step)."""

import logging
import random

import pytest
import torch

from recrunner import Experiment, Workspace, run_experiment
from recrunner.training.callbacks.history import read_history
from recrunner.training.loop import graphs
from recrunner.core.errors import ConfigError
from recrunner.training.fast.plan import FastPlan
from recrunner.training.fast.source import host_random, set_in_loss
from recrunner.training.loop.graphs import (GraphedLoss, MAX_GRAPHS, graphed_loss, refusal,
                                            signature, tried)

from .conftest import TINY_SASREC


def rehearsed(step, args, allow_unused_input=False):
    """What torch.cuda.make_graphed_callables runs before it returns (3 warm-up passes with their
    gradients, then the recorded one), on a CPU: the module itself is what it returns."""
    params = tuple(p for p in step.parameters() if p.requires_grad)
    for _ in range(4):
        loss = step(*args)
        torch.autograd.grad(loss, params, allow_unused=allow_unused_input)
    return step


class Tiny(torch.nn.Module):
    """A model with dropout and batch norm, calculate_loss as RecBole's models have it."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.dropout = torch.nn.Dropout(0.3)

    def calculate_loss(self, interaction):
        return self.dropout(self.norm(self.embedding(interaction["item_id"]))).pow(2).mean()


def _train(loss_func, model, batches):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = loss_func(batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, {k: v.clone() for k, v in model.state_dict().items()}


def _batches(*sizes):
    from recbole.data.interaction import Interaction

    generator = torch.Generator().manual_seed(0)
    return [Interaction({"item_id": torch.randint(0, 20, (n,), generator=generator)}) for n in sizes]


# ---------------------------------------------------------------- decisions (pure)
def test_a_model_whose_loss_sets_attributes_in_python_is_found_from_its_source():
    from recbole.model.general_recommender import BPR, LightGCN
    from recbole.model.sequential_recommender import GRU4Rec, SASRec

    assert set_in_loss(LightGCN) == ["restore_item_e", "restore_user_e"]  # drops its cached embeddings
    assert set_in_loss(SASRec) == set_in_loss(GRU4Rec) == set_in_loss(BPR) == []
    assert set_in_loss(Tiny) == []


def test_what_the_loss_sets_in_the_methods_it_calls_on_self_is_found_too():
    from recbole.model.general_recommender import DiffRec, RaCT

    assert "update" in set_in_loss(RaCT)  # raised in calculate_actor_loss, which its loss calls
    assert {"Lt_count", "Lt_history"} <= set(set_in_loss(DiffRec))  # its step-sampling history, in update_Lt_history


def test_a_model_that_draws_from_pythons_or_numpys_generator_is_found_from_its_source():
    from recbole.model.general_recommender import BPR, LINE
    from recbole.model.sequential_recommender import FEARec, GRU4Rec, SASRec

    assert host_random(FEARec) == ["random.choice"]  # a same-target sequence, drawn in its loss
    assert host_random(LINE) == ["np.random.shuffle", "random.random"]  # which side it samples, each batch
    assert host_random(SASRec) == host_random(GRU4Rec) == host_random(BPR) == host_random(Tiny) == []


def test_the_step_is_graphed_only_where_it_stays_the_same_step():
    base = dict(device_type="cuda", model="SASRec", fast_graphs=False, amp=False, accumulation=1, processes=False,
                state_set=[])
    assert refusal(**base) is None
    assert refusal(**{**base, "device_type": "cpu"}) == "CUDA graphs need a CUDA device; SASRec trains eagerly on cpu"
    assert "fast_cuda_graphs replays the compiled loss already" in refusal(**{**base, "fast_graphs": True})
    assert "a gradient scaler (enable_scaler, fp16)" in refusal(**{**base, "amp": True})
    assert "gradient_accumulation_steps" in refusal(**{**base, "accumulation": 2})
    assert "data-parallel" in refusal(**{**base, "processes": True})
    assert refusal(**{**base, "model": "FEARec", "draws": ["random.choice"]}) == (
        "FEARec draws from Python's or numpy's generator in its source (random.choice), which a replayed graph would not "
        "draw again; the step runs eagerly")
    assert refusal(**{**base, "model": "LightGCN", "state_set": ["restore_item_e", "restore_user_e"]}) == (
        "LightGCN's loss sets self.restore_item_e, self.restore_user_e in Python, which a replayed graph would "
        "not; the step runs eagerly")


def test_auto_records_the_step_in_fast_mode_only():
    assert tried("auto", fast=True) and not tried("auto", fast=False)  # exact mode's step stays RecBole's
    assert tried(True, fast=False) and tried(True, fast=True)
    assert not tried(False, fast=True)
    with pytest.raises(ConfigError, match="cuda_graph_step must be auto, true or false, got 'yes'"):
        tried("yes", fast=True)


class _Jitter(torch.nn.Module):
    """A layer that draws from Python's generator in its forward: a replay would keep one draw."""

    def forward(self, x):
        return x * (1 + random.random())


def _trainer(asked, fast, device="cuda", model=None):
    from types import SimpleNamespace

    return SimpleNamespace(config={"cuda_graph_step": asked}, fast=fast, device=torch.device(device),
                           model=model or Tiny(), enable_amp=False, enable_scaler=False, grad_scaler=None,
                           accumulation_steps=1, world=None)


def test_what_a_run_says_where_its_step_is_not_recorded(caplog):
    compiled, exact_plan = FastPlan("bf16", compile=True), FastPlan()
    with caplog.at_level(logging.INFO, logger="recrunner"):
        assert graphed_loss(_trainer("auto", None)) is None  # exact mode: nothing tried, nothing said
        assert graphed_loss(_trainer("auto", exact_plan)) is None  # a fast plan that changes nothing is exact
        assert graphed_loss(_trainer("auto", compiled, device="cpu")) is None  # auto on a CPU: silent
        assert graphed_loss(_trainer("auto", FastPlan("bf16", compile=True, cuda_graphs=True))) is None
        assert graphed_loss(_trainer(True, None, device="cpu")) is None
        jittery = Tiny()
        jittery.jitter = _Jitter()  # a layer's draws count as the model's
        assert graphed_loss(_trainer("auto", compiled, model=jittery)) is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "cuda_graph_step (auto): fast_cuda_graphs replays the compiled loss already; the step is not "
                 "recorded twice"),
        ("WARNING", "cuda_graph_step: CUDA graphs need a CUDA device; Tiny trains eagerly on cpu"),
        ("INFO", "cuda_graph_step (auto): Tiny draws from Python's or numpy's generator in its source (random.random), "
                 "which a replayed graph would not draw again; the step runs eagerly")]
    assert isinstance(graphed_loss(_trainer("auto", compiled)), GraphedLoss)  # fast mode on a GPU: recorded


def test_a_graph_is_for_one_shape_of_batch():
    first, last = _batches(8, 5)
    assert signature(first) == (("item_id", (8,), torch.int64, torch.device("cpu")),)
    assert signature(first) != signature(last)
    assert signature(type("Batch", (), {"interaction": {"item_id": [1, 2]}})()) is None  # not a tensor: eager


# ---------------------------------------------------------------- the graphed loss
def test_recording_leaves_dropout_draws_and_running_statistics_as_the_eager_step_has_them():
    batches = _batches(8, 8, 8, 5, 8)
    torch.manual_seed(1)
    eager = Tiny().train()
    torch.manual_seed(2)
    expected = _train(eager.calculate_loss, eager, batches)

    torch.manual_seed(1)
    model = Tiny().train()
    recorded = []
    graphed = GraphedLoss(model, make=lambda *a, **k: recorded.append(a[1][0].shape) or rehearsed(*a, **k))
    torch.manual_seed(2)
    got = _train(graphed, model, batches)

    assert recorded == [(8,), (5,)] and len(graphed.graphs) == 2  # each shape recorded once, at its first batch
    assert got[0] == expected[0]  # the same losses, bit for bit: the warm-ups' draws were not the run's
    assert all(torch.equal(got[1][k], expected[1][k]) for k in expected[1])  # weights and BatchNorm's statistics


def test_shapes_beyond_the_recorded_ones_and_a_loss_that_cannot_be_recorded_run_eagerly(caplog):
    model = Tiny().train()
    made = []
    graphed = GraphedLoss(model, make=lambda *a, **k: made.append(1) or rehearsed(*a, **k))
    for batch in _batches(*range(4, 4 + MAX_GRAPHS + 2)):
        graphed(batch)
    assert len(made) == len(graphed.graphs) == MAX_GRAPHS

    def refuses(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    failing = GraphedLoss(Tiny().train(), make=refuses)
    with caplog.at_level(logging.WARNING, logger="recrunner"):
        losses = [failing(batch) for batch in _batches(8, 8)]
    assert all(torch.isfinite(loss) for loss in losses) and failing.graphs == {}
    assert [r.getMessage() for r in caplog.records] == [  # once, then eager without another try
        "cuda_graph_step: Tiny's loss could not be recorded (RuntimeError: operation not permitted when stream "
        "is capturing); its batches run eagerly"]


def test_validation_mode_never_replays_a_training_graph():
    model = Tiny()
    graphed = GraphedLoss(model, make=rehearsed)
    model.eval()
    graphed(_batches(8)[0])
    assert graphed.graphs == {}


# ---------------------------------------------------------------- runs
def _losses(result):
    return [line["loss"] for line in read_history(result.run_dir / "history.jsonl") if "loss" in line]


def test_a_run_with_its_step_graphed_trains_the_same_numbers(workspace, tmp_path, monkeypatch):
    """The real wiring on a CPU: RecBole's SASRec (dropout in every layer) through the trainer's epoch,
    its batches rebuilt from the graph's tensors; the recording stood in for."""
    params = {**TINY_SASREC, "train_batch_size": 512,  # ml-100k [10,60]: full batches and a shorter last one
              "deterministic": True}  # on a GPU (the GPU check's tests step) two runs repeat only so
    eager = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    monkeypatch.setattr(graphs, "refusal", lambda **_: None)
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", rehearsed)
    other = Workspace(tmp_path / "graphed", workspace.data_path, workspace.config_dir)
    graphed = run_experiment(Experiment("SASRec", "ml-100k", {**params, "cuda_graph_step": True}), other,
                             console=False)

    assert eager.status == graphed.status == "ok"
    assert _losses(graphed) == _losses(eager) and len(_losses(eager)) == 2
    assert graphed.test == eager.test and graphed.best_valid == eager.best_valid
    log = (graphed.run_dir / "run.log").read_text()
    assert log.count("cuda_graph_step: recorded SASRec's loss for batches of ") == 2  # full batches, the last one


def test_fast_mode_records_its_own_loss_with_the_same_numbers(workspace, tmp_path, monkeypatch):
    """In fast mode the step recorded is fast mode's loss (bf16 here, uncompiled: quick on a CPU), its
    precision applied inside the recording; the recording stood in for as a GPU would make it. Fast
    mode records it without being asked (`cuda_graph_step: auto`); `false` keeps the eager step."""
    params = {**TINY_SASREC, "train_batch_size": 512, "epochs": 1, "fast": True, "fast_precision": "bf16",
              "fast_compile": False}
    fast = run_experiment(Experiment("SASRec", "ml-100k", {**params, "cuda_graph_step": False}), workspace,
                          console=False)
    real = graphs.refusal
    monkeypatch.setattr(graphs, "refusal", lambda **kw: real(**{**kw, "device_type": "cuda"}))  # as on a GPU
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", rehearsed)
    other = Workspace(tmp_path / "graphed", workspace.data_path, workspace.config_dir)
    graphed = run_experiment(Experiment("SASRec", "ml-100k", params), other, console=False)  # auto
    assert _losses(graphed) == _losses(fast) and graphed.test == fast.test
    log = (graphed.run_dir / "run.log").read_text()
    assert "fast mode: bf16, eager" in log and "cuda_graph_step: recorded SASRec's loss" in log
    scaled = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast": False, "enable_amp": True,
                                                              "cuda_graph_step": True}), other, console=False)
    assert "cuda_graph_step: not with RecBole's enable_amp, a gradient scaler" in (scaled.run_dir / "run.log").read_text()


def test_on_a_cpu_the_run_says_it_trains_eagerly(workspace):
    if torch.cuda.is_available():
        pytest.skip("a GPU records the graphs (test_graphs_on_a_gpu_replay_the_eager_step_bit_for_bit)")
    result = run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "epochs": 1, "cuda_graph_step": True}),
                            workspace, console=False)
    assert result.status == "ok"
    assert "cuda_graph_step: CUDA graphs need a CUDA device; SASRec trains eagerly on cpu" in \
        (result.run_dir / "run.log").read_text()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (bench/gpu_check.py runs this)")
def test_graphs_on_a_gpu_replay_the_eager_step_bit_for_bit(workspace, tmp_path):
    params = {**TINY_SASREC, "train_batch_size": 512, "deterministic": True}
    eager = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    other = Workspace(tmp_path / "graphed", workspace.data_path, workspace.config_dir)
    graphed = run_experiment(Experiment("SASRec", "ml-100k", {**params, "cuda_graph_step": True}), other,
                             console=False)
    log = (graphed.run_dir / "run.log").read_text()
    assert "cuda_graph_step: recorded SASRec's loss" in log, log[-2000:]
    assert _losses(graphed) == _losses(eager)
    assert graphed.test == eager.test and graphed.best_valid == eager.best_valid
