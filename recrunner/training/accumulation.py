"""Gradient accumulation that RecBole's own epoch loop can drive unchanged.

RecBole's `_train_epoch` calls `zero_grad`, `backward`, `clip_grad_norm_` and `step` once per
batch, and model trainers (KG, RecVAE, ...) reuse it, so recrunner does not replace it. It hands
the loop a `GradientAccumulator` instead: `zero_grad` only clears at the start of a group,
`step` only steps after `steps` batches, on the mean of their gradients, clipped once with
`clip_grad_norm` (which the trainer then no longer applies per batch). The trainer calls
`flush()` at the end of an epoch, so a last short group still counts (averaged over its size).
With `steps: 1` nothing is wrapped and training is exactly RecBole's (a data-parallel run wraps
with `steps: 1` to average the gradients over its processes before the clip and the step).
"""

from __future__ import annotations

from torch.nn.utils import clip_grad_norm_

from ..config.params import setting
from ..core.errors import ConfigError


def accumulation_steps(config) -> int:
    """gradient_accumulation_steps, checked: a whole number >= 1, and no AMP gradient scaler."""
    steps = setting(config, "gradient_accumulation_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"gradient_accumulation_steps must be a whole number >= 1, got {steps!r}")
    if steps > 1 and config["enable_scaler"]:
        raise ConfigError("gradient_accumulation_steps > 1 cannot be combined with enable_scaler; turn one off")
    return steps


class GradientAccumulator:
    """Wraps an optimizer; everything but zero_grad/step/flush is the optimizer's own."""

    def __init__(self, optimizer, steps: int, clip_grad_norm: dict | None = None):
        self.optimizer = optimizer
        self.steps = steps
        self.clip_grad_norm = clip_grad_norm
        self.pending = 0  # batches whose gradients are summed in .grad, not yet stepped
        self.optimizer_steps = 0
        self.reduce = None  # a data-parallel run's gradient averaging over its processes (training.distributed)

    def zero_grad(self, set_to_none: bool = True):
        if self.pending == 0:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        self.pending += 1
        if self.pending >= self.steps:
            self.flush()

    def flush(self):
        """Step on the mean gradient of the pending batches, if any."""
        if self.pending == 0:
            return
        params = [p for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None]
        for param in params:
            param.grad.div_(self.pending)
        if self.reduce is not None:  # before clipping: the mean gradient over the processes is clipped
            self.reduce([p for group in self.optimizer.param_groups for p in group["params"]])
            params = [p for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None]
        if self.clip_grad_norm:
            clip_grad_norm_(params, **self.clip_grad_norm)
        self.optimizer.step()
        self.optimizer_steps += 1
        self.pending = 0

    def __getattr__(self, name):
        return getattr(self.optimizer, name)
