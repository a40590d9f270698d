"""ProgressBar: where a run is, within each epoch, with the time left for the epoch and the run.

On a terminal: one line that updates (tqdm), reset at every epoch:

    SASRec on ml-100k epoch 3/300:  41%|████      | 160/388 [00:52<01:14, 3.07batch/s, loss=7.9, score=0.061, best=2, run left≤5h01m]

Elsewhere (a log file, CI, a sweep's worker): a log line at most every `every` seconds while an
epoch trains, so a long epoch is never silent and a short one adds nothing:

    epoch 3/300: batch 160/388 (41%), 3.07 batch/s, epoch left 1m14s, run left ≤5h01m

With `eval_every_steps` (docs/long-epochs.md) the line also has the optimizer step and the time to
the next validation: `epoch 3/300: batch 160/388 (41%), step 1324, 3.07 batch/s, epoch left 1m14s,
next validation in 25s, run left ≤5h01m`.

"run left" is the mean time of the epochs trained so far (validation included) times the epochs
still allowed; early stopping can only make it shorter. Console log lines go through tqdm while
the bar is open, so they do not break it. RecBole's numbers are untouched: this only observes.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time

from .base import Callback, total_loss

logger = logging.getLogger("recrunner")


def duration(seconds: float) -> str:
    """`45s`, `3m07s`, `5h01m` (pure)."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def run_left(epoch_seconds: list[float], epochs_left: int) -> float | None:
    """Seconds the rest of the run takes at the mean pace so far; None before an epoch is done (pure)."""
    if not epoch_seconds:
        return None
    return sum(epoch_seconds) / len(epoch_seconds) * max(epochs_left, 0)


def progress_line(epoch: int, epochs: int, done: int, total: int, seconds: float, run_seconds: float | None,
                  *, trained: int | None = None, step: int | None = None, next_validation: int | None = None) -> str:
    """The log line of a training epoch in progress (pure). `trained`: batches this process trained
    of the `done` (fewer after a resume within the epoch); `step`: the optimizer step, shown with
    the batches to `next_validation` (eval_every_steps) as a time at this pace."""
    trained = done if trained is None else trained
    rate = trained / seconds if seconds > 0 else 0.0
    parts = [f"epoch {epoch}/{epochs}: batch {done}/{total} ({100 * done // max(total, 1)}%)", f"{rate:.2f} batch/s"]
    if step is not None:
        parts.insert(1, f"step {step}")
    if rate > 0:
        parts.append(f"epoch left {duration((total - done) / rate)}")
    if rate > 0 and next_validation is not None:
        parts.append(f"next validation in {duration(next_validation / rate)}")
    if run_seconds is not None:
        parts.append(f"run left ≤{duration(run_seconds)}")
    return ", ".join(parts)


def _steps(loop) -> dict:
    """The step and the batches to the next step validation, where the run validates by steps."""
    every = getattr(loop, "eval_every_steps", None)
    if every is None:
        return {}
    per_step = (loop.batches_per_epoch or 1) / max(loop.steps_per_epoch or 1, 1)
    return {"step": loop.global_step, "next_validation": round((every - loop.global_step % every) * per_step)}


class ProgressBar(Callback):
    order = 100  # after every callback that changes what it shows

    def __init__(self, stream=None, every: float = 60.0):
        self.stream, self.every = stream, float(every)
        self.bar = None
        self.shown: dict = {}
        self._redirect = contextlib.ExitStack()
        self._epoch_seconds: list[float] = []
        self._epoch_started = self._last_line = 0.0
        self._done, self._first = 0, None

    def on_fit_start(self, loop, control):
        stream = self.stream if self.stream is not None else sys.stderr
        self._epoch_seconds = []
        if getattr(stream, "isatty", lambda: False)():
            from tqdm.auto import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self.bar = tqdm(total=loop.batches_per_epoch or None, unit="batch", file=stream, dynamic_ncols=True,
                            leave=False, mininterval=0.5,
                            desc=f"{loop.config['model']} on {loop.config['dataset']}")
            self._redirect.enter_context(logging_redirect_tqdm())

    def on_epoch_start(self, loop, control):
        self._epoch_started = self._last_line = time.perf_counter()
        self._done, self._first = 0, None
        if self.bar is not None:
            self.bar.reset(total=loop.batches_per_epoch or None)
            self.bar.set_description(f"{loop.config['model']} on {loop.config['dataset']} "
                                     f"epoch {loop.epoch}/{loop.epochs}", refresh=False)

    def on_train_batch(self, loop, control, batch):
        self._done = batch + 1
        self._first = batch if self._first is None else self._first
        if self.bar is not None:
            self.bar.update(self._done - self.bar.n)
            return
        now = time.perf_counter()
        if now - self._last_line >= self.every:
            self._last_line = now
            left = run_left(self._epoch_seconds, loop.epochs - loop.epoch - 1)
            logger.info(progress_line(loop.epoch, loop.epochs, self._done, loop.batches_per_epoch or 0,
                                      now - self._epoch_started, left, trained=self._done - self._first,
                                      **_steps(loop)))

    def on_train_epoch_end(self, loop, control, losses):
        self._postfix(loss=f"{total_loss(losses):.4g}")

    def on_validation_end(self, loop, control, metrics, score):
        if getattr(loop, "eval_every_steps", None) is None:
            self._postfix(score=f"{score:.4g}", best=loop.best_epoch)
        else:  # validation by steps: where it was, and the best step
            self._postfix(step=loop.global_step, score=f"{score:.4g}", best=f"step {loop.best_step}")

    def on_epoch_end(self, loop, control):
        self._epoch_seconds.append(time.perf_counter() - self._epoch_started)
        left = run_left(self._epoch_seconds, loop.epochs - loop.epoch - 1)
        if left is not None:
            self._postfix(**{"run left": f"≤{duration(left)}"})
        if self.bar is not None:
            self.bar.refresh()  # the epoch's end, whatever the redraw interval skipped

    def on_fit_end(self, loop, control):
        self._close()

    def on_exception(self, loop, control, exception):
        self._close()

    def _postfix(self, **new):
        self.shown.update(new)
        if self.bar is not None:
            self.bar.set_postfix(self.shown, refresh=False)

    def _close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.shown = {}
        self._redirect.close()
