"""What CustomTrainer prints and writes to TensorBoard: log lines and the run's scalar tags.

Tags (docs/design.md: The loop): `Train/Loss` (`Train/Loss_<i>` for the parts of a tuple loss),
`Train/LR`, `Valid/<metric>` and `Valid/score` (step -1 included), `Best_Valid/<metric>`,
`Best_Valid/score`, `Test/<metric>`, and the hparams row. RecBole's own method names are kept
(`_add_train_loss_to_tensorboard`, `_add_hparam_to_tensorboard`) so its trainers' code calls these.
"""

from __future__ import annotations

from recbole.utils import dict2str, set_color

from . import tags


class TrainerOutput:
    """Mixed into CustomTrainer before RecBole's Trainer (whose TensorBoard methods it replaces)."""

    def _log_stop(self, verbose):
        if verbose:
            self.logger.info(f"Finished training, best eval result in epoch {self.best_epoch}")

    def _log_start(self, validating=True):
        config = self.config
        parameters = getattr(self.model, "parameters", None)  # a booster (recrunner.trees) has none
        n_params = sum(p.numel() for p in parameters() if p.requires_grad) if parameters else 0
        where = (f"resuming at epoch {self.start_epoch}" if self.start_epoch else "starting at epoch 0")
        where = "already finished, nothing to train" if self.start_epoch >= self.epochs else where
        accumulate = f" x{self.accumulation_steps} accumulated" if self.accumulation_steps > 1 else ""
        self.logger.info(
            f"{config['model']} on {config['dataset']}: {n_params:,} trainable parameters, device {self.device}, "
            f"{config['learner']} learning_rate {config['learning_rate']}, batch {config['train_batch_size']}{accumulate}, "
            f"{self.epochs} epochs, " + (f"validation every {self.eval_step}" if validating else "no validation")
            + f"; {where}"
        )
        self.logger.info("callbacks: " + ", ".join(type(cb).__name__ for cb in self.callbacks))

    def _log_end(self, seconds, validating=True):
        if not validating:
            self.logger.info(f"training took {seconds:.1f}s (no validation: best.pth holds the newest weights)")
        elif self.best_epoch is None:
            self.logger.info(f"training took {seconds:.1f}s; no validation improved on the start")
        else:
            self.logger.info(f"training took {seconds:.1f}s; best epoch {self.best_epoch} with "
                             f"{self.config['valid_metric'].lower()} {self.best_valid_score:.4f}")

    def _add_hparam_to_tensorboard(self, best_valid_score):
        """The hparams row, in this run's own event file; the run's status is added at its end."""
        metrics = dict(self.best_valid_result or {})
        best_step = self.best_epoch if self.best_epoch is not None else -1
        self._write_scalars(tags.validation(metrics, best_valid_score, prefix="Best_Valid"), best_step)
        self.tensorboard.add_hparams(self.hparams, tags.hparam_metrics(metrics) or ["Best_Valid/score"])

    def _write_scalars(self, scalars: dict, step: int):
        for tag, value in scalars.items():
            self.tensorboard.add_scalar(tag, value, step)

    def _log_metrics_to_tensorboard(self, result, epoch, prefix="Valid"):
        """RecBole's name: every metric of `result` under `prefix` (tags.validation, tags.test)."""
        self._write_scalars(tags.test(result) if prefix == "Test" else tags.validation(result, prefix=prefix), epoch)

    def _add_train_loss_to_tensorboard(self, epoch_idx, losses, tag="Train/Loss"):
        """RecBole's name: the epoch's loss and its parts (tags.train)."""
        self._write_scalars(tags.train(losses), epoch_idx)

    def _log_validation(self, epoch_idx, seconds, score, result):
        self.logger.info(
            set_color(f"epoch {epoch_idx} evaluating", "green") + " [" + set_color("time", "blue")
            + f": {seconds:.2f}s, " + set_color("valid_score", "blue") + f": {score:f}]"
        )
        self.logger.info(set_color("valid result", "blue") + ": \n" + dict2str(result))
