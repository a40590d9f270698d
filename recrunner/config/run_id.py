"""A run's identity: its id (the folder name) and the fingerprint of its parameters (pure)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping

MAX_RUN_ID = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]")


def _flatten(params: Mapping, prefix: str = "") -> dict:
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _format(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def fingerprint(params: Mapping) -> str:
    """A short stable hash of parameters (pure)."""
    canonical = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(canonical.encode()).hexdigest()[:10]


def make_run_id(params: Mapping, shown=None) -> str:
    """Readable, stable id for a run's identifying parameters: `epochs=2,lr=0.001,seed=2020`.

    Keys are sorted and nested mappings flattened (`eval_args.mode=full`); characters unsafe in
    file names become `_`. `shown` limits the readable part to some keys (a sweep shows what it
    sweeps: `learning_rate=0.001,seed=2020-3f2a91c0de`); whenever something is left out (other
    keys, or the end of an id longer than MAX_RUN_ID) the id ends with a hash of all parameters,
    so different parameters never share a directory.
    """
    flat = _flatten(params)
    keys = sorted(flat) if shown is None else sorted(k for k in flat if k in set(shown))
    pairs = [f"{key}={_format(flat[key])}" for key in keys]
    safe = [_UNSAFE.sub("_", pair) for pair in pairs]
    text = ",".join(safe) or "defaults"
    if len(text) <= MAX_RUN_ID and safe == pairs and len(keys) == len(flat):
        return text
    return "-".join([*_whole_pairs(safe, MAX_RUN_ID - 11), fingerprint(flat)])


def _whole_pairs(pairs: list[str], limit: int) -> list[str]:
    """As many leading `key=value` pairs as fit in `limit` characters, joined; never half of one (pure)."""
    taken, length = [], -1
    for pair in pairs:
        if length + 1 + len(pair) > limit:
            break
        taken.append(pair)
        length += 1 + len(pair)
    return [",".join(taken)] if taken else []
