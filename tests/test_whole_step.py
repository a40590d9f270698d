"""The whole training step replayed from one CUDA graph (`cuda_graph_optimizer`, recrunner.training.loop.whole_step):
the eager step's numbers. CI has no GPU: the recording is stood in for on a CPU by `rehearsed`, which runs the
warm-up passes (they draw dropout and move running statistics) and gives back a replay that runs the step; the
last test records real graphs where CUDA is present (bench/gpu_check.py's tests step)."""

import pytest
import torch

from recrunner import ConfigError, Experiment, Workspace, run_experiment
from recrunner.training.callbacks.history import read_history
from recrunner.training.loop import graphs, whole_step as whole
from recrunner.training.loop.graphs import MAX_GRAPHS
from recrunner.training.loop.whole_step import WARM_UPS, WholeStep, hooked, optimizer_refusal

from .conftest import TINY_SASREC
from .test_graph_step import Tiny, _batches


def rehearsed(loss, optimizer):
    """What record_on_cuda runs before it returns, on a CPU: the warm-up passes and the gradients dropped; its
    replay runs the recorded step (a recorded backward writes each gradient: as if each were None)."""
    for _ in range(WARM_UPS):
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
    optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        output = loss().detach().clone()  # the graph's output, where the loss is, overwritten by each replay

    def replay():
        optimizer.zero_grad(set_to_none=True)
        value = loss()
        value.backward()
        optimizer.step()
        output.copy_(value.detach())

    return replay, output


def _fused_adam(model, lr=0.01):
    return torch.optim.Adam(model.parameters(), lr=lr, fused=True)


def _eager(model, optimizer, batches):
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = model.calculate_loss(batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _whole(step, model, optimizer, batches):
    losses = []
    for batch in batches:
        replayed = step(batch)
        if replayed is None:
            losses += _eager(model, optimizer, [batch])
        else:
            losses.append(replayed.clone().item())
    return losses


# ---------------------------------------------------------------- decisions (pure)
def test_only_a_fused_adam_without_clipping_is_recorded_with_the_loss():
    weights = [torch.nn.Parameter(torch.zeros(3))]
    assert optimizer_refusal(torch.optim.Adam(weights, fused=True), None) is None
    assert optimizer_refusal(torch.optim.AdamW(weights, fused=True), None) is None
    assert optimizer_refusal(torch.optim.Adam(weights), None) == ("the optimizer's step is recorded only as a fused Adam or "
                                                                  "AdamW (fast mode's fast_fused_optimizer), not Adam unfused")
    assert optimizer_refusal(torch.optim.SGD(weights, lr=0.1, fused=True), None).endswith("not SGD")
    assert optimizer_refusal(torch.optim.Adam(weights, fused=True), {"max_norm": 5}) == "not with clip_grad_norm"
    optimizer = torch.optim.Adam(weights, fused=True)
    assert not hooked(optimizer)
    optimizer.register_step_post_hook(lambda *_: None)
    assert hooked(optimizer)


# ---------------------------------------------------------------- the step, recorded as a GPU would
def test_replays_train_the_eager_steps_numbers_a_shapes_first_batch_eager():
    batches = _batches(8, 8, 8, 5, 8, 8, 5, 8)
    torch.manual_seed(0)
    reference = Tiny()
    start = {k: v.clone() for k, v in reference.state_dict().items()}
    torch.manual_seed(1)
    eager = _eager(reference, _fused_adam(reference), batches)

    model = Tiny()
    model.load_state_dict(start)
    optimizer = _fused_adam(model)
    step = WholeStep(model, optimizer, record=rehearsed)
    torch.manual_seed(1)
    replayed = _whole(step, model, optimizer, batches)

    assert replayed == eager  # the warm-up's draws and running statistics left no trace
    assert all(torch.equal(v, reference.state_dict()[k]) for k, v in model.state_dict().items())
    assert len(step.graphs) == 2 == MAX_GRAPHS and step.seen == set(step.graphs)  # 8 rows and 5 rows


def test_a_changed_learning_rate_records_again_and_step_hooks_are_never_recorded(caplog):
    model = Tiny()
    optimizer = _fused_adam(model)
    step = WholeStep(model, optimizer, record=rehearsed)
    _whole(step, model, optimizer, _batches(8, 8, 8))
    assert len(step.graphs) == 1
    optimizer.param_groups[0]["lr"] = 0.001  # an LR schedule by epoch
    assert step(_batches(8)[0]) is None and step.graphs == {}  # this batch eager, the next one recorded again
    assert step(_batches(8)[0]) is not None and step.lrs == [0.001]

    hooked_step = WholeStep(model, optimizer, record=rehearsed)
    handle = optimizer.register_step_post_hook(lambda *_: None)  # an LR schedule by batch
    try:
        with caplog.at_level("WARNING", logger="recrunner"):
            assert [hooked_step(batch) for batch in _batches(8, 8, 8)] == [None, None, None]
    finally:
        handle.remove()
    assert "the optimizer has step hooks (an LR schedule by batch), which a replay would not call" in caplog.text


def test_validation_and_a_failed_recording_run_the_step_as_before(caplog):
    model = Tiny()
    optimizer = _fused_adam(model)

    def refused(loss, optimizer):
        raise RuntimeError("operation not permitted when stream is capturing")

    step = WholeStep(model, optimizer, record=refused)
    with caplog.at_level("WARNING", logger="recrunner"):
        assert [step(batch) for batch in _batches(8, 8, 8)] == [None, None, None]
    assert step.failed == "RuntimeError: operation not permitted when stream is capturing"
    assert "Tiny's step could not be recorded (RuntimeError: operation not permitted" in caplog.text
    model.eval()
    assert WholeStep(model, optimizer, record=rehearsed)(_batches(8)[0]) is None


# ---------------------------------------------------------------- runs
def _losses(result):
    return [line["loss"] for line in read_history(result.run_dir / "history.jsonl") if "loss" in line]


FAST_FUSED = {**TINY_SASREC, "train_batch_size": 512, "epochs": 2, "fast": True, "fast_precision": "fp32",
              "fast_compile": False, "fast_fused_optimizer": True,
              "deterministic": True, "cuda_graph_step": False}  # on a GPU too: the same numbers twice, the eager step


def test_a_run_with_its_whole_step_recorded_trains_the_same_numbers(workspace, tmp_path, monkeypatch):
    """The real wiring on a CPU: RecBole's SASRec in fast mode with its fused Adam (fp32, eager: quick), its
    batches through the trainer's epoch; the recording stood in for as a GPU would make it."""
    before = run_experiment(Experiment("SASRec", "ml-100k", FAST_FUSED), workspace, console=False)
    monkeypatch.setattr(graphs, "refusal", lambda **_: None)  # as on a GPU
    monkeypatch.setattr(whole, "record_on_cuda", rehearsed)
    other = Workspace(tmp_path / "whole", workspace.data_path, workspace.config_dir)
    recorded = run_experiment(Experiment("SASRec", "ml-100k", {**FAST_FUSED, "cuda_graph_optimizer": True}), other,
                              console=False)
    assert before.status == recorded.status == "ok"
    assert _losses(recorded) == _losses(before) and len(_losses(before)) == 2
    assert recorded.test == before.test and recorded.best_valid == before.best_valid
    log = (recorded.run_dir / "run.log").read_text()
    assert log.count("cuda_graph_optimizer: recorded SASRec's step (forward, backward, Adam's step) for batches of ") == 2
    assert "cuda_graph_step: recorded" not in log  # the loss is not recorded twice


def test_what_a_run_says_where_its_whole_step_is_not_recorded(workspace):
    if torch.cuda.is_available():
        pytest.skip("a GPU records the graphs (test_the_whole_step_on_a_gpu_replays_the_eager_step_bit_for_bit)")
    result = run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "epochs": 1, "cuda_graph_optimizer": True}),
                            workspace, console=False)
    assert result.status == "ok"
    assert "cuda_graph_optimizer: CUDA graphs need a CUDA device; SASRec trains eagerly on cpu" in \
        (result.run_dir / "run.log").read_text()
    with pytest.raises(ConfigError, match="cuda_graph_optimizer 'yes' must be auto, true or false"):
        run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "cuda_graph_optimizer": "yes"}), workspace,
                       console=False)


def test_exact_modes_optimizer_is_not_recorded(workspace, monkeypatch, caplog):
    monkeypatch.setattr(graphs, "refusal", lambda **_: None)  # as on a GPU
    with caplog.at_level("WARNING", logger="recrunner"):
        result = run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "epochs": 1, "cuda_graph_optimizer": True}),
                                workspace, console=False)
    assert result.status == "ok"
    assert "cuda_graph_optimizer: the optimizer's step is recorded only as a fused Adam or AdamW" in \
        (result.run_dir / "run.log").read_text()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (bench/gpu_check.py runs this)")
def test_the_whole_step_on_a_gpu_replays_the_eager_step_bit_for_bit(workspace, tmp_path):
    eager = run_experiment(Experiment("SASRec", "ml-100k", FAST_FUSED), workspace, console=False)
    other = Workspace(tmp_path / "whole", workspace.data_path, workspace.config_dir)
    recorded = run_experiment(Experiment("SASRec", "ml-100k", {**FAST_FUSED, "cuda_graph_optimizer": True}), other,
                              console=False)
    log = (recorded.run_dir / "run.log").read_text()
    assert "cuda_graph_optimizer: recorded SASRec's step" in log, log[-2000:]
    assert _losses(recorded) == _losses(eager)
    assert recorded.test == eager.test and recorded.best_valid == eager.best_valid
