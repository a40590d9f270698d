"""The decisions inside the built-in callbacks, as pure functions and on stand-in trainers."""

import io
import logging
import math
import random
import types
from types import SimpleNamespace

import pytest
import torch

from recrunner.training.loop.optimizer import OptimizerStep
from recrunner.training.callbacks import (
    Callback,
    CallbackHandler,
    EarlyStopping,
    NonFiniteGuard,
    ProgressBar,
    TrainerControl,
    improved,
    lr_multiplier,
    metric_bigger,
    with_defaults,
)


def test_improvement_follows_recbole_ties_min_delta_direction_and_nan():
    assert improved(0.5, None, bigger=True)
    assert improved(0.5, 0.5, bigger=True)  # a tie counts, as in recbole.utils.early_stopping
    assert not improved(0.5049, 0.5, bigger=True, min_delta=0.005)
    assert improved(0.505, 0.5, bigger=True, min_delta=0.005)
    assert improved(0.9, 1.0, bigger=False) and not improved(1.1, 1.0, bigger=False)
    assert not improved(math.nan, None, bigger=True)


def test_direction_comes_from_the_metric():
    assert metric_bigger("ndcg@10") and metric_bigger("MRR@20") and metric_bigger("auc")
    assert not metric_bigger("rmse") and not metric_bigger("logloss") and not metric_bigger("giniindex")


def _stop_epoch(callback, scores):
    control = TrainerControl()
    for epoch, score in enumerate(scores):
        callback.on_validation_end(SimpleNamespace(epoch=epoch), control, {"mrr@10": score}, score)
        if control.should_stop:
            return epoch
    return None


@pytest.mark.parametrize("seed", range(20))
def test_early_stopping_stops_where_recbole_would(seed):
    from recbole.utils import early_stopping

    rng = random.Random(seed)
    scores = [round(rng.random(), 1) for _ in range(30)]  # ties happen
    patience = rng.randrange(0, 4)
    best, cur_step, expected = -math.inf, 0, None
    for epoch, score in enumerate(scores):
        best, cur_step, stop, _ = early_stopping(score, best, cur_step, max_step=patience, bigger=True)
        if stop:
            expected = epoch
            break
    assert _stop_epoch(EarlyStopping("mrr@10", patience), scores) == expected


def test_early_stopping_min_delta_and_warning_one_validation_away(caplog):
    callback = EarlyStopping("mrr@10", patience=2, min_delta=0.01)
    with caplog.at_level(logging.WARNING, logger="recrunner"):
        stopped = _stop_epoch(callback, [0.30, 0.305, 0.309, 0.3099, 0.5])
    assert stopped == 3  # each gain over 0.30 is below min_delta: the third one stops
    assert callback.best == 0.30
    assert "one validation away" in caplog.text


def test_early_stopping_state_round_trips():
    first = EarlyStopping("mrr@10", patience=3)
    _stop_epoch(first, [0.3, 0.2, 0.1])
    second = EarlyStopping("mrr@10", patience=3)
    second.load_state_dict(first.state_dict())
    assert (second.best, second.best_epoch, second.bad_validations) == (0.3, 0, 2)


def test_guard_requests_failure_for_non_finite_losses_and_scores():
    guard, trainer = NonFiniteGuard(), SimpleNamespace(epoch=4, non_finite_batch=7)
    control = TrainerControl()
    guard.on_train_epoch_end(trainer, control, 12.5)
    guard.on_validation_end(trainer, control, {"ndcg@10": 0.1}, 0.1)
    assert control.failure is None
    guard.on_train_epoch_end(trainer, control, (1.0, math.inf))
    assert control.failure.startswith("training loss became inf in epoch 4 at batch 7")
    control = TrainerControl()
    guard.on_validation_end(trainer, control, {"ndcg@10": math.nan, "hit@10": 0.2}, 0.2)
    assert control.failure.startswith("validation gave non-finite ndcg@10 in epoch 4")


def test_lr_multiplier_warmup_then_each_schedule():
    assert [lr_multiplier(s, "constant", warmup=3) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert [lr_multiplier(s, "step", step_size=2, gamma=0.5) for s in range(5)] == [1, 1, 0.5, 0.5, 0.25]
    cosine = [lr_multiplier(s, "cosine", warmup=1, total=11, min_ratio=0.1) for s in range(12)]
    assert cosine[0] == 0.5 and cosine[1] == 1.0 and cosine[6] == pytest.approx(0.55) and cosine[11] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(cosine[1:], cosine[2:]))
    assert lr_multiplier(5, "plateau", warmup=2, plateau_factor=0.25) == 0.25
    with pytest.raises(ValueError, match="schedules: constant, step, cosine, plateau"):
        lr_multiplier(0, "linear")


def test_passed_callbacks_replace_the_default_of_their_class():
    default_es, guard, mine = EarlyStopping("mrr@10", 10), NonFiniteGuard(), EarlyStopping("ndcg@10", 2)
    assert with_defaults([default_es, guard], [mine]) == [guard, mine]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _drive(bar, batches=4):
    trainer = SimpleNamespace(epochs=3, start_epoch=0, best_epoch=None, batches_per_epoch=batches,
                              config={"model": "BPR", "dataset": "ml-100k"})
    control = TrainerControl()
    bar.on_fit_start(trainer, control)
    for epoch in range(3):
        trainer.epoch = epoch
        bar.on_epoch_start(trainer, control)
        for batch in range(batches):
            bar.on_train_batch(trainer, control, batch)
        bar.on_train_epoch_end(trainer, control, 10.0 - epoch)
        trainer.best_epoch = epoch
        bar.on_validation_end(trainer, control, {}, 0.1 * epoch)
        bar.on_epoch_end(trainer, control)
    bar.on_fit_end(trainer, control)


def test_progress_on_a_terminal_is_one_line_with_batches_rate_and_time_left():
    stream = _Terminal()
    _drive(ProgressBar(stream=stream))
    text = stream.getvalue()
    assert "BPR on ml-100k epoch 2/3" in text and "4/4" in text and "batch/s" in text
    assert "loss=8" in text and "score=0.2" in text and "run left=≤" in text
    assert "\n" not in text.strip("\n")  # one line, redrawn with \r


def test_progress_off_a_terminal_is_a_log_line_every_interval(caplog):
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="recrunner"):
        _drive(ProgressBar(stream=stream, every=0.0), batches=2)
    assert stream.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records if "batch " in r.getMessage()]
    assert lines[0].startswith("epoch 0/3: batch 1/2 (50%)") and "epoch left" in lines[0]
    assert "run left ≤" in lines[-1] and len(lines) == 6
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="recrunner"):
        _drive(ProgressBar(stream=io.StringIO(), every=3600.0))
    assert not [r for r in caplog.records if "batch " in r.getMessage()]  # short epochs add nothing


def test_progress_arithmetic():
    from recrunner.training.callbacks.progress import duration, progress_line, run_left

    assert [duration(s) for s in (4.4, 187, 18060)] == ["4s", "3m07s", "5h01m"]
    assert run_left([], 10) is None and run_left([10.0, 20.0], 3) == 45.0
    assert progress_line(0, 3, 50, 200, 10.0, None) == "epoch 0/3: batch 50/200 (25%), 5.00 batch/s, epoch left 30s"


def _toy_problem(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(6, 1)
    x, y = torch.randn(32, 6), torch.randn(32, 1)
    return model, x, y


@pytest.mark.parametrize("clip", [None, {"max_norm": 0.05}])
def test_accumulating_four_quarter_batches_equals_one_full_batch(clip):
    full_model, x, y = _toy_problem()
    full = torch.optim.SGD(full_model.parameters(), lr=0.1)
    for _ in range(3):
        full.zero_grad()
        torch.nn.functional.mse_loss(full_model(x), y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(full_model.parameters(), **clip)
        full.step()

    acc_model, _, _ = _toy_problem()
    acc = OptimizerStep(torch.optim.SGD(acc_model.parameters(), lr=0.1), accumulation=4, clip=clip)
    for _ in range(3):
        for part in range(4):  # RecBole's per-batch sequence: zero_grad, backward, step
            acc.zero_grad()
            rows = slice(8 * part, 8 * part + 8)
            torch.nn.functional.mse_loss(acc_model(x[rows]), y[rows]).backward()
            acc.step()
    assert acc.optimizer_steps == 3 and acc.pending == 0
    for a, b in zip(full_model.parameters(), acc_model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_accumulator_flush_steps_on_a_short_last_group():
    model, x, y = _toy_problem()
    acc = OptimizerStep(torch.optim.SGD(model.parameters(), lr=0.1), accumulation=4)
    for part in range(3):
        acc.zero_grad()
        torch.nn.functional.mse_loss(model(x[part:part + 1]), y[part:part + 1]).backward()
        acc.step()
    assert acc.optimizer_steps == 0 and acc.pending == 3
    acc.flush()
    assert acc.optimizer_steps == 1 and acc.pending == 0
    assert acc.state_dict()["param_groups"][0]["lr"] == 0.1  # the optimizer's own API passes through


def test_plateau_schedule_lowers_the_rate_after_patience_validations_without_gain():
    from recrunner.training.callbacks import LRScheduler

    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
    trainer = SimpleNamespace(optimizer=optimizer, epochs=10, epoch=0, valid_metric_bigger=True)
    scheduler, control = LRScheduler("plateau", patience=1, gamma=0.5, min_lr=0.03), TrainerControl()
    scheduler.on_fit_start(trainer, control)
    rates = []
    for epoch, score in enumerate([0.3, 0.2, 0.1, 0.35, 0.3, 0.3, 0.2, 0.1]):
        trainer.epoch = epoch
        scheduler.on_epoch_start(trainer, control)
        rates.append(optimizer.param_groups[0]["lr"])
        scheduler.on_validation_end(trainer, control, {}, score)
    # lowered after the 2nd validation without gain (epochs 2 and 5), floored at lr_min
    assert rates == [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.03, 0.03]


def test_track_is_the_one_best_rule_ties_improve_nan_never_does():
    from recrunner.training.callbacks.early_stopping import Best, track

    best = track(Best(), 0.2, 0, bigger=True)
    assert best == Best(0.2, 0, 0)
    assert track(best, 0.2, 1, bigger=True) == Best(0.2, 1, 0)  # a tie is a new best, as in RecBole
    assert track(best, 0.25, 1, bigger=True, min_delta=0.1) == Best(0.2, 0, 1)
    assert track(track(best, float("nan"), 1, bigger=True), 0.1, 2, bigger=True) == Best(0.2, 0, 2)
    assert track(Best(1.0, 3, 4), 0.9, 5, bigger=False) == Best(0.9, 5, 0)  # smaller is better (rmse)


class _Counter(Callback):
    """A stateful callback that sorts before EarlyStopping."""

    order = -20

    def __init__(self):
        self.seen = 0

    def on_validation_end(self, trainer, control, metrics, score):
        self.seen += 1

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = state["seen"]


def test_a_resume_with_one_more_callback_keeps_early_stoppings_patience_count():
    before = EarlyStopping("ndcg@10", patience=3)
    for epoch, score in enumerate([0.5, 0.4, 0.3]):  # best at 0, then two validations without a gain
        before.on_validation_end(types.SimpleNamespace(epoch=epoch), TrainerControl(), {"ndcg@10": score}, score)
    saved = CallbackHandler([before]).state_dict()

    after = EarlyStopping("ndcg@10", patience=3)
    counter = _Counter()
    CallbackHandler([counter, after]).load_state_dict(saved)  # the new callback sorts first

    assert (after.best_epoch, after.bad_validations) == (0, 2)
    assert counter.seen == 0  # nothing saved under its name: it keeps its own start


def test_callback_state_is_saved_by_name_and_read_back_from_older_positional_keys():
    stopping, counter = EarlyStopping("ndcg@10", patience=3), _Counter()
    counter.seen = 4
    assert set(CallbackHandler([stopping, counter]).state_dict()) == {"EarlyStopping[ndcg@10]", "_Counter"}
    legacy = {"0:_Counter": {"seen": 7}}  # last.pth written before state keys
    fresh = _Counter()
    CallbackHandler([fresh]).load_state_dict(legacy)
    assert fresh.seen == 7


def test_two_callbacks_with_one_state_key_are_refused():
    with pytest.raises(ValueError, match="two callbacks save their state as _Counter"):
        CallbackHandler([_Counter(), _Counter()])


def test_every_event_is_a_documented_no_op_of_callback_and_only_overrides_are_called():
    import inspect

    from recrunner.training.callbacks.base import EVENTS

    for event in EVENTS:
        method = getattr(Callback, event)
        assert inspect.getdoc(method), f"Callback.{event} has no docstring"
    handler = CallbackHandler([_Counter()])
    assert [len(handler._methods[event]) for event in EVENTS] == [int(e == "on_validation_end") for e in EVENTS]
