"""Batch losses read from the device in groups (recrunner.training.loop.losses, loop/epoch.py): the
same numbers as a read per batch, one read per `read_loss_every` batches, a non-finite loss still
found, named by its batch, and never saved into a checkpoint."""

import math

import pytest
import torch

from recrunner import Experiment, Workspace, run_experiment
from recrunner.core.errors import TrainingFailed
from recrunner.config.checks import impossible_values
from recrunner.training.callbacks.history import read_history
from recrunner.training.loop.losses import AUTO_ON_GPU, NonFiniteLoss, PendingLosses, read_every
from recrunner.training.loop.output import non_finite_line

from .conftest import LOSSES, TINY_BPR, read_scalars, trainer_and_data

BATCH = {"train_batch_size": 256}  # ml-100k [10,60]: 51 BPR batches per epoch


# ---------------------------------------------------------------- decisions and the pending losses (pure)
def test_read_every_decides_by_device_and_processes():
    assert read_every("auto", "cpu", processes=False) == 1  # nothing waits on a CPU: read as RecBole does
    assert read_every("auto", "cuda", processes=False) == AUTO_ON_GPU == 32
    assert read_every(None, "cuda", processes=False) == 32
    assert read_every(8, "cpu", processes=False) == 8  # asked for: also on a CPU (how the tests run it)
    assert read_every(8, "cuda", processes=True) == 1  # a data-parallel run's processes agree on each batch
    for wrong in (0, -3, True, "often", 2.5):
        with pytest.raises(ValueError, match="read_loss_every"):
            read_every(wrong, "cuda", processes=False)


def test_impossible_read_loss_every_is_refused_before_a_run():
    assert impossible_values({"read_loss_every": "auto"}) == impossible_values({"read_loss_every": 16}) == []
    for wrong in (0, "often", 1.5, True):
        assert impossible_values({"read_loss_every": wrong}) == [
            f"read_loss_every must be auto or a whole number >= 1, got {wrong!r}"]


def test_pending_losses_read_what_item_gives_in_order_with_parts():
    pending = PendingLosses(every=3)
    first = torch.tensor(0.1, dtype=torch.float32)
    second = torch.tensor([2.3456], dtype=torch.bfloat16)  # one element, another precision
    parts = (torch.tensor(0.7), torch.tensor(1e-8, dtype=torch.float16))
    pending.add(0, first)
    pending.add(1, second)
    assert not pending.due and len(pending) == 2
    pending.add(2, parts[0] + parts[1], parts)
    assert pending.due
    first.fill_(99.0)  # a CUDA graph overwrites its output at the next step: what was added is a copy
    read = pending.read()
    assert read == [(0, torch.tensor(0.1).item(), None), (1, second.item(), None),
                    (2, (parts[0] + parts[1]).item(), (parts[0].item(), parts[1].item()))]
    assert len(pending) == 0 and pending.read() == []


def test_the_non_finite_line_says_where_the_loss_was_read():
    assert non_finite_line(0, NonFiniteLoss(math.nan, 4, read_at=4), 1) == "epoch 0 stopped at batch 4: the loss is nan"
    assert non_finite_line(2, NonFiniteLoss(math.inf, 4, read_at=7), 8) == (
        "epoch 2 stopped at batch 4: the loss is inf (read at batch 7: losses are read every 8 batches here, "
        "read_loss_every; batches 5-7 trained on)")


# ---------------------------------------------------------------- the epoch
def test_the_epoch_reads_losses_once_per_group_and_never_per_batch(workspace, monkeypatch):
    trainer, train, _, _ = trainer_and_data(workspace, "BPR", {**TINY_BPR, **BATCH})
    trainer.steps.losses, trainer.epoch = PendingLosses(every=7), 0
    reads, items = [], []
    read = PendingLosses.read
    monkeypatch.setattr(PendingLosses, "read", lambda self: reads.append(len(self)) or read(self))
    item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: items.append(self.grad_fn) or item(self))

    loss = trainer._train_epoch(train, 0)

    assert len(train) == 51 and [n for n in reads if n] == [7] * 7 + [2]  # 51 batches: 7 groups of 7, then the rest
    assert [fn for fn in items if fn is not None] == []  # RecBole's loop reads each loss with .item(): 51 waits for a GPU
    assert loss == trainer.steps.epoch.running_loss and math.isfinite(loss)


def test_a_loss_with_parts_is_summed_per_part_as_recbole_sums_it(workspace, monkeypatch):
    trainer, train, _, _ = trainer_and_data(workspace, "BPR", {**TINY_BPR, **BATCH})
    trainer.steps.losses, trainer.epoch = PendingLosses(every=5), 0
    plain = trainer.model.calculate_loss
    seen = []

    def two_parts(interaction):
        loss = plain(interaction)
        parts = (loss, loss * 0.25)
        seen.append(tuple(part.item() for part in parts))
        return parts

    monkeypatch.setattr(trainer.model, "calculate_loss", two_parts)
    losses = trainer._train_epoch(train, 0)

    expected = None  # RecBole's `tuple(map(sum, zip(total_loss, loss_tuple)))`, batch by batch
    for parts in seen:
        expected = parts if expected is None else tuple(map(sum, zip(expected, parts)))
    assert isinstance(losses, tuple) and losses == expected


# ---------------------------------------------------------------- runs
def _losses(result):
    return [line["loss"] for line in read_history(result.run_dir / "history.jsonl") if "loss" in line]


def test_reading_losses_every_n_batches_changes_no_number(workspace, tmp_path):
    params = {**TINY_BPR, **BATCH, "epochs": 2, "log_every_steps": 5, "checkpoint_every_steps": 4,
              "eval_every_steps": 30}
    each = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    other = Workspace(tmp_path / "grouped", workspace.data_path, workspace.config_dir)
    grouped = run_experiment(Experiment("BPR", "ml-100k", {**params, "read_loss_every": 7}), other, console=False)

    assert each.status == grouped.status == "ok"
    assert _losses(each) == pytest.approx(_losses(grouped), **LOSSES) and len(_losses(each)) == 2  # a GPU's atomics
    assert grouped.test == each.test and grouped.best_valid == each.best_valid
    for run in (each, grouped):  # the per-step lines read the losses they average first
        assert len(read_scalars(run.run_dir / "steps")["Train-step/Loss"]) == 102 // 5
    assert read_scalars(each.run_dir / "steps") == {tag: [(step, pytest.approx(value, **LOSSES)) for step, value in rows]
                                                    for tag, rows in read_scalars(grouped.run_dir / "steps").items()}
    assert grouped.run_dir == other.output_dir / each.run_dir.relative_to(workspace.output_dir)  # not the run's identity
    assert "losses read every 7 batches" in (grouped.run_dir / "run.log").read_text()


def test_a_non_finite_loss_read_later_fails_the_run_as_a_read_per_batch_does(workspace, tmp_path):
    params = {**TINY_BPR, **BATCH, "learning_rate": 1e30}
    each = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    other = Workspace(tmp_path / "grouped", workspace.data_path, workspace.config_dir)
    grouped = run_experiment(Experiment("BPR", "ml-100k", {**params, "read_loss_every": 16}), other, console=False)

    assert each.status == grouped.status == "failed"
    assert grouped.error == each.error and "training loss became nan in epoch 0 at batch " in each.error
    log = (grouped.run_dir / "run.log").read_text()
    assert "losses are read every 16 batches here" in log and "Traceback" not in log


def test_a_checkpoint_reads_the_pending_losses_first_and_never_saves_after_a_nan(workspace, monkeypatch):
    params = {**TINY_BPR, **BATCH, "read_loss_every": 5, "checkpoint_every_steps": 3}
    trainer, train, valid, _ = trainer_and_data(workspace, "BPR", params)
    plain, calls = trainer.model.calculate_loss, []

    def nan_at_batch_10(interaction):
        calls.append(1)
        loss = plain(interaction)
        return loss * math.nan if len(calls) == 11 else loss

    monkeypatch.setattr(trainer.model, "calculate_loss", nan_at_batch_10)
    with pytest.raises(TrainingFailed, match="training loss became nan in epoch 0 at batch 10"):
        trainer.fit(train, valid, verbose=False, saved=True)

    # reads after batches 4 and 9; checkpoints at steps 3, 6, 9 and 12, the last with batch 10 pending:
    # it read batches 10 and 11, found the NaN and saved nothing
    assert trainer.steps.epoch.non_finite_batch == 10 and len(calls) == 12
    state = torch.load(trainer.checkpoints.last, weights_only=False)
    assert state["global_step"] == 9 and state["batch_in_epoch"] == 9
    assert all(torch.isfinite(value).all() for value in state["state_dict"].values())
