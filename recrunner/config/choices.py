"""Settings RecBole reads from a fixed set of values: what each may be, and the pure rule that
`checks.impossible_values` applies before RecBole is imported.

RecBole takes any value and fails deep inside the run, or worse, runs:

| setting                  | another value in RecBole 1.2.1                                       |
|--------------------------|----------------------------------------------------------------------|
| `hidden_act`             | `KeyError: 'foo'` while a transformer is built (FeedForward)          |
| `loss_type`              | `NotImplementedError` in the model's loss, after the data is built    |
| `eval_args` `order`      | `NotImplementedError` in the data build                               |
| `eval_args` `split`      | `NotImplementedError` or `ValueError` in the data build               |
| `eval_args` `mode` uni0  | each positive ranked against no sampled item: every metric meaningless |
"""

from __future__ import annotations

import re
from typing import Any, Mapping

ACTIVATIONS = ("gelu", "relu", "swish", "tanh", "sigmoid")  # recbole.model.layers.FeedForward.get_hidden_act
LOSS_TYPES = ("BPR", "CE", "BCE", "MSE", "NLL")  # BPR, CE: most models; CDAE: BCE, MSE; SINE: NLL too
ORDERS = ("RO", "TO")  # random, time: recbole.data.dataset.Dataset.build
LEAVE_ONE_OUT = ("valid_and_test", "valid_only", "test_only")  # Dataset.leave_one_out
_MODE = re.compile(r"full|labeled|(uni|pop)[1-9][0-9]*")  # recbole.config.Config._set_eval_neg_sample_args


def choice_problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be the setting `key` (pure), or None."""
    if key == "hidden_act" and value not in ACTIVATIONS:
        return f"hidden_act {value!r} is not an activation RecBole's transformers have; choose one of {', '.join(ACTIVATIONS)}"
    if key == "loss_type" and value not in LOSS_TYPES:
        return f"loss_type {value!r} is not a loss RecBole's models have; choose BPR or CE (CDAE: BCE or MSE; SINE: NLL too)"
    if key == "eval_args" and isinstance(value, Mapping):
        return _eval_args_problem(value)
    return None


def _eval_args_problem(args: Mapping) -> str | None:
    order, split, modes = args.get("order"), args.get("split"), args.get("mode")
    if order is not None and order not in ORDERS:
        return f"eval_args order {order!r} is not an order RecBole has; choose RO (random) or TO (time)"
    for mode in (modes.values() if isinstance(modes, Mapping) else [modes]):
        if mode is not None and not (isinstance(mode, str) and _MODE.fullmatch(mode)):
            return (f"eval_args mode {mode!r} is not a mode RecBole has; choose full, labeled, uniN or popN "
                    "(N >= 1 sampled items each positive is ranked against)")
    if split is None:
        return None
    kind, spec = next(iter(split.items())) if isinstance(split, Mapping) and len(split) == 1 else (None, None)
    ratios = spec if isinstance(spec, list) else []
    if kind == "LS" and spec in LEAVE_ONE_OUT or kind == "RS" and ratios and all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and r >= 0 for r in ratios) and sum(ratios) > 0:
        return None
    return (f"eval_args split {split!r} is not a split RecBole has; give {{RS: [0.8, 0.1, 0.1]}} (ratios) or "
            f"{{LS: {' / '.join(LEAVE_ONE_OUT)}}} (leave one out)")
