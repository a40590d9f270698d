"""recrunner: run RecBole experiments with an exact loop, full TensorBoard, checkpoints and resume.

The public names below are imported on first use (PEP 562), so that `recrunner.cli` can start a
sweep's worker server before torch and RecBole are imported (about 3 s).
"""

from .lazy import exports

__version__ = "0.1.0"

_PUBLIC = {
    "CheckpointError": "errors", "ConfigError": "errors", "DatasetNotFoundError": "errors",
    "RecrunnerError": "errors", "RunInterrupted": "errors",
    "Experiment": "experiment", "RunResult": "experiment", "Workspace": "experiment", "prepare": "experiment",
    "run_experiment": "experiment",
    "CustomTrainer": "trainer",
    "Callback": "callbacks", "TrainerControl": "callbacks",
}
__all__ = sorted(_PUBLIC)


__getattr__ = exports(__name__, _PUBLIC)


def __dir__():
    return sorted(list(globals()) + __all__)
