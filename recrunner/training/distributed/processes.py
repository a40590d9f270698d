"""Mixed into CustomTrainer: the trainer's side of a data-parallel run (recrunner.training.distributed.world).

With no process group (every run without `nproc`), `self.world` is None and each method here
passes straight through: the exact single-process loop is unchanged.
"""

from __future__ import annotations

import torch

from . import world as distributed

# events after which rank 0's requests are broadcast: every event but the per-batch one (no
# callback requests anything there) and the exception's (the processes are no longer in step)
_UNAGREED = frozenset({"on_train_batch", "on_exception"})


class DataParallel:
    def _init_world(self):
        """Join the run's processes, if it has several: the same weights everywhere (the optimizer step
        averages the gradients: recrunner.training.loop.optimizer)."""
        self.world = distributed.current()
        if self.world is None:
            return
        self.world.broadcast(self.model.state_dict().values())  # one model: rank 0's weights and buffers

    def _agree(self, event):
        """After a callback event: every process takes rank 0's requests."""
        if self.world is not None and event not in _UNAGREED:
            distributed.agree(self.control, self.world)

    def _non_finite(self, loss) -> bool:
        """Whether a batch loss is non-finite, here or on any other process of the run."""
        bad = not bool(torch.isfinite(loss).all())
        return bad if self.world is None else self.world.any(bad)

    def _end_epoch_steps(self, epoch_idx, loss):
        """The epoch's loss as every process reports it: the mean over the processes."""
        loss = super()._end_epoch_steps(epoch_idx, loss)
        if self.world is not None:
            parts = list(loss) if isinstance(loss, tuple) else [loss]
            mean = self.world.mean([float(part) for part in parts])
            loss = tuple(mean) if isinstance(loss, tuple) else mean[0]
        return loss

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if self.world is None or not eval_data:
            return super().evaluate(eval_data, load_best_model, model_file, show_progress)
        # buffers are not averaged like gradients (batch norm's running statistics): rank 0's, as DDP does
        self.world.broadcast(self.model.buffers())
        with distributed.evaluation_split(self, eval_data, self.world):
            return super().evaluate(eval_data, load_best_model, model_file, show_progress)
