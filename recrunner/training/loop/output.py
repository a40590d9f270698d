"""What CustomTrainer prints to its log: the start, each validation, the stop and the end.

TensorBoard and the trackers are callbacks (recrunner.training.callbacks.trackers), fed by the loop's events.
"""

from __future__ import annotations

from recbole.utils import dict2str, set_color


class TrainerOutput:
    """Mixed into CustomTrainer before RecBole's Trainer."""

    def _log_stop(self, verbose):
        if verbose:
            self.logger.info(f"Finished training, best eval result in epoch {self.best_epoch}")

    def _log_start(self, validating=True):
        config = self.config
        parameters = getattr(self.model, "parameters", None)  # a booster (recrunner.training.families.trees) has none
        n_params = sum(p.numel() for p in parameters() if p.requires_grad) if parameters else 0
        where = (f"resuming at epoch {self.start_epoch}" if self.start_epoch else "starting at epoch 0")
        where = "already finished, nothing to train" if self.start_epoch >= self.epochs else where
        accumulate = f" x{self.accumulation_steps} accumulated" if self.accumulation_steps > 1 else ""
        self.logger.info(
            f"{config['model']} on {config['dataset']}: {n_params:,} trainable parameters, device {self.device}, "
            f"{config['learner']} learning_rate {config['learning_rate']}, batch {config['train_batch_size']}{accumulate}, "
            f"{self.epochs} epoch{'' if self.epochs == 1 else 's'}, " + (f"validation every {self.eval_step}" if validating else "no validation")
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

    def _log_validation(self, epoch_idx, seconds, score, result):
        self.logger.info(
            set_color(f"epoch {epoch_idx} evaluating", "green") + " [" + set_color("time", "blue")
            + f": {seconds:.2f}s, " + set_color("valid_score", "blue") + f": {score:f}]"
        )
        self.logger.info(set_color("valid result", "blue") + ": \n" + dict2str(result))
