"""Every error recrunner raises on purpose.

    RecrunnerError            base; `exit_code` is what the CLI returns
    +-- ConfigError           bad input: unknown model or key, wrong type, malformed YAML (exit 2)
    |   +-- DatasetNotFoundError
    |   +-- EnvironmentProblem  an installed dependency RecBole 1.2.1 cannot work with
    +-- CheckpointError       a checkpoint that cannot be read or written
    +-- TrainingFailed        a callback ended the run (a non-finite loss or score, ...)
    +-- RunInterrupted        SIGTERM / Ctrl-C during a run (exit 130)

Messages are one line and say what to do; the CLI prints them without a traceback.
"""


class RecrunnerError(Exception):
    exit_code = 1


class ConfigError(RecrunnerError):
    exit_code = 2


class DatasetNotFoundError(ConfigError):
    pass


class EnvironmentProblem(ConfigError):
    pass


class CheckpointError(RecrunnerError):
    pass


class TrainingFailed(RecrunnerError):
    pass


class RunInterrupted(RecrunnerError):
    exit_code = 130


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, how a failed run's reason is recorded (pure)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
