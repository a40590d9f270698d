"""Fast mode's last transformer layer at the scored positions only (recrunner.training.fast.last_layer):
the same outputs, losses and gradients as RecBole's SASRec, SASRecF, FDSA, GCSAN and BERT4Rec, the plan's
choice, a run and its resume."""

import json

import pytest
import torch

from recrunner import ConfigError, Experiment, Workspace, run_experiment
from recrunner.training.callbacks.history import read_history
from recrunner.training.fast.apply import accelerate
from recrunner.training.fast.last_layer import (fused_last_position_forward, graph_then_transformer_forward,
                                                last_layer_choice, last_layer_only, last_position_forward,
                                                masked_positions_forward, two_transformers_forward)
from recrunner.training.fast.plan import FastPlan, choose, plan_text, same_plan_key

from .conftest import REPO, TINY_SASREC, model_and_sequences, trainer_and_data
from .test_resume import _killed_run


# ------------------------------------------------------------------ the choice (pure)
def test_auto_computes_sasrecs_last_layer_at_the_scored_position_only():
    assert last_layer_choice("auto", "SASRec")[0] and "other dropout draws" in last_layer_choice("auto", "SASRec")[1]
    assert last_layer_choice(True, "SASRec")[0] and last_layer_choice(False, "SASRec") == (False, "")
    assert all(last_layer_choice("auto", model)[0] for model in ("BERT4Rec", "SASRecF", "FDSA", "GCSAN"))
    assert last_layer_choice("auto", "LightSANs") == (False, "")  # its own transformer
    assert last_layer_choice(True, "GRU4Rec") == (False, "fast_last_layer: GRU4Rec's last layer is not read at a few "
                                                         "positions; only SASRec, SASRecF, FDSA, GCSAN and "
                                                         "BERT4Rec's")
    with pytest.raises(ConfigError, match="fast_last_layer must be auto, true or false, got 'some'"):
        last_layer_choice("some", "SASRec")


def test_the_plan_says_so_and_a_resume_must_match_it():
    plan = choose(model="SASRec", device_type="cpu")
    assert plan.last_layer and plan.settings().endswith(", last layer at the scored positions")
    assert "last layer: the same function, rounded otherwise, other dropout draws" in plan.reason
    off = choose(model="SASRec", device_type="cpu", last_layer=False)
    assert not off.last_layer and "last layer" not in off.settings()
    assert same_plan_key(plan.as_dict()) != same_plan_key(off.as_dict())  # it draws fewer dropout masks
    older = {k: v for k, v in plan.as_dict().items() if k != "last_layer"}  # a last.pth of before 2026-11-29
    assert FastPlan.stored(older).last_layer is False and plan_text(same_plan_key(older)).endswith("masks)")
    for model in ("SASRecF", "FDSA", "GCSAN"):  # measured faster on a CPU with it (facts.py): compiled, the last layer
        feature = choose(model=model, device_type="cpu")
        assert feature.compile and feature.last_layer and "faster on cpu: 2." in feature.reason, model
    srgnn = choose(model="SRGNN", device_type="cpu")  # no transformer; compiled it was no faster, graphs array-built
    assert srgnn.model_unchanged and "0.92-0.96x" in srgnn.reason
    asked = FastPlan(last_layer=True)  # fp32 and eager still changes the model
    assert not asked.model_unchanged and asked.settings() == "fp32, eager, last layer at the scored positions"


def test_a_bad_fast_last_layer_is_refused_before_a_run(workspace):
    with pytest.raises(ConfigError, match="fast_last_layer 'first' must be auto, true or false"):
        run_experiment(Experiment("SASRec", "ml-100k", {**TINY_SASREC, "fast": True, "fast_last_layer": "first"}),
                       workspace, console=False)


# ------------------------------------------------------------------ the forward
@pytest.fixture(scope="module")
def sasrec(tmp_path_factory):
    """A two-layer, two-head SASRec (RecBole's structure at a small size) and sequences of every length."""
    return model_and_sequences(tmp_path_factory.mktemp("last_layer"), "SASRec", {**TINY_SASREC, "n_layers": 2, "n_heads": 2})


def test_the_forward_is_recboles_at_the_scored_position_with_its_gradients(sasrec):
    model, items, lengths = sasrec
    model.eval()  # no dropout: the same function of the same weights
    grads = []
    for forward in (model.forward, lambda *args: last_position_forward(model, *args)):
        model.zero_grad()
        out = forward(items, lengths)
        (out * torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out)).sum().backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
        grads[-1]["out"] = out.detach()
    recbole, fast = grads
    assert recbole.keys() == fast.keys() and recbole["out"].shape == (40, model.hidden_size)
    for name in recbole:
        assert torch.allclose(recbole[name], fast[name], atol=2e-6, rtol=1e-5), name


def test_installed_as_an_instance_attribute_where_the_structure_is_recboles(sasrec):
    model, items, lengths = sasrec
    model.eval()
    keys, recbole = list(model.state_dict()), model.forward(items, lengths)
    try:
        assert last_layer_only(model) and "forward" in vars(model) and list(model.state_dict()) == keys
        assert torch.allclose(model.full_sort_predict({"item_id_list": items, "item_length": lengths}),
                              recbole @ model.item_embedding.weight.T, atol=1e-5)
    finally:
        del model.forward
    feed_forward, model.trm_encoder.layer[0].feed_forward = model.trm_encoder.layer[0].feed_forward, torch.nn.Identity()
    try:  # not RecBole's structure: left alone
        assert not last_layer_only(model) and "forward" not in vars(model)
    finally:
        model.trm_encoder.layer[0].feed_forward = feed_forward


def test_accelerate_installs_it_with_the_plan(sasrec):
    model, *_ = sasrec
    try:
        accelerate(model, FastPlan(last_layer=True))
        assert vars(model)["forward"].func is last_position_forward
    finally:
        for name in ("forward", "calculate_loss", "predict", "full_sort_predict"):
            vars(model).pop(name, None)


@pytest.mark.parametrize("name, forward, encoders, before", [
    ("SASRecF", fused_last_position_forward, ("trm_encoder",), "feature"),
    ("FDSA", two_transformers_forward, ("item_trm_encoder", "feature_trm_encoder"), "feature"),
    ("GCSAN", graph_then_transformer_forward, ("self_attention",), "gnn")])
def test_the_other_models_forwards_are_recboles_with_their_gradients(tmp_path, name, forward, encoders, before):
    """SASRecF (item features fused before its transformer), FDSA (a transformer over items and one over
    their features) and GCSAN (a graph network, then a transformer), two layers each, on ml-100k (its
    genres): outputs and every gradient as RecBole's, those of the layers `before` the transformer too."""
    (tmp_path / "datasets").mkdir()
    workspace = Workspace(output_dir=tmp_path / "runs", data_path=tmp_path / "datasets", config_dir=REPO / "configs")
    trainer, train, *_ = trainer_and_data(workspace, name, {**TINY_SASREC, "n_layers": 2, "n_heads": 2})
    model, batch = trainer.model, next(iter(train)).to(trainer.device)
    model.eval()  # no dropout: the same function of the same weights
    results = []
    for install in (False, True):
        if install:
            assert last_layer_only(model) and vars(model)["forward"].func is forward
        model.zero_grad()
        out = model.forward(batch["item_id_list"], batch["item_length"])
        model.calculate_loss(batch).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((out.detach(), grads))
    del model.forward
    (out, grads), (fast_out, fast_grads) = results
    assert out.shape == (len(batch), model.hidden_size) and torch.allclose(out, fast_out, atol=1e-6)
    assert grads.keys() == fast_grads.keys() and any(before in n for n in grads)
    for n in grads:
        assert torch.allclose(grads[n], fast_grads[n], atol=2e-6, rtol=1e-5), n
    kept = getattr(model, encoders[-1])
    setattr(model, encoders[-1], torch.nn.Identity())
    try:  # a transformer not RecBole's: left alone
        assert not last_layer_only(model) and "forward" not in vars(model)
    finally:
        setattr(model, encoders[-1], kept)


@pytest.fixture(scope="module")
def bert4rec(tmp_path_factory):
    """A two-layer BERT4Rec with RecBole's masking (mask_ratio 0.3 of 10 positions: often more masks than the
    3 its loss reads) and a training batch of RecBole's loader."""
    root = tmp_path_factory.mktemp("bert4rec")
    (root / "datasets").mkdir()
    workspace = Workspace(output_dir=root / "runs", data_path=root / "datasets", config_dir=REPO / "configs")
    params = {**TINY_SASREC, "n_layers": 2, "n_heads": 2, "mask_ratio": 0.3, "train_batch_size": 256}
    trainer, train, _, test = trainer_and_data(workspace, "BERT4Rec", params)
    torch.manual_seed(0)
    test_batch, *rest = next(iter(test))
    return trainer.model, next(iter(train)).to(trainer.device), (test_batch.to(trainer.device), *rest)


def test_bert4recs_loss_and_scores_are_recboles_with_their_gradients(bert4rec):
    model, batch, (test_batch, *_) = bert4rec
    model.eval()  # no dropout: the same function of the same weights
    masks = (batch[model.MASK_ITEM_SEQ] == model.mask_token).sum(1)
    assert masks.max() > model.mask_item_length == 3  # rows with masks the loss does not read
    results = []
    for install in (False, True):
        if install:
            assert last_layer_only(model)
        model.zero_grad()
        loss = model.calculate_loss(batch)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        with torch.no_grad():
            results.append((loss.detach(), grads, model.full_sort_predict(test_batch), model.predict(test_batch)))
    del model.forward
    (loss, grads, scores, predicted), (fast_loss, fast_grads, fast_scores, fast_predicted) = results
    assert torch.allclose(loss, fast_loss, atol=1e-6) and grads.keys() == fast_grads.keys()
    for name in grads:
        assert torch.allclose(grads[name], fast_grads[name], atol=2e-6, rtol=1e-5), name
    assert torch.allclose(scores, fast_scores, atol=1e-5) and torch.allclose(predicted, fast_predicted, atol=1e-5)


def test_bert4recs_forward_under_autocast_returns_recboles_dtype(bert4rec):
    """bf16 autocast (fast mode's plan on a GPU, and on a CPU when asked): the rows computed and the zeros
    around them in the dtype RecBole's forward returns."""
    model, batch, _ = bert4rec
    model.eval()
    items = batch[model.MASK_ITEM_SEQ]
    with torch.autocast(items.device.type, dtype=torch.bfloat16), torch.no_grad():
        recbole = model.forward(items)
        fast = masked_positions_forward(model, items)
    assert fast.dtype == recbole.dtype and fast.shape == recbole.shape
    index, read = batch[model.MASK_INDEX], (batch[model.POS_ITEMS] > 0).unsqueeze(-1)  # the rows its loss reads
    rows = index.unsqueeze(-1).expand(-1, -1, fast.size(-1))
    assert torch.allclose((fast.gather(1, rows) * read).float(), (recbole.gather(1, rows) * read).float(), atol=0.1)


# ------------------------------------------------------------------ a run
def test_a_fast_run_trains_with_it_and_resumes_exactly(workspace, tmp_path):
    """bf16 eager (quick), against the same plan with every position; then killed after epoch 1 and resumed."""
    params = {**TINY_SASREC, "n_layers": 2, "epochs": 3, "fast": True, "fast_precision": "bf16", "fast_compile": False}
    run = run_experiment(Experiment("SASRec", "ml-100k", params), workspace, console=False)
    every = run_experiment(Experiment("SASRec", "ml-100k", {**params, "fast_last_layer": False}), workspace, console=False)
    assert run.status == every.status == "ok" and run.run_dir != every.run_dir  # part of the identity
    plan = json.loads((run.run_dir / "metrics.json").read_text())["provenance"]["fast"]
    assert plan["last_layer"] and "last layer at the scored positions" in (run.run_dir / "run.log").read_text()
    losses = [[row["loss"] for row in read_history(r.run_dir / "history.jsonl")[1:]] for r in (run, every)]
    assert losses[0] != losses[1]  # other dropout draws

    killed = Workspace(tmp_path / "killed-runs", workspace.data_path, workspace.config_dir)
    _killed_run(killed, "SASRec", params, 1, "after-epoch")
    resumed = run_experiment(Experiment("SASRec", "ml-100k", params), killed, console=False)
    assert resumed.status == "ok" and "continuing at epoch 2" in (resumed.run_dir / "run.log").read_text()
    assert (resumed.best_epoch, resumed.best_valid, resumed.test) == (run.best_epoch, run.best_valid, run.test)
