"""Every error recrunner raises on purpose.

    RecrunnerError            base; `exit_code` is what the CLI returns
    +-- ConfigError           bad input: unknown model or key, wrong type, malformed YAML (exit 2)
    |   +-- DatasetNotFoundError
    |   +-- DataError           a dataset's files RecBole cannot read, or nothing left after filtering
    |   +-- EnvironmentProblem  an installed dependency RecBole 1.2.1 cannot work with
    +-- CheckpointError       a checkpoint that cannot be read or written
    +-- TrainingFailed        a callback ended the run (a non-finite loss or score, ...)

    KeyboardInterrupt
    +-- RunInterrupted        SIGTERM during a run (exit 130, as Ctrl-C): recrunner.core.interrupts

Messages are one line and say what to do; the CLI prints them without a traceback.
"""

import errno


class RecrunnerError(Exception):
    exit_code = 1


class ConfigError(RecrunnerError):
    exit_code = 2


class DatasetNotFoundError(ConfigError):
    pass


class DataError(ConfigError):
    pass


class EnvironmentProblem(ConfigError):
    pass


class CheckpointError(RecrunnerError):
    pass


class TrainingFailed(RecrunnerError):
    pass


class RunInterrupted(KeyboardInterrupt):
    """A stop from outside, not an error: like Ctrl-C's KeyboardInterrupt, no `except Exception`
    (recrunner's, RecBole's, a library's) catches it and records the run as failed."""

    exit_code = 130


def is_usage_error(reason: str | None) -> bool:
    """Whether a recorded failure reason (`one_line`'s `Type: message`) is bad input, exit 2 (pure)."""
    names = {cls.__name__ for cls in (ConfigError, *_subclasses(ConfigError))}
    return bool(reason) and reason.split(":", 1)[0] in names


def _subclasses(cls) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, how a failed run's reason is recorded (pure)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def failure_reason(exc: BaseException) -> str:
    """`one_line(exc)`, with what to do when the machine rather than the run failed (pure)."""
    text = one_line(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"{text}; free disk space, then run the same command again: it resumes from last.pth"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return f"{text}; lower train_batch_size or eval_batch_size (or the model's size), then run the same command again"
    return text
