"""What CustomTrainer prints and writes to TensorBoard: log lines and the run's scalar tags.

Tags (docs/design.md: The loop): `Train/Loss` (`Train/Loss_<i>` for the parts of a tuple loss),
`Train/LR`, `Valid/<metric>` and `Valid/score` (step -1 included), `Best_Valid/<metric>`,
`Best_Valid/score`, `Test/<metric>`, and the hparams row. RecBole's own method names are kept
(`_add_train_loss_to_tensorboard`, `_add_hparam_to_tensorboard`) so its trainers' code calls these.
"""

from __future__ import annotations

import math

from recbole.utils import dict2str, set_color


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
        self._log_metrics_to_tensorboard(metrics, best_step, prefix="Best_Valid")
        if best_valid_score is not None and math.isfinite(best_valid_score):
            self.tensorboard.add_scalar("Best_Valid/score", best_valid_score, best_step)
        tags = [f"Best_Valid/{m}" for m in metrics] + ["Best_Valid/score"] + [f"Test/{m}" for m in metrics]
        self.tensorboard.add_hparams(self.hparams, tags)

    def _log_metrics_to_tensorboard(self, result, epoch, prefix="Valid"):
        self.tensorboard.add_metrics(result or {}, epoch, prefix)

    def _add_train_loss_to_tensorboard(self, epoch_idx, losses, tag="Train/Loss"):
        if isinstance(losses, tuple):
            self.tensorboard.add_scalar(tag, sum(losses), epoch_idx)
            for idx, loss in enumerate(losses):
                self.tensorboard.add_scalar(f"{tag}_{idx}", loss, epoch_idx)
        else:
            self.tensorboard.add_scalar(tag, losses, epoch_idx)

    def _log_validation(self, epoch_idx, seconds, score, result):
        self.logger.info(
            set_color(f"epoch {epoch_idx} evaluating", "green") + " [" + set_color("time", "blue")
            + f": {seconds:.2f}s, " + set_color("valid_score", "blue") + f": {score:f}]"
        )
        self.logger.info(set_color("valid result", "blue") + ": \n" + dict2str(result))
