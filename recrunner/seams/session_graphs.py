"""SRGNN's and GCSAN's session graphs built by tensor operations where the batch is, equal to RecBole's.

| RecBole 1.2.1                                              | recrunner                                   |
|------------------------------------------------------------|---------------------------------------------|
| `SRGNN._get_slice` and `GCSAN._get_slice` build each batch's | `session_graphs(model)`: the same three (or |
| session graphs in a Python loop over its sequences, with    | four) tensors from sorts, cumulative sums   |
| numpy, after copying the sequences to the host (a wait for | and scatters on the sequences' device, each |
| the device each batch), then copy them back                 | bit for bit equal to RecBole's              |

A sequence's graph (RecBole's `_get_slice`, per row `s` of `item_seq`, `L` its length):
`node = unique(s)` sorted, `items` the nodes padded with 0 to `L`, `alias[i]` the position of `s[i]`
in `node`, `u_A[alias[i], alias[i + 1]] = 1` for each step before the first 0 in `s[1:]`, and `A` the
in-degree- and out-degree-normalised adjacency side by side: `[u_A / colsum, u_A.T / rowsum].T`,
`L x 2L`, a zero sum counted as 1. RecBole divides in float64 and rounds to float32; here the
division is in float32, which rounds the same quotient the same way (a float64 quotient rounded
to float32 is the correctly rounded float32 quotient, as 53 >= 2 * 24 + 2; Figueroa, "When is
double rounding innocuous?", 1995), so every value is equal (tests/test_session_graphs.py compares
the tensors with RecBole's, and SRGNN's and GCSAN's runs with plain RecBole's).
"""

from __future__ import annotations

import types

MODELS = ("SRGNN", "GCSAN")


def session_graphs(model) -> bool:
    """Give `model` (SRGNN or GCSAN, RecBole's classes) the array-built `_get_slice`; True if it did.

    An instance attribute: the model's class, state_dict and checkpoints are unchanged. A subclass
    that defines its own `_get_slice` keeps it.
    """
    name = type(model).__name__
    if name not in MODELS or not _recboles(model, name):
        return False
    model._get_slice = types.MethodType(_srgnn_slice if name == "SRGNN" else _gcsan_slice, model)
    return True


def _recboles(model, name: str) -> bool:
    import recbole.model.sequential_recommender as sequential

    recbole_class = getattr(sequential, name)
    return isinstance(model, recbole_class) and type(model)._get_slice is recbole_class._get_slice


def _gcsan_slice(self, item_seq):
    return session_graph(item_seq)


def _srgnn_slice(self, item_seq):
    return (*session_graph(item_seq), item_seq.gt(0))


def session_graph(item_seq):
    """(alias_inputs, A, items) of RecBole's `_get_slice` for a batch of sequences (module docstring)."""
    import torch

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
