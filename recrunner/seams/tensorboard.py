"""RecBole's Trainer.__init__ opens a TensorBoard writer of its own.

| RecBole 1.2.1                                               | recrunner                          |
|-------------------------------------------------------------|------------------------------------|
| `Trainer.__init__` calls `get_tensorboard(logger)`: a       | `recbole_tensorboard_writer`: it   |
| cwd-relative log_tensorboard/ folder named after the first  | gets the run's RunWriter instead   |
| log file, shared by every later run of the process          |                                    |
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def recbole_tensorboard_writer(writer):
    """Make RecBole's Trainer.__init__ take `writer` instead of opening a cwd-relative one."""
    import recbole.trainer.trainer as trainer_module

    original = trainer_module.get_tensorboard
    trainer_module.get_tensorboard = lambda logger: writer
    try:
        yield
    finally:
        trainer_module.get_tensorboard = original
