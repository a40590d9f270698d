"""Events around CustomTrainer.fit, the callbacks that listen to them, and their requests.

A callback subclasses `Callback` and defines any of the methods named in EVENTS. It reads the
trainer's public state and *requests* actions through `control` (stop, save); the trainer
carries them out at one fixed point of the loop. Callbacks run in ascending `order`.
A method named `on_<something>` that is not an event is an error at registration, so a
misspelled event never silently stays quiet.

    class PrintBest(Callback):
        def on_validation_end(self, trainer, control, metrics, score):
            print(trainer.epoch, score)
"""

from __future__ import annotations

from dataclasses import dataclass

EVENTS = (
    "on_fit_start",          # (trainer, control)
    "on_initial_validation_end",  # (trainer, control, metrics, score)   epoch -1: the untrained model
    "on_epoch_start",        # (trainer, control)
    "on_train_batch",        # (trainer, control, batch)   a training batch's loss is computed (0-based index)
    "on_train_epoch_end",    # (trainer, control, losses)
    "on_validation_end",     # (trainer, control, metrics, score)
    "on_checkpoint_saved",   # (trainer, control, path, kind)   kind: "best" | "last"
    "on_epoch_end",          # (trainer, control)
    "on_fit_end",            # (trainer, control)
    "on_test_end",           # (trainer, control, metrics)      after CustomTrainer.test
    "on_exception",          # (trainer, control, exception)
)


def total_loss(losses):
    """An epoch's loss: RecBole gives a float, or a tuple of parts for multi-part losses (pure)."""
    return sum(losses) if isinstance(losses, tuple) else losses


@dataclass
class TrainerControl:
    """Requests from callbacks; the trainer acts on them and resets `should_save`.

    `failure`: a reason to end the run as failed (the trainer raises TrainingFailed with it
    right after the event that set it).
    """

    should_stop: bool = False
    should_save: bool = False
    failure: str | None = None
    pruned: str | None = None  # a search pruner's reason: the run stops, untested, as `pruned`


class Callback:
    """Base class: every event is a no-op; `state_dict` travels in last.pth."""

    order = 0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def _check_event_names(callback) -> None:
    for name in dir(type(callback)):
        if name.startswith("on_") and name not in EVENTS:
            raise ValueError(
                f"{type(callback).__name__}.{name} is not a trainer event; events are: {', '.join(EVENTS)}"
            )


class CallbackHandler:
    def __init__(self, callbacks=()):
        for callback in callbacks:
            _check_event_names(callback)
        self.callbacks = sorted(callbacks, key=lambda cb: getattr(cb, "order", 0))
        # each event's methods, found once: on_train_batch runs for every batch
        self._methods = {event: [getattr(cb, event) for cb in self.callbacks if hasattr(cb, event)] for event in EVENTS}

    def __iter__(self):
        return iter(self.callbacks)

    def call(self, event: str, trainer, control: TrainerControl, **kwargs) -> None:
        methods = self._methods.get(event)
        if methods is None:
            raise ValueError(f"unknown trainer event {event!r}; events are: {', '.join(EVENTS)}")
        for method in methods:
            method(trainer, control, **kwargs)

    def _key(self, index: int, callback) -> str:
        return f"{index}:{type(callback).__name__}"

    def state_dict(self) -> dict:
        return {self._key(i, cb): cb.state_dict() for i, cb in enumerate(self.callbacks)
                if hasattr(cb, "state_dict")}

    def load_state_dict(self, states: dict) -> None:
        for i, cb in enumerate(self.callbacks):
            key = self._key(i, cb)
            if key in states and hasattr(cb, "load_state_dict"):
                cb.load_state_dict(states[key])
