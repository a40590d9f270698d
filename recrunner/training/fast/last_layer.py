"""Fast mode's last transformer layer computed only where the model reads it: SASRec's scored position.

SASRec (RecBole's `SASRec.forward`) runs every layer of its transformer at all `MAX_ITEM_LIST_LENGTH`
positions of a sequence, then keeps one position of the last layer's output: the sequence's last
item, which its loss and its scores read. Nothing reads the last layer at the other positions, so
with `fast_last_layer: auto` fast mode computes that layer at the kept position only: its
attention from that position's query over every position's keys and values, its out projection,
its feed-forward and its LayerNorms for one position in 50. The layers before it still run at every
position (the last layer's keys and values need them). On the main job that is 43% of the
model's arithmetic per batch.

What changes: the same function of the same weights, computed in fewer operations, so its floats
round otherwise (at most 5e-7 apart in fp32 on a CPU, tests/test_fast_last_layer.py), and the last
layer's dropouts draw masks for one position instead of all: other random numbers than exact
mode's, so `fast_dropout: torch` no longer reproduces exact mode's masks unless
`fast_last_layer: false`.

`last_layer_choice` (pure) decides from the model's name; `score_last_position` installs the
forward as an instance attribute (state_dict keys and checkpoints are unchanged) where the model's
structure is RecBole's SASRec's, and says where it is not.
"""

from __future__ import annotations

import functools
import logging

import torch

from ...config.checks import SWITCH
from ...core.errors import ConfigError

logger = logging.getLogger("recrunner")

MODELS = ("SASRec",)  # whose forward keeps one position of its transformer's last layer (RecBole 1.2.1)


def last_layer_choice(asked, model: str) -> tuple[bool, str]:
    """Whether a fast run computes the model's last transformer layer at the scored position only,
    and what to say (pure). `auto` and `true`: where the model is one of MODELS."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_last_layer must be auto, true or false, got {asked!r}")
    if asked is False:
        return False, ""
    if model not in MODELS:
        return False, (f"fast_last_layer: {model} has no last layer read at one position; only "
                       f"{', '.join(MODELS)}" if asked is True else "")
    return True, ("last layer: the same function, rounded otherwise, other dropout draws (fast_last_layer: false "
                  "keeps every position and, with fast_dropout: torch, exact mode's masks)")


def score_last_position(model: torch.nn.Module) -> bool:
    """Give `model` the forward that runs its last layer at the scored position only (an instance
    attribute), if its forward and transformer are RecBole's SASRec's; whether it did."""
    from recbole.model.layers import FeedForward, MultiHeadAttention, TransformerEncoder, TransformerLayer
    from recbole.model.sequential_recommender.sasrec import SASRec

    encoder = getattr(model, "trm_encoder", None)
    layers = list(getattr(encoder, "layer", []))
    recbole_structure = (type(model).forward is SASRec.forward and type(encoder) is TransformerEncoder and layers
                         and all(type(layer) is TransformerLayer and type(layer.multi_head_attention) is MultiHeadAttention
                                 and type(layer.feed_forward) is FeedForward for layer in layers))
    if not recbole_structure:
        logger.warning(f"fast mode: {type(model).__name__}'s forward or transformer is not RecBole's SASRec's: its last "
                       "layer runs at every position")
        return False
    model.forward = functools.partial(last_position_forward, model)
    return True


def last_position_forward(model, item_seq: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `SASRec.forward` (the output at each sequence's last item, [B, H]) with the last layer
    computed at that position only."""
    positions = torch.arange(item_seq.size(1), dtype=torch.long, device=item_seq.device).unsqueeze(0).expand_as(item_seq)
    hidden = model.item_embedding(item_seq) + model.position_embedding(positions)
    hidden = model.dropout(model.LayerNorm(hidden))
    mask = model.get_attention_mask(item_seq)  # [B, 1, L, L], added to the scores
    *before, last = model.trm_encoder.layer
    for layer in before:
        hidden = layer(hidden, mask)
    kept = (item_seq_len - 1).view(-1, 1, 1)  # [B, 1, 1]
    query_input = hidden.gather(1, kept.expand(-1, 1, hidden.size(-1)))  # [B, 1, H]
    row = mask.gather(2, kept.unsqueeze(-1).expand(-1, mask.size(1), 1, mask.size(3)))  # [B, 1, 1, L]
    attended = attend_from(last.multi_head_attention, query_input, hidden, row)
    return last.feed_forward(attended).squeeze(1)


def attend_from(attention, queries: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RecBole's `MultiHeadAttention.forward` with queries at some positions only: `queries` [B, Q, H]
    attend over `memory` [B, L, H] with `mask` [B, 1, Q, L]; the residual is the queries'."""
    query = attention.transpose_for_scores(attention.query(queries)).permute(0, 2, 1, 3)
    key = attention.transpose_for_scores(attention.key(memory)).permute(0, 2, 3, 1)
    value = attention.transpose_for_scores(attention.value(memory)).permute(0, 2, 1, 3)
    scores = torch.matmul(query, key) / attention.sqrt_attention_head_size + mask
    probs = attention.attn_dropout(attention.softmax(scores))
    context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
    context = context.view(*context.size()[:-2], attention.all_head_size)
    hidden = attention.out_dropout(attention.dense(context))
    return attention.LayerNorm(hidden + queries)
