"""Callbacks: the event system (base) and the built-in ones every run gets from its config.

    from recrunner.training.callbacks import Callback

    class PrintBest(Callback):
        def on_validation_end(self, loop, control, metrics, score):
            print(loop.epoch, score, loop.best_epoch)

Built-ins (each in its own module): EarlyStopping, NonFiniteGuard, ProgressBar, LRScheduler,
HistoryWriter, TensorBoardLogger (every run), WandbLogger, MLflowLogger. `default_callbacks(config)`
builds those the config asks for.
"""

from .base import EVENTS, Callback, CallbackHandler, TrainerControl
from .loop import LoopView
from .defaults import default_callbacks, with_defaults
from .early_stopping import EarlyStopping, improved, metric_bigger
from .guard import NonFiniteGuard
from .history import HistoryWriter
from .lr_schedule import LRScheduler, lr_multiplier
from .progress import ProgressBar
from .trackers import MetricLogger, MLflowLogger, TensorBoardLogger, WandbLogger

__all__ = [
    "EVENTS", "Callback", "CallbackHandler", "LoopView", "EarlyStopping", "HistoryWriter", "LRScheduler", "MetricLogger",
    "MLflowLogger", "NonFiniteGuard", "ProgressBar", "TensorBoardLogger", "TrainerControl", "WandbLogger", "default_callbacks", "improved",
    "lr_multiplier", "metric_bigger", "with_defaults",
]
