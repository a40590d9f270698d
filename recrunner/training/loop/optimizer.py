"""One optimizer step, built once per run (`OptimizerStep.build`), in this order:

    1. scale           fp16 (fast mode): each batch's loss backpropagates scaled by the gradient
                       scaler, its value unscaled (recrunner.training.fast.apply.scaled_loss)
    2. accumulate      `gradient_accumulation_steps` batches' gradients are summed, then divided by
                       their count (a short last group of an epoch by its own count: `flush`)
    3. average         a data-parallel run's gradients become their mean over its processes
                       (recrunner.training.distributed.world.World.average_gradients)
    4. unscale, clip   the scaler's factor is taken out, then `clip_grad_norm` clips the mean
                       gradient once
    5. step            the optimizer steps (through the scaler, which skips a step whose
                       gradients are not finite, and then updates its factor)
    6. schedule        the LR schedule's hook on the optimizer's step sets the next rate
                       (recrunner.training.callbacks.lr_schedule)

The epoch drives it unchanged (RecBole's `_train_epoch` as loop/epoch.py runs it, or the KG, RecVAE
... trainers' own, which reuse RecBole's): it calls
`zero_grad`, `backward` and `step` once per batch, and would clip each batch itself, so the trainer's
`clip_grad_norm` is left to this step. Where there is nothing to add (one batch a step, one
process, no scaler), `build` gives back the optimizer itself: RecBole's loop then clips and steps it
exactly as in RecBole.
"""

from __future__ import annotations

from torch.nn.utils import clip_grad_norm_

from ...config.params import setting
from ...core.errors import ConfigError


def accumulation_steps(config) -> int:
    """gradient_accumulation_steps, checked: a whole number >= 1, and no AMP gradient scaler."""
    steps = setting(config, "gradient_accumulation_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"gradient_accumulation_steps must be a whole number >= 1, got {steps!r}")
    if steps > 1 and config["enable_scaler"]:
        raise ConfigError("gradient_accumulation_steps > 1 cannot be combined with enable_scaler; turn one off")
    return steps


class OptimizerStep:
    """The optimizer as RecBole's loop sees it; `zero_grad`, `step` and `flush` are the step above,
    everything else (param_groups, state_dict, hooks) is the optimizer's own."""

    def __init__(self, optimizer, *, accumulation: int = 1, clip: dict | None = None, scaler=None, average=None):
        self.optimizer, self.accumulation, self.clip = optimizer, accumulation, clip
        self.scaler = scaler    # fp16's torch.amp.GradScaler (fast mode), or None
        self.average = average  # a data-parallel run's gradient averaging over its processes, or None
        self.pending = 0        # batches whose gradients are summed in .grad, not yet stepped
        self.optimizer_steps = 0

    @classmethod
    def build(cls, optimizer, *, accumulation: int, clip: dict | None, scaler=None, average=None):
        """The run's one step, or `optimizer` itself where nothing is added (then RecBole clips)."""
        if accumulation == 1 and scaler is None and average is None:
            return optimizer
        return cls(optimizer, accumulation=accumulation, clip=clip or None, scaler=scaler, average=average)

    def zero_grad(self, set_to_none: bool = True):
        if self.pending == 0:  # within a group the gradients add up
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        self.pending += 1
        if self.pending >= self.accumulation:
            self.flush()

    def flush(self):
        """Steps 2 to 5 on the pending batches' gradients, if any (the end of an epoch calls it)."""
        if self.pending == 0:
            return
        params = self._params()
        if self.pending > 1:
            for param in params:
                param.grad.div_(self.pending)
        if self.average is not None:
            self.average([p for group in self.optimizer.param_groups for p in group["params"]])
            params = self._params()
        if self.clip:
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            clip_grad_norm_(params, **self.clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer_steps += 1
        self.pending = 0

    def _params(self) -> list:
        return [p for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None]

    def __getattr__(self, name):
        return getattr(self.optimizer, name)
