"""The optimizer's step as one fused kernel in fast mode (`fast_fused_optimizer`).

RecBole builds `torch.optim.Adam(params, lr=..., weight_decay=...)` (`Trainer._build_optimizer`), which
torch steps with its `foreach` implementation on a GPU: for the main job's 36 tensors eight
`_foreach_*` operators, and 72 `.item()` calls on the host for the bias corrections (on an H200 the
fast step's profile had that step at 1.04 ms of host time a batch, the recorded forward and backward
around it; docs/fast.md). The fused implementation (`fused=True`) does the same update in one
kernel per device and dtype, its step counts on the device. The update is Adam's; the numbers
differ from the `foreach` step's in their last bits (float rounding in another order), so it is
fast mode's, never exact mode's, and a resume needs the same choice (`plan.same_plan_key`).

`auto` fuses on a GPU, where the host's work bounds fast mode's step. On a CPU it stays RecBole's
step: a fused Adam step of the main job's tensors took 0.19 ms against 0.72 ms on this project's
2-core CPU, under 0.5% of a fast batch there, and it would change the CPU's fast-mode numbers.
`true` fuses on a CPU too.
"""

from __future__ import annotations

import inspect
import logging

import torch

from ...config.checks import SWITCH
from ...core.errors import ConfigError

logger = logging.getLogger("recrunner")

# RecBole's learner names whose torch optimizer has a fused step, and the devices torch 2.x has it on
FUSED = {"adam": (torch.optim.Adam, ("cpu", "cuda")), "adamw": (torch.optim.AdamW, ("cpu", "cuda")),
         "sgd": (torch.optim.SGD, ("cpu", "cuda")), "adagrad": (torch.optim.Adagrad, ("cpu",))}


def fused_choice(asked, learner: str, device_type: str) -> tuple[bool, str]:
    """Whether fast mode steps the optimizer fused, and what the log line says (pure)."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_fused_optimizer must be auto, true or false, got {asked!r}")
    if asked is False or (asked == "auto" and device_type != "cuda"):
        return False, ""
    learner = str(learner).lower()
    if learner not in FUSED or device_type not in FUSED[learner][1]:
        has = ", ".join(name for name, (_, devices) in FUSED.items() if device_type in devices)
        return False, f"fast_fused_optimizer: torch has no fused {learner} step on {device_type} (only {has}); RecBole's step"
    return True, "the optimizer's step fused: one kernel, other last bits than RecBole's (fast_fused_optimizer: false keeps it)"


def fused_optimizer(optimizer):
    """`optimizer` built again with `fused=True`: the same class, parameter groups and settings and a new state
    (go_fast calls it before the first step; a resume loads its state afterwards). An optimizer of another class than RecBole's learner names (a
    trainer's own) is kept, with one line saying so."""
    kind = next((cls for cls, _ in FUSED.values() if type(optimizer) is cls), None)
    if kind is None:
        logger.info(f"fast mode: the optimizer's step stays {type(optimizer).__name__}'s own (no fused step known for it)")
        return optimizer
    accepted = set(inspect.signature(kind.__init__).parameters) - {"self", "params", "foreach", "fused"}
    settings = {key: value for key, value in optimizer.defaults.items() if key in accepted}
    groups = [{key: value for key, value in group.items() if key not in ("foreach", "fused")}
              for group in optimizer.param_groups]
    return kind(groups, **settings, fused=True)
