"""How a run is stopped from outside: SIGTERM and Ctrl-C raise RunInterrupted / KeyboardInterrupt.

Both derive from BaseException, not Exception, so no `except Exception` on the way (recrunner's,
RecBole's, a library's) turns a stop into a failure; the run records `interrupted` and the same
command resumes it from last.pth. `deferred()` holds a stop back while a run writes its record,
so a run's metrics.json is never left half-finished by a signal; `HeldStops` holds one back while a
training batch runs, so the trainer saves at the end of its step before it stops.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from .errors import RunInterrupted

_STOPS = (signal.SIGTERM, signal.SIGINT)


def raise_interrupt(signum, frame):
    raise RunInterrupted(f"received {signal.Signals(signum).name}")


@contextmanager
def sigterm_interrupts():
    """Inside: SIGTERM raises RunInterrupted (the CLI, a sweep, a worker); the old handler after."""
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred():
    """A SIGTERM or SIGINT that arrives inside is handled, by the handler it would have met, at the end.

    Outside the main thread (where Python runs no signal handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    handlers = {sig: signal.getsignal(sig) for sig in _STOPS}
    for sig, handler in handlers.items():
        if callable(handler):
            signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if callable(handler):
                signal.signal(sig, handler)
        if pending:
            handlers[pending[0]](pending[0], None)


class HeldStops:
    """SIGINT and SIGTERM held while batches train, handled at the next step boundary (`pending`);
    a second signal meets the handler it would have met at once. Outside the main thread: inert."""

    def __init__(self):
        self.pending: int | None = None
        self._handlers: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._handlers = {sig: signal.getsignal(sig) for sig in _STOPS}
            self._hold()
        return self

    def __exit__(self, exc_type, *exc):
        self._release()
        if self.pending is not None and exc_type is None:  # never dropped: met once the hold ends
            self.stop_now()

    def _hold(self):
        for sig, handler in self._handlers.items():
            if callable(handler):
                signal.signal(sig, self._record)

    def _release(self):
        for sig, handler in self._handlers.items():
            if callable(handler):
                signal.signal(sig, handler)

    def _record(self, signum, frame):
        if self.pending is not None:
            self._handlers[signum](signum, frame)
        self.pending = signum

    @contextmanager
    def released(self):
        """Stops act at once inside (a validation is not a step to finish)."""
        self._release()
        try:
            yield
        finally:
            self._hold()

    def stop_now(self):
        """Meet the held signal's own handler (it raises KeyboardInterrupt or RunInterrupted)."""
        signum, self.pending = self.pending, None
        self._release()
        if signum is None:  # another process of a data-parallel run was stopped (training.steps)
            raise KeyboardInterrupt
        self._handlers[signum](signum, None)
