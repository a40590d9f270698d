"""RecBole model methods that loop over a batch's sequences on the host, replaced by array operations
where the batch is that give equal tensors, bit for bit.

| RecBole 1.2.1                                               | recrunner (`without_host_loops(model)`)      |
|-------------------------------------------------------------|----------------------------------------------|
| `SRGNN._get_slice`, `GCSAN._get_slice`: each batch's session | `session_graph`: the same tensors from a     |
| graphs in a Python loop over its sequences, with numpy      | sort, cumulative sums and scatters           |
| `HRM.inverse_seq_item`: each sequence moved after its       | `inverse_sequences`: one gather              |
| padding, a Python list per sequence                         |                                              |

Each copies the sequences to the host (on a GPU, a wait for the device every batch) and the result
back; the replacements run on the sequences' device. Each is installed as an instance attribute
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
"""

from __future__ import annotations


def without_host_loops(model) -> str | None:
    """Give `model` the array-built version of its RecBole method that loops on the host (REPLACED);
    the method's name, or None where the model has none or defines its own."""
    import recbole.model.sequential_recommender as sequential

    name = type(model).__name__
    if name not in REPLACED:
        return None
    method, replacement = REPLACED[name]
    recbole_class = getattr(sequential, name)
    if not isinstance(model, recbole_class) or getattr(type(model), method) is not getattr(recbole_class, method):
        return None
    setattr(model, method, replacement)  # a plain function: an instance attribute is called without `self`
    return method


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


def inverse_sequences(seq_item, seq_item_len):
    """RecBole's `HRM.inverse_seq_item`: each row's first `seq_item_len` entries moved after the rest,
    [1, 2, 3, 0, 0] -> [0, 0, 1, 2, 3]. Output position j holds input position (j + length) mod L."""
    import torch

    positions = torch.arange(seq_item.size(1), device=seq_item.device)
    return seq_item.gather(1, (positions.unsqueeze(0) + seq_item_len.unsqueeze(1)) % seq_item.size(1))


def session_graph_and_mask(item_seq):
    """SRGNN's `_get_slice`: GCSAN's three tensors and the mask of items (not padding)."""
    return (*session_graph(item_seq), item_seq.gt(0))


# RecBole's models (by class name): the method that loops over a batch on the host, and its replacement
REPLACED = {
    "SRGNN": ("_get_slice", session_graph_and_mask),
    "GCSAN": ("_get_slice", session_graph),
    "HRM": ("inverse_seq_item", inverse_sequences),
}
