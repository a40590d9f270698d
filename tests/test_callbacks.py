import pytest

from recrunner.training.callbacks import Callback, CallbackHandler, TrainerControl


def test_a_misspelled_event_method_is_an_error():
    class Typo(Callback):
        def on_validaton_end(self, trainer, control, metrics, score):
            pass

    with pytest.raises(ValueError, match="on_validaton_end is not a trainer event"):
        CallbackHandler([Typo()])


def test_calling_an_unknown_event_is_an_error():
    with pytest.raises(ValueError, match="unknown trainer event"):
        CallbackHandler([]).call("on_epoch_finish", None, TrainerControl())


def test_callbacks_run_in_order_and_request_through_control():
    calls = []

    class Late(Callback):
        order = 10

        def on_epoch_end(self, trainer, control):
            calls.append("late")
            control.should_stop = True

    class Early(Callback):
        order = -1

        def on_epoch_end(self, trainer, control):
            calls.append("early")

    control = TrainerControl()
    CallbackHandler([Late(), Early()]).call("on_epoch_end", None, control)
    assert calls == ["early", "late"] and control.should_stop


def test_callback_state_round_trips():
    class Counter(Callback):
        def __init__(self):
            self.n = 0

        def state_dict(self):
            return {"n": self.n}

        def load_state_dict(self, state):
            self.n = state["n"]

    first = Counter()
    first.n = 3
    second = Counter()
    CallbackHandler([second]).load_state_dict(CallbackHandler([first]).state_dict())
    assert second.n == 3
