"""RecBole's self-attention as one fused kernel in fast mode (`fast_attention`).

RecBole's `MultiHeadAttention.forward` computes attention operator by operator: a batched product of
queries and keys, the scaled scores plus the mask, softmax, dropout, a batched product with the
values. On an H200 the fast step's batched products ran on CUTLASS's Ampere WMMA GEMM, its largest
kernel (0.25 ms a batch), and the fused softmax's forward and backward took 0.24 ms more, of the
step's 1.99 ms of kernels (BENCHMARKS.md, 2026-11-30). With `fast_attention: true` every RecBole
`MultiHeadAttention` of the model, and the last layer at the scored positions (last_layer.py),
computes it with `torch.nn.functional.scaled_dot_product_attention` instead: one kernel forward and
one backward on a GPU where one takes an additive mask and dropout (memory-efficient attention, or
cuDNN's), torch's composite of the same operators on a CPU.

What changes: the same function of the same weights (the same scale, 1/sqrt(head size), and
RecBole's additive mask of 0 and -10000), rounded otherwise; in training the attention
probabilities' dropout is drawn inside the kernel (torch's generator, other draws than RecBole's
`attn_dropout`, also where `fast_dropout: numpy` draws the other masks). `auto` is off: not measured
on a GPU yet (the GPU check's `attention` step runs the main job with it; docs/fast.md).
"""

from __future__ import annotations

import functools
import logging

import torch
import torch.nn.functional as F

from ...config.checks import SWITCH
from ...core.errors import ConfigError

logger = logging.getLogger("recrunner")


def attention_choice(asked) -> tuple[bool, str]:
    """Whether fast mode computes RecBole's attention with scaled_dot_product_attention, and what to say (pure)."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_attention must be auto, true or false, got {asked!r}")
    if asked is not True:  # auto: off until a GPU measures it
        return False, ""
    return True, ("attention by scaled_dot_product_attention: the same function, rounded otherwise, its dropout drawn "
                  "in the kernel (fast_attention: false keeps RecBole's)")


def fused_attention(model: torch.nn.Module) -> int:
    """Give every RecBole `MultiHeadAttention` of `model` the forward below (an instance attribute: state_dict
    keys and checkpoints are unchanged); how many. A model with none says so in one line."""
    from recbole.model.layers import MultiHeadAttention

    modules = [module for module in model.modules() if type(module) is MultiHeadAttention]
    for module in modules:
        module.forward = functools.partial(attention_forward, module)
    if not modules:
        logger.info(f"fast mode: {type(model).__name__} has no RecBole MultiHeadAttention; fast_attention changes nothing")
    return len(modules)


def is_fused(attention) -> bool:
    """Whether `fused_attention` gave `attention` its forward."""
    return getattr(getattr(attention, "forward", None), "func", None) is attention_forward


def attention_forward(attention, input_tensor: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """RecBole's `MultiHeadAttention.forward(input_tensor, attention_mask)`: every position attends."""
    return attend(attention, input_tensor, input_tensor, attention_mask)


def attend(attention, queries: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RecBole's attention block with `queries` [B, Q, H] over `memory` [B, L, H], `mask` [B, 1, Q or 1, L]
    added to the scores (RecBole's 0 and -10000); the out projection, dropout, residual and LayerNorm as
    RecBole's. The attention itself in one call of scaled_dot_product_attention."""
    heads, size = attention.num_attention_heads, attention.attention_head_size

    def split(x: torch.Tensor) -> torch.Tensor:  # [B, N, H] -> [B, heads, N, size]
        return x.view(*x.shape[:-1], heads, size).transpose(1, 2)

    query, key, value = split(attention.query(queries)), split(attention.key(memory)), split(attention.value(memory))
    dropout = attention.attn_dropout.p if attention.training else 0.0
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask.to(query.dtype), dropout_p=dropout)
    context = context.transpose(1, 2).reshape(*queries.shape[:-1], attention.all_head_size)
    hidden = attention.out_dropout(attention.dense(context))
    return attention.LayerNorm(hidden + queries)
