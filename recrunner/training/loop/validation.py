"""Validation in the loop: epoch -1, and each validation's best-epoch bookkeeping.

`initial` scores the untrained model before any training (a baseline for every curve) and leaves
every RNG as it found it, so it never changes what is trained. `validate_and_track` scores the
model, tracks the best epoch by `valid_metric` (ties improve, as RecBole's `early_stopping`: the
pure rule is callbacks/early_stopping.py's `track`) and saves best.pth on a new best; whether to
stop is the EarlyStopping callback's request, which the trainer carries out.
"""

from __future__ import annotations

from time import time

from ...core.errors import one_line
from ..callbacks.early_stopping import Best, track
from ..checkpoints import rng
from . import device, output
from .context import FitCall


def initial(trainer, valid_data, verbose, show_progress) -> None:
    """Epoch -1: the untrained model's metrics; a model that cannot predict yet says so in one warning."""
    start = time()
    try:
        with rng.preserved(trainer._generators):
            score, result = trainer._valid_epoch(valid_data, show_progress=show_progress)
    except Exception as exc:  # e.g. Pop cannot score anything before it has counted items
        trainer.logger.warning(f"no epoch -1 validation: {trainer.config['model']} cannot predict before training "
                               f"({one_line(exc)[:200]})")
        return
    device.release(trainer.device)  # RecBole's torch.cuda.empty_cache() after a validation
    trainer.train_seconds += time() - start  # the run's training time includes its epoch -1
    trainer.initial_valid_result = dict(result)
    if verbose:
        output.log_validation(trainer.logger, -1, time() - start, score, result)
    trainer._call("on_initial_validation_end", metrics=trainer.initial_valid_result, score=score)


def validate_and_track(trainer, epoch_idx, call: FitCall) -> None:
    """One validation: its metrics logged and sent to the callbacks; a new best saves best.pth."""
    start = time()
    valid_score, valid_result = trainer._valid_epoch(call.valid_data, show_progress=call.show_progress)
    device.release(trainer.device)
    before = Best(None if trainer.best_epoch is None else trainer.best_valid_score, trainer.best_epoch, trainer.cur_step)
    trainer.cur_step = track(before, valid_score, epoch_idx, bigger=trainer.valid_metric_bigger).since  # RecBole's counter
    trainer.state.validated_step = trainer.state.global_step
    if call.verbose:
        output.log_validation(trainer.logger, epoch_idx, time() - start, valid_score, valid_result)
    if trainer.cur_step == 0:  # a new best
        trainer.best_valid_score, trainer.best_epoch, trainer.best_valid_result = valid_score, epoch_idx, valid_result
        trainer.state.best_step = trainer.state.global_step
        if call.saved:
            trainer.checkpoints.save_best(epoch_idx, call.verbose)
    trainer._call("on_validation_end", metrics=valid_result, score=valid_score)
    if call.callback_fn:
        call.callback_fn(epoch_idx, valid_score)
