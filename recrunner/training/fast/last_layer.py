"""Fast mode's last transformer layer computed only where the model reads it: the scored positions of
RecBole's SASRec, SASRecF, FDSA, GCSAN and BERT4Rec.

RecBole's transformers run each layer at all `MAX_ITEM_LIST_LENGTH` positions of a sequence, then
read a few positions of the last layer's output:

| model            | positions read                                      | by                                        |
|------------------|-----------------------------------------------------|-------------------------------------------|
| SASRec, SASRecF, | the sequence's last item (GCSAN: its transformer    | its loss, `predict`, `full_sort_predict`  |
| GCSAN            | over the graph network's item states)               |                                           |
| FDSA             | the last item, in both of its transformers          | its loss, `predict`, `full_sort_predict`  |
| BERT4Rec         | the mask token's positions: in training the last    | its loss (`MASK_INDEX`, at most           |
|                  | `mask_item_length` of them (10 of 50 by default),   | `mask_item_length`), `predict`,           |
|                  | in scoring the one appended after the last item     | `full_sort_predict`                       |

Nothing reads the last layer at the other positions, so with `fast_last_layer: auto` fast mode
computes that layer (and BERT4Rec's output head) at the positions read only: their queries attend
over every position's keys and values; the out projection, feed-forward and LayerNorms run for
those rows. The layers before it still run at every position (the last layer's keys and values
need them). On the main job that is 43% of the model's arithmetic per batch.

What changes: the same function of the same weights at the positions read, computed in fewer
operations, so its floats round otherwise (at most 5e-7 apart in fp32 on a CPU,
tests/test_fast_last_layer.py), and the last layer's dropouts draw masks for fewer positions: other
random numbers than exact mode's, so `fast_dropout: torch` no longer reproduces exact mode's masks
unless `fast_last_layer: false`. BERT4Rec's forward returns zeros at the rows it does not compute;
its loss reads such a row only for a padded entry of `MASK_INDEX`, which it weighs by 0.

`last_layer_choice` (pure) decides from the model's name; `last_layer_only` installs the forward
as an instance attribute (state_dict keys and checkpoints are unchanged) where the model's
methods and transformers are RecBole's, and says where they are not. Each forward below is
RecBole 1.2.1's `forward` of its model with the last layer computed by `_at_last_item` or
`_last_layer_at`; the tests compare each with RecBole's.
"""

from __future__ import annotations

import functools
import logging

import torch

from ...config.checks import SWITCH
from ...core.errors import ConfigError
from .attention import attend, is_fused

logger = logging.getLogger("recrunner")

def last_layer_choice(asked, model: str) -> tuple[bool, str]:
    """Whether a fast run computes the model's last transformer layer at the scored positions only,
    and what to say (pure). `auto` and `true`: where the model is one of MODELS."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_last_layer must be auto, true or false, got {asked!r}")
    if asked is False:
        return False, ""
    if model not in MODELS:
        return False, (f"fast_last_layer: {model}'s last layer is not read at a few positions; only "
                       f"{_listed('and')}'s" if asked is True else "")
    return True, ("last layer: the same function, rounded otherwise, other dropout draws (fast_last_layer: false "
                  "keeps every position and, with fast_dropout: torch, exact mode's masks)")


def last_layer_only(model: torch.nn.Module) -> bool:
    """Give `model` the forward that runs its last layer at the scored positions only (an instance
    attribute), if its methods and transformers are RecBole's (MODELS); whether it did."""
    forward = _forward_for(model)
    if forward is None:
        logger.warning(f"fast mode: {type(model).__name__}'s methods or transformer are not RecBole's "
                       f"{_listed('or')}'s: its last layer runs at every position")
        return False
    model.forward = functools.partial(forward, model)
    return True


def _forward_for(model: torch.nn.Module):
    """The forward for `model`'s RecBole class, or None where the model or a transformer of it is not RecBole's."""
    from recbole.model import sequential_recommender

    readers = ("forward", "calculate_loss", "predict", "full_sort_predict")  # what decides the positions read
    for name, (encoders, forward) in FORWARDS.items():
        cls = getattr(sequential_recommender, name)
        if all(getattr(type(model), method) is getattr(cls, method) for method in readers):
            return forward if all(_recboles(getattr(model, encoder, None)) for encoder in encoders) else None
    return None


def _recboles(encoder) -> bool:
    """Whether `encoder` is RecBole's TransformerEncoder made of RecBole's layers."""
    from recbole.model.layers import FeedForward, MultiHeadAttention, TransformerEncoder, TransformerLayer

    layers = list(getattr(encoder, "layer", []))
    return type(encoder) is TransformerEncoder and bool(layers) and all(
        type(layer) is TransformerLayer and type(layer.multi_head_attention) is MultiHeadAttention
        and type(layer.feed_forward) is FeedForward for layer in layers)


def last_position_forward(model, item_seq: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `SASRec.forward` (the output at each sequence's last item, [B, H]) with the last layer
    computed at that position only."""
    hidden = model.dropout(model.LayerNorm(model.item_embedding(item_seq) + _position_embedding(model, item_seq)))
    return _at_last_item(model.trm_encoder, hidden, model.get_attention_mask(item_seq), item_seq_len)


def fused_last_position_forward(model, item_seq: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `SASRecF.forward`: item and feature embeddings fused before the transformer ([B, H])."""
    fused = torch.cat((model.item_embedding(item_seq), _feature_table(model, item_seq).flatten(-2)), -1)
    hidden = model.dropout(model.LayerNorm(model.concat_layer(fused) + _position_embedding(model, item_seq)))
    return _at_last_item(model.trm_encoder, hidden, model.get_attention_mask(item_seq), item_seq_len)


def two_transformers_forward(model, item_seq: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `FDSA.forward`: a transformer over item ids and one over item features, read at the last
    item and joined ([B, H])."""
    position = _position_embedding(model, item_seq)
    items = model.dropout(model.LayerNorm(model.item_embedding(item_seq) + position))
    features, _ = model.feature_att_layer(_feature_table(model, item_seq))
    features = model.dropout(model.LayerNorm(features + position))
    mask = model.get_attention_mask(item_seq)
    joined = torch.cat((_at_last_item(model.item_trm_encoder, items, mask, item_seq_len),
                        _at_last_item(model.feature_trm_encoder, features, mask, item_seq_len)), -1)
    return model.dropout(model.LayerNorm(model.concat_layer(joined)))


def graph_then_transformer_forward(model, item_seq: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `GCSAN.forward`: a gated graph network over each session's graph, then a transformer over
    its items, both read at the last item and weighed by `weight` ([B, H])."""
    assert 0 <= model.weight <= 1
    alias, graph, items = model._get_slice(item_seq)  # array-built in a run (seams/host_loops.py)
    hidden = model.gnn(graph, model.item_embedding(items))
    sequence = torch.gather(hidden, dim=1, index=alias.unsqueeze(-1).expand(-1, -1, model.hidden_size))
    graph_read = model.gather_indexes(sequence, item_seq_len - 1)
    attention_read = _at_last_item(model.self_attention, sequence, model.get_attention_mask(item_seq), item_seq_len)
    return model.weight * attention_read + (1 - model.weight) * graph_read


def masked_positions_forward(model, item_seq: torch.Tensor) -> torch.Tensor:
    """RecBole's `BERT4Rec.forward` ([B, L, H]) with the last layer and the output head computed at the
    mask token's last `mask_item_length` positions only (scoring has one, after the last item; the
    other rows computed then are real positions too); the rows not computed are zeros."""
    hidden = model.dropout(model.LayerNorm(model.item_embedding(item_seq) + _position_embedding(model, item_seq)))
    mask = model.get_attention_mask(item_seq, bidirectional=True)  # [B, 1, 1, L]
    hidden, last = _before_last_layer(model.trm_encoder, hidden, mask)
    count = max(1, min(model.mask_item_length, item_seq.size(1)))
    positions = torch.arange(1, item_seq.size(1) + 1, device=item_seq.device, dtype=torch.float32)  # floats: topk anywhere
    kept = torch.topk((item_seq == model.mask_token) * positions, count, dim=1).indices  # [B, count]: the last masks
    out = model.output_ln(model.output_gelu(model.output_ffn(_last_layer_at(last, hidden, mask, kept))))
    rows = out.new_zeros(hidden.shape)  # in the head's dtype: bf16 under autocast, as RecBole's forward returns it
    return rows.scatter(1, kept.unsqueeze(-1).expand(-1, -1, hidden.size(-1)), out)


def _listed(word: str) -> str:
    """MODELS as a sentence lists them: 'SASRec, SASRecF, FDSA, GCSAN and BERT4Rec' (pure)."""
    return f"{', '.join(MODELS[:-1])} {word} {MODELS[-1]}"


def _position_embedding(model, item_seq: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(item_seq.size(1), dtype=torch.long, device=item_seq.device)
    return model.position_embedding(positions.unsqueeze(0).expand_as(item_seq))


def _feature_table(model, item_seq: torch.Tensor) -> torch.Tensor:
    """The items' sparse and dense feature embeddings, as SASRecF and FDSA join them: [B, L, features, H]."""
    sparse, dense = model.feature_embed_layer(None, item_seq)
    return torch.cat([table for table in (sparse["item"], dense["item"]) if table is not None], dim=-2)


def _at_last_item(encoder, hidden: torch.Tensor, mask: torch.Tensor, item_seq_len: torch.Tensor) -> torch.Tensor:
    """RecBole's `TransformerEncoder` over `hidden` [B, L, H] with its causal `mask` [B, 1, L, L], read at
    each sequence's last item ([B, H]); its last layer computed there only."""
    hidden, last = _before_last_layer(encoder, hidden, mask)
    kept = (item_seq_len - 1).view(-1, 1)  # [B, 1]
    row = mask.gather(2, kept.view(-1, 1, 1, 1).expand(-1, mask.size(1), 1, mask.size(3)))  # [B, 1, 1, L]
    return _last_layer_at(last, hidden, row, kept).squeeze(1)


def _before_last_layer(encoder, hidden: torch.Tensor, mask: torch.Tensor):
    """Every layer of RecBole's `encoder` but the last, at every position: (hidden [B, L, H], the last layer)."""
    *before, last = encoder.layer
    for layer in before:
        hidden = layer(hidden, mask)
    return hidden, last


def _last_layer_at(layer, hidden: torch.Tensor, mask: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """RecBole's `TransformerLayer.forward` at the positions `kept` [B, Q] only: [B, Q, H]."""
    queries = hidden.gather(1, kept.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
    return layer.feed_forward(attend_from(layer.multi_head_attention, queries, hidden, mask))


def attend_from(attention, queries: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RecBole's `MultiHeadAttention.forward` with queries at some positions only: `queries` [B, Q, H]
    attend over `memory` [B, L, H] with `mask` [B, 1, Q or 1, L]; the residual is the queries'. In one
    kernel where fast_attention gave the module its forward (attention.py)."""
    if is_fused(attention):
        return attend(attention, queries, memory, mask)
    query = attention.transpose_for_scores(attention.query(queries)).permute(0, 2, 1, 3)
    key = attention.transpose_for_scores(attention.key(memory)).permute(0, 2, 3, 1)
    value = attention.transpose_for_scores(attention.value(memory)).permute(0, 2, 1, 3)
    scores = torch.matmul(query, key) / attention.sqrt_attention_head_size + mask
    probs = attention.attn_dropout(attention.softmax(scores))
    context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
    context = context.view(*context.size()[:-2], attention.all_head_size)
    hidden = attention.out_dropout(attention.dense(context))
    return attention.LayerNorm(hidden + queries)


# RecBole's models (by class name) whose loss and scores read a few positions of the last layer: the attributes
# that hold their transformers, and the forward that computes the last layer there only
FORWARDS = {
    "SASRec": (("trm_encoder",), last_position_forward),
    "SASRecF": (("trm_encoder",), fused_last_position_forward),
    "FDSA": (("item_trm_encoder", "feature_trm_encoder"), two_transformers_forward),
    "GCSAN": (("self_attention",), graph_then_transformer_forward),
    "BERT4Rec": (("trm_encoder",), masked_positions_forward),
}
MODELS = tuple(FORWARDS)
