"""What a trainer prints to its log: the start, each validation, the stop and the end.

TensorBoard and the trackers are callbacks (recrunner.training.callbacks.trackers), fed by the loop's events.
"""

from __future__ import annotations

from recbole.utils import dict2str, set_color


def log_start(trainer, validating=True):
    config = trainer.config
    parameters = getattr(trainer.model, "parameters", None)  # a booster (recrunner.training.families.trees) has none
    n_params = sum(p.numel() for p in parameters() if p.requires_grad) if parameters else 0
    where = f"resuming at epoch {trainer.start_epoch}" if trainer.start_epoch else "starting at epoch 0"
    where = "already finished, nothing to train" if trainer.start_epoch >= trainer.epochs else where
    accumulate = f" x{trainer.accumulation_steps} accumulated" if trainer.accumulation_steps > 1 else ""
    reads = trainer.steps.losses.every
    accumulate += f", losses read every {reads} batches" if reads > 1 else ""  # loop/losses.py
    trainer.logger.info(
        f"{config['model']} on {config['dataset']}: {n_params:,} trainable parameters, device {trainer.device}, "
        f"{config['learner']} learning_rate {config['learning_rate']}, batch {config['train_batch_size']}{accumulate}, "
        f"{trainer.epochs} epoch{'' if trainer.epochs == 1 else 's'}, "
        + (f"validation every {trainer.eval_step}" if validating else "no validation") + f"; {where}"
    )
    trainer.logger.info("callbacks: " + ", ".join(type(cb).__name__ for cb in trainer.callbacks))


def non_finite_line(epoch_idx: int, exc, every: int) -> str:
    """The warning for an epoch ended by a non-finite batch loss (`exc`: a NonFiniteLoss) (pure)."""
    line = f"epoch {epoch_idx} stopped at batch {exc.batch}: the loss is {exc}"
    if exc.read_at > exc.batch:  # read later (loop/losses.py): the batches between have trained
        after = f"batch {exc.read_at}" if exc.read_at == exc.batch + 1 else f"batches {exc.batch + 1}-{exc.read_at}"
        line += (f" (read at batch {exc.read_at}: losses are read every {every} batches here, read_loss_every; "
                 f"{after} trained on)")
    return line


def log_stop(trainer):
    trainer.logger.info(f"Finished training, best eval result in epoch {trainer.best_epoch}")


def log_end(trainer, seconds, validating=True):
    if not validating:
        trainer.logger.info(f"training took {seconds:.1f}s (no validation: best.pth holds the newest weights)")
    elif trainer.best_epoch is None:
        trainer.logger.info(f"training took {seconds:.1f}s; no validation improved on the start")
    else:
        trainer.logger.info(f"training took {seconds:.1f}s; best epoch {trainer.best_epoch} with "
                            f"{trainer.config['valid_metric'].lower()} {trainer.best_valid_score:.4f}")


def log_validation(logger, epoch_idx, seconds, score, result):
    logger.info(set_color(f"epoch {epoch_idx} evaluating", "green") + " [" + set_color("time", "blue")
                + f": {seconds:.2f}s, " + set_color("valid_score", "blue") + f": {score:f}]")
    logger.info(set_color("valid result", "blue") + ": \n" + dict2str(result))
