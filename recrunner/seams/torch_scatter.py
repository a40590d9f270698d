"""torch_scatter's `scatter_mean` and `scatter_softmax` on torch's own scatter_reduce.

KGIN and MCCLK import these two functions from torch_scatter, which PyPI ships only as a source
package that must be compiled against the installed torch. seams.models registers this
module as `torch_scatter` when the real one is missing. Semantics as torch_scatter 2.1: results
along `dim` grouped by `index`; an empty group's mean is 0.
"""

from __future__ import annotations

import torch


def _expand(index: torch.Tensor, src: torch.Tensor, dim: int) -> torch.Tensor:
    """Broadcast a 1-d index along `dim` to src's shape, as torch_scatter does."""
    dim = dim % src.dim()
    if index.dim() == 1:
        shape = [1] * src.dim()
        shape[dim] = -1
        index = index.view(shape)
    return index.expand_as(src)


def _size(index: torch.Tensor, src: torch.Tensor, dim: int, dim_size: int | None) -> list[int]:
    size = list(src.shape)
    size[dim % src.dim()] = dim_size if dim_size is not None else (int(index.max()) + 1 if index.numel() else 0)
    return size


def scatter_mean(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out=None, dim_size: int | None = None):
    if out is not None:
        raise NotImplementedError("recrunner's torch_scatter fallback does not take `out`")
    index = _expand(index, src, dim)
    total = src.new_zeros(_size(index, src, dim, dim_size)).scatter_add_(dim, index, src)
    count = src.new_zeros(total.shape).scatter_add_(dim, index, torch.ones_like(src))
    count.clamp_(min=1)
    if total.is_floating_point():
        return total / count
    return total.div(count, rounding_mode="floor")


def scatter_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1, dim_size: int | None = None):
    if not src.is_floating_point():
        raise ValueError("scatter_softmax can only be computed over tensors with floating point data types")
    index = _expand(index, src, dim)
    size = _size(index, src, dim, dim_size)
    group_max = src.new_full(size, float("-inf")).scatter_reduce_(dim, index, src, reduce="amax", include_self=True)
    shifted = (src - group_max.gather(dim, index)).exp()
    group_sum = src.new_zeros(size).scatter_add_(dim, index, shifted)
    return shifted / group_sum.gather(dim, index)
