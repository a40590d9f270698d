"""A model's state beyond `state_dict()`, as plain data: the one place that decides, per kind.

RecBole models keep part of their state outside `state_dict()` and name it in
`other_parameter_name`; RecBole pickles `model.other_parameter()` into its checkpoints and
`load_other_parameter` sets the attributes back. recrunner's checkpoints open with
`torch.load(weights_only=True)` (docs/design.md: checkpoint contract), so each kind of value is
stored as tensors, numbers, strings, lists and dicts, and rebuilt as the same kind on load:

| kind                                   | seen in                               | stored as                              |
|----------------------------------------|---------------------------------------|----------------------------------------|
| tensor, number, string, None           | LightGCN, NGCF, Pop, KGCN...          | itself (tensors on the CPU)            |
| list, tuple, dict of the above         | RippleNet's ripple_set                | lists and dicts (tuples come back as lists) |
| numpy array or scalar                  | ItemKNN's `w`, AsymKNN                | tensor + dtype, rebuilt as numpy       |
| scipy sparse matrix (csr, csc, lil...) | ItemKNN, AsymKNN, EASE, SLIMElastic   | CSR arrays + shape + format            |
| nn.Module registered in the model      | DIN, DIEN, FDSA, GRU4RecF, SASRecF    | nothing: its weights are in state_dict |
| nn.Module not registered               | (none in RecBole 1.2.1)               | its state_dict, loaded into it         |

Anything else is a TypeError that names the attribute and its type. Families may add attributes
that are state although RecBole never saves them (NCL's clusters: `extra_names`).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import torch

KIND = "__recrunner_kind__"


def save(model, extra_names: Iterable[str] = ()) -> dict:
    """`model.other_parameter()` (plus `extra_names`) as plain data; see the table above."""
    values = dict(model.other_parameter())
    values.update({name: getattr(model, name) for name in extra_names})
    registered = {id(module) for module in model.modules()}
    return {name: encode(value, name, registered) for name, value in values.items()}


def restore(model, stored: dict | None, device=None) -> None:
    """Set each stored attribute back on `model` as the kind it was saved from; its tensors on
    `device` (the run's: checkpoints are read onto the CPU), numpy and scipy values stay on the host."""
    for name, value in (stored or {}).items():
        if isinstance(value, dict) and value.get(KIND) == "module":
            if "state_dict" in value:
                getattr(model, name).load_state_dict(value["state_dict"])
            continue  # registered: load_state_dict of the model already restored it
        setattr(model, name, _placed(decode(value), device))


def _placed(value: Any, device) -> Any:
    """`value` with its tensors on `device` (None: where they are)."""
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: _placed(item, device) for key, item in value.items()}
    if isinstance(value, list):
        return [_placed(item, device) for item in value]
    return value


def encode(value: Any, where: str = "state", registered: set | frozenset = frozenset()) -> Any:
    """One value as plain data (pure); a kind this module does not know is a TypeError."""
    import scipy.sparse as sp

    if isinstance(value, (np.ndarray, np.generic)):  # first: numpy.float64 is also a float
        array = np.asarray(value)
        return {KIND: "ndarray", "data": torch.from_numpy(np.array(array, order="C", copy=True)),
                "dtype": array.dtype.str, "scalar": isinstance(value, np.generic)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if sp.issparse(value):
        csr = value.tocsr()
        return {KIND: "sparse", "format": value.format, "shape": list(value.shape), "dtype": csr.dtype.str,
                "data": torch.from_numpy(csr.data.copy()), "indices": torch.from_numpy(csr.indices.astype(np.int64)),
                "indptr": torch.from_numpy(csr.indptr.astype(np.int64))}
    if isinstance(value, torch.nn.Module):
        if id(value) in registered:
            return {KIND: "module"}
        return {KIND: "module", "state_dict": {k: v.detach().cpu() for k, v in value.state_dict().items()}}
    if isinstance(value, dict):
        encoded = {}
        for key, item in value.items():
            if not isinstance(key, (int, str)):
                raise TypeError(f"{where}: key {key!r} is a {type(key).__name__}, not an int or str")
            encoded[key] = encode(item, f"{where}.{key}", registered)
        return encoded
    if isinstance(value, (list, tuple)):
        return [encode(item, f"{where}[{i}]", registered) for i, item in enumerate(value)]
    raise TypeError(f"{where} is a {type(value).__module__}.{type(value).__name__}, which recrunner "
                    "does not know how to store as plain data")


def decode(value: Any) -> Any:
    """The inverse of `encode` for everything but modules (pure)."""
    if isinstance(value, dict):
        kind = value.get(KIND)
        if kind == "ndarray":
            array = value["data"].numpy().astype(np.dtype(value["dtype"]), copy=False)
            return array[()] if value["scalar"] else array
        if kind == "sparse":
            import scipy.sparse as sp

            csr = sp.csr_matrix((value["data"].numpy().astype(np.dtype(value["dtype"]), copy=False),
                                 value["indices"].numpy(), value["indptr"].numpy()), shape=tuple(value["shape"]))
            return csr.asformat(value["format"])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value
