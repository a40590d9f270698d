"""SRGNN's and GCSAN's session graphs from array operations (recrunner/seams/session_graphs.py):
the same tensors as RecBole's `_get_slice`, bit for bit, and what a run uses.

A run's numbers against plain RecBole's for both models: tests/test_model_equivalence.py.
"""

import types

import pytest
import torch
from recbole.model.sequential_recommender import GCSAN, SASRec, SRGNN

from recrunner import Experiment, run_experiment
from recrunner.seams.session_graphs import session_graph, session_graphs

from .tiny_models import model_keys, tiny_params

_HOST = types.SimpleNamespace(device=torch.device("cpu"))  # all RecBole's _get_slice reads of its model


def _sequences(seed: int, batch: int, length: int, items: int) -> torch.Tensor:
    """Left-aligned sequences padded with 0, as RecBole's loaders give them: lengths 1 to `length`."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    sequences = torch.randint(1, items + 1, (batch, length), generator=generator)
    sequences[torch.arange(length)[None, :] >= lengths[:, None]] = 0
    return sequences


CASES = {
    "many repeats and self-loops": _sequences(0, 300, 20, 6),
    "mostly distinct items": _sequences(1, 300, 50, 5000),
    "every sequence full": _sequences(2, 50, 8, 4).clamp(min=1),
    "one item each": _sequences(3, 20, 5, 9)[:, :1],
    # not what RecBole's loaders give: a 0 inside a sequence ends its edges (RecBole's loop breaks)
    "a zero inside": torch.tensor([[3, 3, 0, 5, 3, 0], [7, 0, 0, 0, 0, 0], [1, 2, 1, 2, 0, 4]]),
}


@pytest.mark.parametrize("sequences", CASES.values(), ids=CASES.keys())
def test_the_graphs_equal_recboles_bit_for_bit(sequences):
    expected = GCSAN._get_slice(_HOST, sequences)

    got = session_graph(sequences)

    for name, want, have in zip(("alias_inputs", "A", "items"), expected, got):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        assert torch.equal(have, want), name
        assert have.stride() == want.stride(), name  # the same layout for the matrix products that read A
    assert got[1].float().count_nonzero() > 0 or sequences.shape[1] == 1


def _bare(model_class):
    """An instance of a RecBole model class without its (data-needing) constructor."""
    model = object.__new__(model_class)
    torch.nn.Module.__init__(model)
    return model


def test_srgnn_and_gcsan_get_the_array_built_graphs_and_other_models_do_not():
    sequences = CASES["many repeats and self-loops"]
    srgnn, gcsan = _bare(SRGNN), _bare(GCSAN)

    assert session_graphs(srgnn) and session_graphs(gcsan)
    assert not session_graphs(_bare(SASRec))

    expected = SRGNN._get_slice(_HOST, sequences)  # SRGNN's also returns the mask of items
    got = srgnn._get_slice(sequences)
    assert len(got) == 4 and all(torch.equal(a, b) for a, b in zip(expected, got))
    assert all(torch.equal(a, b) for a, b in zip(GCSAN._get_slice(_HOST, sequences), gcsan._get_slice(sequences)))
    assert "_get_slice" not in srgnn.state_dict() and type(srgnn)._get_slice is SRGNN._get_slice


def test_a_subclass_with_its_own_graphs_keeps_them():
    class MySRGNN(SRGNN):
        def _get_slice(self, item_seq):
            return "mine"

    model = _bare(MySRGNN)

    assert not session_graphs(model)
    assert model._get_slice(None) == "mine"


def test_a_run_never_builds_the_graphs_with_recboles_loop(workspace, monkeypatch):
    def recboles_loop(self, item_seq):
        raise AssertionError("RecBole's _get_slice was called")

    monkeypatch.setattr(SRGNN, "_get_slice", recboles_loop)
    params = {**tiny_params("SRGNN", model_keys("SRGNN")), "epochs": 1}

    result = run_experiment(Experiment("SRGNN", "ml-100k", params), workspace, console=False)

    assert result.status == "ok", result.error
    assert "session graphs are built by array operations" in (result.run_dir / "run.log").read_text()
