"""ProgressBar: one tqdm bar over epochs with the loss and the current score.

Shown only when the stream is a terminal, so run.log, CI logs and sweeps stay clean. While it
is open, log lines to the console are routed through tqdm so they do not break the bar.
RecBole's own bars over batches appear under it when `show_progress` is on.
"""

from __future__ import annotations

import contextlib
import sys

from .base import Callback, total_loss


class ProgressBar(Callback):
    order = 100  # after every callback that changes what it shows

    def __init__(self, stream=None):
        self.stream = stream
        self.bar = None
        self.shown: dict = {}
        self._redirect = contextlib.ExitStack()

    def _stream(self):
        return self.stream if self.stream is not None else sys.stderr

    def on_fit_start(self, trainer, control):
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        stream = self._stream()
        if not stream.isatty():
            return
        self.bar = tqdm(total=trainer.epochs, initial=trainer.start_epoch, unit="epoch", file=stream,
                        desc=f"{trainer.config['model']} on {trainer.config['dataset']}", dynamic_ncols=True)
        self._redirect.enter_context(logging_redirect_tqdm())

    def on_train_epoch_end(self, trainer, control, losses):
        if self.bar is not None:
            self.bar.set_postfix(self._postfix(trainer, loss=f"{total_loss(losses):.4g}"), refresh=False)

    def on_validation_end(self, trainer, control, metrics, score):
        if self.bar is not None:
            self.bar.set_postfix(self._postfix(trainer, score=f"{score:.4f}"), refresh=False)

    def on_epoch_end(self, trainer, control):
        if self.bar is not None:
            self.bar.update(1)

    def on_fit_end(self, trainer, control):
        self._close()

    def on_exception(self, trainer, control, exception):
        self._close()

    def _postfix(self, trainer, **new):
        self.shown.update(new)
        if trainer.best_epoch is not None:
            self.shown["best_epoch"] = trainer.best_epoch
        return self.shown

    def _close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.shown: dict = {}
        self._redirect.close()
