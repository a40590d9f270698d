"""RecBole's Trainer.__init__ opens loggers of its own: a TensorBoard writer and a W&B logger.

| RecBole 1.2.1                                               | recrunner                          |
|-------------------------------------------------------------|------------------------------------|
| `Trainer.__init__` calls `get_tensorboard(logger)`: a       | `recbole_loggers`: it gets the     |
| cwd-relative log_tensorboard/ folder named after the first  | run's RunWriter instead            |
| log file, shared by every later run of the process          |                                    |
| `Trainer.__init__` makes `WandbLogger(config)`, which       | `recbole_loggers`: a silent one;   |
| `wandb.init`s when `log_wandb` is set; `fit` and `evaluate` | W&B is written by one path, the    |
| log train/valid/eval metrics through it                     | WandbLogger callback (`log_wandb:  |
|                                                             | true` or `trackers: [wandb]`)      |
"""

from __future__ import annotations

import contextlib


class SilentWandb:
    """What RecBole's trainer calls on its W&B logger, doing nothing."""

    enabled = False

    def __init__(self, config=None):
        pass

    def log_metrics(self, *args, **kwargs):
        pass

    def log_eval_metrics(self, *args, **kwargs):
        pass


@contextlib.contextmanager
def recbole_loggers(writer):
    """Make RecBole's Trainer.__init__ take `writer` instead of opening a cwd-relative one, and a
    silent W&B logger instead of its own."""
    import recbole.trainer.trainer as trainer_module

    original = trainer_module.get_tensorboard, trainer_module.WandbLogger
    trainer_module.get_tensorboard = lambda logger: writer
    trainer_module.WandbLogger = SilentWandb
    try:
        yield
    finally:
        trainer_module.get_tensorboard, trainer_module.WandbLogger = original
