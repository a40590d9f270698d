"""Fast mode's dropout masks on a CPU: drawn by numpy's SFC64 generator, seeded from torch's.

torch's CPU generator draws a dropout mask one value after another (Mersenne Twister, about 17 ns
a value on one core whatever the thread count): 30-36% of the main job's training step on this
project's CPU, eager or compiled (docs/fast.md). With `fast_dropout: auto` (or `numpy`) on a CPU,
each `torch.nn.Dropout` of the model draws its keep mask from numpy's SFC64 bit generator instead
(`numpy.random.SFC64`: 64 random bits a call, about 2 ns a mask value), seeded for each call by one
draw from torch's generator. So:

- a seed still gives one run, and a resumed run draws what the uninterrupted one drew (torch's
  generator state is in last.pth);
- the masks are not exact mode's masks for the same seed: the run is like one of another seed,
  which is why `fast_dropout: torch` keeps torch's masks (fast mode's choice until 2026-11-27).

The mask is one custom op (`recrunner::keep_mask`), opaque to the compiler: it returns the keep
mask already scaled by 1/(1-p), in the input's dtype; the product with the input stays in the
compiled graph, and autograd differentiates it as it differentiates dropout. A value is kept when
its 32 random bits are at least round(p * 2**32), so it is dropped with probability p to 2**-32.
Dropout a model calls as a function (`torch.nn.functional.dropout`) keeps torch's masks.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ...config.checks import FAST_DROPOUTS
from ...core.errors import ConfigError


def dropout_choice(asked, device_type: str) -> tuple[str, str]:
    """Where a fast run's dropout masks come from, `torch` or `numpy`, and what to say (pure).

    `auto`: numpy's on a CPU, where torch's serial generator is a third of a transformer's step;
    torch's on a GPU, whose generator draws a mask in parallel on the device."""
    if asked not in FAST_DROPOUTS:
        raise ConfigError(f"fast_dropout must be one of {', '.join(FAST_DROPOUTS)}, got {asked!r}")
    if asked == "torch":
        return "torch", ""
    if device_type != "cpu":
        return "torch", ("fast_dropout: numpy's masks are drawn on a CPU; a GPU keeps torch's" if asked == "numpy" else "")
    return "numpy", ("dropout masks from numpy's SFC64, seeded from torch's generator: not exact mode's masks "
                     "for this seed (fast_dropout: torch keeps them)")


@torch.library.custom_op("recrunner::keep_mask", mutates_args=())
def keep_mask(like: torch.Tensor, p: float, seed: torch.Tensor) -> torch.Tensor:
    """A dropout keep mask shaped and typed like `like`: 1/(1-p) where kept, 0 where dropped."""
    n = like.numel()
    bits = np.random.SFC64(int(seed.item())).random_raw((n + 1) // 2).view(np.uint32)[:n]
    keep = torch.from_numpy(bits >= np.uint32(min(round(p * 2**32), 2**32 - 1)))
    return keep.view(like.shape).to(device=like.device, dtype=like.dtype).mul_(1.0 / (1.0 - p))


@keep_mask.register_fake
def _keep_mask_shape(like: torch.Tensor, p: float, seed: torch.Tensor) -> torch.Tensor:
    return torch.empty(like.shape, dtype=like.dtype, device=like.device)


def dropout(module: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """`module`'s forward with numpy's mask: what nn.Dropout computes, from other random numbers."""
    if not module.training or module.p == 0:
        return x
    if module.p >= 1:
        return x * 0.0
    seed = torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64)  # one draw from torch's generator a call
    return x * keep_mask(x.detach(), float(module.p), seed)


def numpy_masks(model: torch.nn.Module) -> int:
    """Give each `nn.Dropout` of `model` numpy's masks (an instance attribute: state_dict keys and
    checkpoints are unchanged); how many. Subclasses (AlphaDropout, Dropout2d, ...) keep their own."""
    modules = [m for m in model.modules() if type(m) is torch.nn.Dropout]
    for module in modules:
        module.forward = functools.partial(dropout, module)
    return len(modules)
