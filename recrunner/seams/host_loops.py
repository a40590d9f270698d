"""RecBole model methods that loop over a batch on the host, replaced by array operations where the
batch is that give equal tensors, bit for bit (FEARec's: its draws kept, the loop's waits gone).

| RecBole 1.2.1                                             | recrunner (`without_host_loops(model)`)     |
|-----------------------------------------------------------|---------------------------------------------|
| `SRGNN._get_slice`, `GCSAN._get_slice`: each batch's      | `session_graph`: the same tensors from a    |
| session graphs in a Python loop over its sequences, numpy | sort, cumulative sums and scatters          |
| `HRM.inverse_seq_item`: each sequence moved after its     | `inverse_sequences`: one gather             |
| padding, a Python list per sequence                       |                                             |
| `KGNNLS.label_smoothness_predict`: each (user, entity)    | `LabelSmoothness`: the table as sorted keys |
| key's label looked up in a dict by a Python call per      | and labels on the model's device, searched  |
| element (`Tensor.map_`), 20k a batch at RecBole's sizes;  | (`torch.searchsorted`); RecBole's label     |
| each lookup of a missing key also adds it (`setdefault`): | propagation after it unchanged              |
| the dict grows by about 16k entries a batch on ml-100k    |                                             |
| `RippleNet.forward`, `RippleNet.full_sort_predict`: each  | `RippleSets`: the ripple sets as one tensor |
| user's ripple set (a tensor per hop and kind) appended to | on the model's device, a batch's rows       |
| lists in a Python loop over the batch, then concatenated  | gathered; RecBole's reasoning unchanged     |
| `FEARec.calculate_loss`: each sequence's same-target      | `SameTargetSequences` (`same_target.py`):   |
| sequence drawn with Python's `random.choice`, two waits   | the same draws, the batch on the host once, |
| for the device and a `torch.equal` per sequence           | the rows gathered and copied in one piece   |

Each copies the batch to the host (on a GPU, a wait for the device every batch) and the result
back; the replacements run on the batch's device. Each is installed as an instance attribute
(the model's class, state_dict and checkpoints are unchanged) where the model's method is RecBole's.

A sequence's session graph (RecBole's `_get_slice`, per row `s` of `item_seq`, `L` its length):
`node = unique(s)` sorted, `items` the nodes padded with 0 to `L`, `alias[i]` the position of `s[i]`
in `node`, `u_A[alias[i], alias[i + 1]] = 1` for each step before the first 0 in `s[1:]`, and `A` the
in-degree- and out-degree-normalised adjacency side by side: `[u_A / colsum, u_A.T / rowsum].T`,
`L x 2L`, a zero sum counted as 1. RecBole divides in float64 and rounds to float32; here the
division is in float32, which rounds the same quotient the same way (a float64 quotient rounded
to float32 is the correctly rounded float32 quotient, as 53 >= 2 * 24 + 2; Figueroa, "When is
double rounding innocuous?", 1995), so every value is equal (tests/test_host_loops.py compares the
tensors with RecBole's; tests/test_model_equivalence.py the runs with plain RecBole's).

KGNNLS's labels: RecBole keys its `interaction_table` by `user * offset + entity` (training
interactions 1.0, as many sampled non-interactions 0.0) and labels a key it lacks 0.5. The keys it
looks up pass through float64 and `int()`, exact below 2**53; here they stay int64. A key added by
`setdefault` carries 0.5, the label of a missing key, so what the growing dict answers never
changes, and the table built once from it answers the same. The labels are 0.0, 0.5 or 1.0 in
float32, as RecBole's float64 rounds to.

RippleNet's ripple sets: the rows a batch gathers are the ids RecBole's loop concatenates, in its
order, and the embeddings are looked up in RecBole's order (the item's, then per hop heads,
relations, tails), so autograd accumulates the embeddings' gradients in the same order: scores and
gradients are equal bit for bit. RecBole saves `ripple_set` with the weights and loads it back, so
the table is rebuilt whenever the model's dict is another one.
"""

from __future__ import annotations

import types

import numpy as np
import torch

from .same_target import SameTargetSequences


def without_host_loops(model) -> tuple[str, ...]:
    """Give `model` the array-built versions of its RecBole methods that loop on the host (REPLACED);
    their names, none where the model has no such method or defines one of them itself."""
    from recbole.utils import get_model

    name = type(model).__name__
    if name not in REPLACED:
        return ()
    methods, replacements_for = REPLACED[name]
    recbole_class = get_model(name)
    if not isinstance(model, recbole_class) or any(
            getattr(type(model), method) is not getattr(recbole_class, method) for method in methods):
        return ()
    for method, replacement in zip(methods, replacements_for(model), strict=True):
        setattr(model, method, replacement)  # an instance attribute is called without `self`
    return methods


def session_graph(item_seq):
    """(alias_inputs, A, items) of RecBole's `_get_slice` for a batch of sequences (module docstring)."""
    batch, length = item_seq.shape
    values, order = item_seq.sort(dim=1)
    first = torch.ones_like(values, dtype=torch.bool)
    first[:, 1:] = values[:, 1:] != values[:, :-1]
    node_of_sorted = first.cumsum(1) - 1  # each sorted item's position among the row's unique items
    alias = torch.empty_like(item_seq).scatter_(1, order, node_of_sorted)
    items = torch.zeros_like(item_seq).scatter_(1, node_of_sorted, values)  # repeats write equal values

    # RecBole's A is [u_A / in-degree, u_A.T / out-degree].T: row i of its left half is column i of u_A
    # (the edges into i) over i's in-degree, of its right half row i of u_A (the edges out of i) over
    # i's out-degree. Both halves are scattered as they end up, an edge per step i -> i + 1 up to
    # the first 0 in s[1:] (where RecBole's loop breaks), and each row divided by its own sum
    steps = (item_seq[:, 1:] != 0).cumprod(1).to(torch.float32)
    source, target = alias[:, :-1], alias[:, 1:]
    edges = torch.cat([target * 2 * length + source, source * 2 * length + length + target], dim=1)
    graph = torch.zeros(batch, length * 2 * length, dtype=torch.float32, device=item_seq.device)
    graph.scatter_add_(1, edges, torch.cat([steps, steps], dim=1)).clamp_(max=1.0)  # sums of ones: exact
    halves = graph.view(batch, length, 2, length)
    degrees = halves.sum(3, keepdim=True)
    halves.div_(torch.where(degrees == 0, 1.0, degrees))
    return alias, graph.view(batch, length, 2 * length), items


def inverse_sequences(seq_item, seq_item_len):
    """RecBole's `HRM.inverse_seq_item`: each row's first `seq_item_len` entries moved after the rest,
    [1, 2, 3, 0, 0] -> [0, 0, 1, 2, 3]. Output position j holds input position (j + length) mod L."""
    positions = torch.arange(seq_item.size(1), device=seq_item.device)
    return seq_item.gather(1, (positions.unsqueeze(0) + seq_item_len.unsqueeze(1)) % seq_item.size(1))


def session_graph_and_mask(item_seq):
    """SRGNN's `_get_slice`: GCSAN's three tensors and the mask of items (not padding)."""
    return (*session_graph(item_seq), item_seq.gt(0))


class LabelSmoothness:
    """RecBole's `KGNNLS.label_smoothness_predict` for one model, its labels looked up in the model's
    `interaction_table` as sorted int64 keys and float32 labels on the model's device (module docstring)."""

    def __init__(self, model):
        table = model.interaction_table
        keys = np.fromiter(table.keys(), dtype=np.int64, count=len(table))
        labels = np.fromiter(table.values(), dtype=np.float32, count=len(table))
        order = np.argsort(keys)  # the keys are distinct
        self.model = model
        self.keys = torch.from_numpy(keys[order]).to(model.device)
        self.labels = torch.from_numpy(labels[order]).to(model.device)

    def label(self, keys):
        """RecBole's `lookup_interaction_table` for a tensor of keys: the table's label, 0.5 where it has none."""
        if self.keys.numel() == 0:
            return torch.full(keys.shape, 0.5, device=keys.device)
        at = torch.searchsorted(self.keys, keys).clamp_(max=self.keys.numel() - 1)
        return torch.where(self.keys[at] == keys, self.labels[at], 0.5)

    def __call__(self, user_embeddings, user, entities, relations):
        entity_labels, reset_masks = self.initial_labels(user, entities)
        return self.propagated(user_embeddings, entity_labels, reset_masks, relations)

    def initial_labels(self, user, entities):
        """RecBole's labels and reset masks per hop, before propagation, with `label` for its lookup."""
        entity_labels, reset_masks, holdout_item_for_user = [], [], None
        for entities_per_iter in entities:
            user_entity_concat = torch.unsqueeze(user, dim=1) * self.model.offset + entities_per_iter
            if holdout_item_for_user is None:  # the first one in entities is the items to be held out
                holdout_item_for_user = user_entity_concat
            initial_label = self.label(user_entity_concat)
            holdout_mask = (holdout_item_for_user - user_entity_concat).bool()  # False if the item is held out
            reset_mask = torch.logical_and((initial_label - 0.5).bool(), holdout_mask)  # labelled, not held out
            initial_label = holdout_mask.float() * initial_label + torch.logical_not(holdout_mask).float() * 0.5
            reset_masks.append(reset_mask)
            entity_labels.append(initial_label)
        return entity_labels, reset_masks[:-1]  # no reset mask for the last iteration

    def propagated(self, user_embeddings, entity_labels, reset_masks, relations):
        """RecBole's label propagation, as it is."""
        model = self.model
        relation_vectors = [model.relation_embedding(i) for i in relations]
        for i in range(model.n_iter):
            entity_labels_next_iter = []
            for hop in range(model.n_iter - i):
                neighbor_labels = entity_labels[hop + 1].reshape(model.batch_size, -1, model.neighbor_sample_size)
                neighbor_relations = relation_vectors[hop].reshape(
                    model.batch_size, -1, model.neighbor_sample_size, model.embedding_size)
                user_embeddings = user_embeddings.reshape(model.batch_size, 1, 1, model.embedding_size)
                user_relation_scores = torch.mean(user_embeddings * neighbor_relations, dim=-1)
                user_relation_scores_normalized = model.softmax(user_relation_scores)
                neighbors_aggregated_label = torch.mean(user_relation_scores_normalized * neighbor_labels, dim=2)
                output = (reset_masks[hop].float() * entity_labels[hop]
                          + torch.logical_not(reset_masks[hop]).float() * neighbors_aggregated_label)
                entity_labels_next_iter.append(output)
            entity_labels = entity_labels_next_iter
        return entity_labels[0].squeeze(-1)


class RippleSets:
    """RippleNet's `forward` and `full_sort_predict` with each user's ripple set gathered from one
    [n_users, n_hop, 3, n_memory] tensor on the model's device, rebuilt whenever the model's
    `ripple_set` is replaced (RecBole saves it with the weights and loads it back); the rest is
    RecBole's, in its order (module docstring)."""

    def __init__(self, model):
        self.model, self.source, self.table = model, None, None
        self.rebuild()

    @torch.compiler.disable  # compiled, a break in the graph, not a guard on the dict (a recompile per new dict)
    def current(self):
        """[n_users, n_hop, 3, n_memory]: each user's heads, relations and tails per hop, as RecBole's
        loop concatenates them, from the model's `ripple_set` as it is now (a checkpoint's sets are
        loaded as a new dict); a user without a ripple set (RecBole's loop fails on one) gets zeros."""
        if self.source is not self.model.ripple_set:
            self.rebuild()
        return self.table

    def rebuild(self) -> None:
        model = self.model
        self.table = torch.zeros(model.n_users, model.n_hop, 3, model.n_memory, dtype=torch.int64, device=model.device)
        for user, hops in model.ripple_set.items():  # the sets are on the device already: no copies to the host
            self.table[user] = torch.stack([torch.stack(list(hop)) for hop in hops])
        self.source = model.ripple_set

    def embedded(self, users) -> None:
        """RecBole's per-hop embedding lists of the batch's ripple sets, in its order."""
        model, memories = self.model, self.current()[users]
        model.h_emb_list, model.r_emb_list, model.t_emb_list = [], [], []
        for hop in range(model.n_hop):
            model.h_emb_list.append(model.entity_embedding(memories[:, hop, 0].reshape(-1)))
            model.r_emb_list.append(model.relation_embedding(memories[:, hop, 1].reshape(-1)))
            model.t_emb_list.append(model.entity_embedding(memories[:, hop, 2].reshape(-1)))

    def forward(self, interaction):
        model = self.model
        model.item_embeddings = model.entity_embedding(interaction[model.ITEM_ID])
        self.embedded(interaction[model.USER_ID])
        o_list = model._key_addressing()
        y = o_list[-1]
        for i in range(model.n_hop - 1):
            y = y + o_list[i]
        return torch.sum(model.item_embeddings * y, dim=1)

    def full_sort_predict(self, interaction):
        model = self.model
        model.item_embeddings = model.entity_embedding.weight[: model.n_items]
        self.embedded(interaction[model.USER_ID])
        o_list = model._key_addressing_full()
        y = o_list[-1]
        for i in range(model.n_hop - 1):
            y = y + o_list[i]
        return torch.sum(model.item_embeddings * y, dim=-1).view(-1)

    @classmethod
    def methods(cls, model) -> tuple:
        """`forward` and `full_sort_predict` bound to the model, as fast mode's compiler expects of a
        model's methods (it names and remembers them by `__self__`), over one table."""
        ripple = cls(model)

        def forward(model, interaction):
            return ripple.forward(interaction)

        def full_sort_predict(model, interaction):
            return ripple.full_sort_predict(interaction)

        return types.MethodType(forward, model), types.MethodType(full_sort_predict, model)


def _as_is(function):
    """The replacement of a method that needs nothing of its model."""
    return lambda model: (function,)


# RecBole's models (by class name): the methods that loop over a batch on the host, and what gives
# their replacements for a model
REPLACED = {
    "SRGNN": (("_get_slice",), _as_is(session_graph_and_mask)),
    "GCSAN": (("_get_slice",), _as_is(session_graph)),
    "HRM": (("inverse_seq_item",), _as_is(inverse_sequences)),
    "KGNNLS": (("label_smoothness_predict",), lambda model: (LabelSmoothness(model),)),
    "RippleNet": (("forward", "full_sort_predict"), RippleSets.methods),
    "FEARec": (("calculate_loss",), SameTargetSequences.methods),
}
