"""How a run is stopped from outside: SIGTERM and Ctrl-C raise RunInterrupted / KeyboardInterrupt.

Both derive from BaseException, not Exception, so no `except Exception` on the way (recrunner's,
RecBole's, a library's) turns a stop into a failure; the run records `interrupted` and the same
command resumes it from last.pth. `deferred()` holds a stop back while a run writes its record,
so a run's metrics.json is never left half-finished by a signal.
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
