"""recrunner: run RecBole experiments with an exact loop, full TensorBoard, checkpoints and resume.

The package is layered; each sub-package imports only those before it (tests/test_layers.py):

    core      errors, stops, files written whole, every path of the output tree (layout)
    config    parameter layers, the run's identity, checks before torch and RecBole are imported
    seams     every place recrunner changes RecBole's behaviour from outside
    data      atomic files, the shared data cache, sequential datasets
    training  the loop (CustomTrainer.fit), its state, checkpoints, callbacks, trainer families
    run       one experiment end to end, its folder and its record (metrics.json)
    report    tables, significance tests and charts over run records
    sweep     grids of cells, their crash-safe record, workers and executors, results tables
    search    Optuna studies that ask the sweep for trials
    cli       the command line: parses, calls the above, prints

The public names below are imported on first use (PEP 562), so that `recrunner.cli` can start a
sweep's worker server before torch and RecBole are imported (about 3 s).
"""

from .core.lazy import exports

__version__ = "0.1.0"

_PUBLIC = {
    "CheckpointError": "core.errors", "ConfigError": "core.errors", "DatasetNotFoundError": "core.errors",
    "RecrunnerError": "core.errors", "RunInterrupted": "core.errors",
    "Experiment": "run.experiment", "RunResult": "run.result", "Workspace": "run.experiment",
    "prepare": "run.experiment", "run_experiment": "run.experiment",
    "CustomTrainer": "training.loop.trainer",
    "Callback": "training.callbacks", "TrainerControl": "training.callbacks",
}
__all__ = sorted(_PUBLIC)


__getattr__ = exports(__name__, _PUBLIC)


def __dir__():
    return sorted(list(globals()) + __all__)
