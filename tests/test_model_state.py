"""Model state beyond state_dict (recrunner.training.checkpoints.model_state) and the torch_scatter fallback."""

import io

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrunner.training.checkpoints import model_state
from recrunner.seams.torch_scatter import scatter_mean, scatter_softmax


def _weights_only_round_trip(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("fmt", ["csr", "csc", "lil", "coo", "dok"])
def test_sparse_matrices_come_back_in_their_format_with_equal_values(fmt):
    matrix = sp.random(7, 5, density=0.4, format=fmt, dtype=np.float32, random_state=3)
    back = model_state.decode(_weights_only_round_trip(model_state.encode(matrix)))
    assert back.format == fmt and back.dtype == np.float32 and back.shape == (7, 5)
    assert (back.tocsr() != matrix.tocsr()).nnz == 0


def test_numpy_arrays_and_scalars_come_back_as_numpy():
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    back = model_state.decode(_weights_only_round_trip(model_state.encode({"a": array, "s": np.float64(2.5)})))
    assert isinstance(back["a"], np.ndarray) and back["a"].dtype == np.int32 and (back["a"] == array).all()
    assert isinstance(back["s"], np.float64) and back["s"] == 2.5


def test_nested_lists_dicts_and_tensors_stay_plain_data():
    value = {"ripple": {3: [(torch.tensor([1, 2]), torch.tensor([3]))]}, "n": None, "x": 1.5}
    back = model_state.decode(_weights_only_round_trip(model_state.encode(value)))
    assert back["ripple"][3][0][0].tolist() == [1, 2] and back["n"] is None and back["x"] == 1.5


def test_unknown_kinds_are_a_type_error_naming_the_attribute():
    with pytest.raises(TypeError, match=r"state\.thing is a builtins\.object"):
        model_state.encode({"thing": object()}, "state")


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 2)  # registered: its weights are in state_dict
        self.__dict__["loose"] = torch.nn.Linear(2, 1)  # not registered: only model_state keeps it
        self.matrix = sp.csr_matrix(np.eye(3, dtype=np.float64))
        self.other_parameter_name = ["layer", "loose", "matrix"]

    def other_parameter(self):
        return {name: getattr(self, name) for name in self.other_parameter_name}


def test_registered_modules_are_not_stored_twice_and_loose_ones_are_restored():
    torch.manual_seed(0)
    source = _Model()
    stored = _weights_only_round_trip(model_state.save(source))
    assert stored["layer"] == {model_state.KIND: "module"}
    torch.manual_seed(1)
    target = _Model()
    target.matrix = None
    target.load_state_dict(source.state_dict())
    model_state.restore(target, stored)
    assert torch.equal(target.loose.weight, source.loose.weight)
    assert torch.equal(target.layer.weight, source.layer.weight)
    assert (target.matrix != source.matrix).nnz == 0


def test_extra_names_are_saved_although_recbole_does_not_list_them():
    model = _Model()
    model.centroids = torch.ones(2, 3)
    stored = model_state.save(model, extra_names=("centroids",))
    assert torch.equal(stored["centroids"], torch.ones(2, 3))


# --- torch_scatter fallback (KGIN, MCCLK) --------------------------------------------------

def test_scatter_mean_averages_each_group_and_leaves_empty_groups_zero():
    src = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 50.0]])
    index = torch.tensor([0, 0, 2])
    out = scatter_mean(src, index, dim=0, dim_size=4)
    assert out.tolist() == [[2.0, 20.0], [0.0, 0.0], [5.0, 50.0], [0.0, 0.0]]


def test_scatter_softmax_normalises_within_each_group():
    src = torch.tensor([1.0, 2.0, 3.0, 0.5])
    index = torch.tensor([0, 0, 1, 0])
    out = scatter_softmax(src, index, dim=0)
    group0 = torch.softmax(torch.tensor([1.0, 2.0, 0.5]), dim=0)
    assert torch.allclose(out[[0, 1, 3]], group0) and out[2].item() == pytest.approx(1.0)


def test_kgin_imports_torch_scatter_even_when_it_is_not_installed():
    import importlib.util
    import sys

    from recrunner.seams.models import model_class

    model_class("KGIN")
    assert "torch_scatter" in sys.modules
    if importlib.util.find_spec("torch_scatter") is None or sys.modules["torch_scatter"].__name__.startswith("recrunner"):
        from torch_scatter import scatter_mean as imported

        assert imported is scatter_mean
