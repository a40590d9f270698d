"""Events around CustomTrainer.fit, the callbacks that listen to them, and their requests.

A callback subclasses `Callback` and overrides any of its `on_*` events (each is a documented
no-op here). Every event gets `loop`, a read-only `LoopView` of the training state and the facts
of this fit (callbacks/loop.py), never the trainer, and `control`, through which it *requests*
actions (stop, save, fail); the trainer carries them out at one fixed point of the loop.
Callbacks run in ascending `order`. A method named `on_<something>` that is not an event is an error at
registration, so a misspelled event never silently stays quiet.

    class PrintBest(Callback):
        def on_validation_end(self, loop, control, metrics, score):
            print(loop.epoch, score)

A callback with state (EarlyStopping's patience count, the LR schedule) returns it from
`state_dict`; last.pth keeps it under the callback's `state_key`, so a resume finds it by name,
whatever other callbacks the resumed run has or in which order.
"""

from __future__ import annotations

from dataclasses import dataclass

EVENTS = (
    "on_fit_start", "on_initial_validation_end", "on_epoch_start", "on_train_batch", "on_train_log", "on_train_epoch_end",
    "on_validation_end", "on_checkpoint_saved", "on_epoch_end", "on_fit_end", "on_test_end", "on_exception",
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
    """Base class: every event is a no-op; `state_dict` travels in last.pth under `state_key`."""

    order = 0

    @property
    def state_key(self) -> str:
        """The name this callback's state is saved under: its class, plus what tells two instances
        apart where a class can be used twice (override it then, as Lightning's callbacks do)."""
        return type(self).__qualname__

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    # ---------------------------------------------------------------- events, in the loop's order
    def on_fit_start(self, loop, control):
        """fit begins: the state is restored (a resumed run) and nothing is trained yet."""

    def on_initial_validation_end(self, loop, control, metrics, score):
        """Epoch -1: the untrained model's validation `metrics` and `score` (a fresh run only)."""

    def on_epoch_start(self, loop, control):
        """Before epoch `loop.epoch` trains (after a trainer family's `epoch_start`)."""

    def on_train_batch(self, loop, control, batch):
        """A training batch's loss is computed (`batch`: its 0-based index in the epoch)."""

    def on_train_log(self, loop, control, loss, lr):
        """Every `log_every_steps` optimizer steps: the mean batch `loss` since the last one, and `lr`
        (the step is `loop.global_step`)."""

    def on_train_epoch_end(self, loop, control, losses):
        """The epoch's training ended; `losses`: its loss (a float, or a tuple of parts)."""

    def on_validation_end(self, loop, control, metrics, score):
        """A validation ended; best.pth is already saved if it improved. With `eval_every_steps` it
        may fall within an epoch: `loop.global_step` is its step, `loop.epoch` the epoch training."""

    def on_checkpoint_saved(self, loop, control, path, kind):
        """A checkpoint was written whole at `path`; `kind`: "best" or "last"."""

    def on_epoch_end(self, loop, control):
        """The epoch is over: a stop or save requested by now is carried out right after."""

    def on_fit_end(self, loop, control):
        """fit returns (training stopped early or reached `epochs`)."""

    def on_test_end(self, loop, control, metrics):
        """CustomTrainer.test scored the test set with best.pth: its `metrics`."""

    def on_exception(self, loop, control, exception):
        """An exception (a stop included) is leaving fit; it propagates after this event."""


def _check_event_names(callback) -> None:
    for name in dir(type(callback)):
        if name.startswith("on_") and name not in EVENTS:
            raise ValueError(
                f"{type(callback).__name__}.{name} is not a trainer event; events are: {', '.join(EVENTS)}"
            )


def _listens(callback, event: str) -> bool:
    """Whether `callback` does something at `event` (the base class's no-ops are skipped)."""
    method = getattr(type(callback), event, None)
    return method is not None and method is not getattr(Callback, event)


def _state_key(callback) -> str:
    return getattr(callback, "state_key", type(callback).__qualname__)


class CallbackHandler:
    def __init__(self, callbacks=()):
        for callback in callbacks:
            _check_event_names(callback)
        self.callbacks = sorted(callbacks, key=lambda cb: getattr(cb, "order", 0))
        keys = [_state_key(cb) for cb in self.callbacks if hasattr(cb, "state_dict")]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            raise ValueError(f"two callbacks save their state as {', '.join(twice)}; give each its own state_key")
        # each event's methods, found once: on_train_batch runs for every batch
        self._methods = {event: [getattr(cb, event) for cb in self.callbacks if _listens(cb, event)]
                         for event in EVENTS}

    def __iter__(self):
        return iter(self.callbacks)

    def call(self, event: str, loop, control: TrainerControl, **kwargs) -> None:
        methods = self._methods.get(event)
        if methods is None:
            raise ValueError(f"unknown trainer event {event!r}; events are: {', '.join(EVENTS)}")
        for method in methods:
            method(loop, control, **kwargs)

    def state_dict(self) -> dict:
        return {_state_key(cb): cb.state_dict() for cb in self.callbacks if hasattr(cb, "state_dict")}

    def load_state_dict(self, states: dict) -> None:
        for i, cb in enumerate(self.callbacks):
            if not hasattr(cb, "load_state_dict"):
                continue
            key = _state_key(cb)
            legacy = f"{i}:{type(cb).__name__}"  # last.pth of recrunner before state keys: by position
            if key in states:
                cb.load_state_dict(states[key])
            elif legacy in states:
                cb.load_state_dict(states[legacy])
