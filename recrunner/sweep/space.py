"""Search spaces in grid files: a distribution per parameter, checked before anything runs (pure).

    params:
      learning_rate: {loguniform: [1e-4, 1e-2]}
      dropout_prob: {uniform: [0.0, 0.5]}
      hidden_size: {int: [16, 128], step: 16}      # or  log: true
      n_layers: {choice: [1, 2, 3]}
      weight_decay: [0.0, 1e-4]                   # a list: a choice, in a search

A mapping is a distribution when its one main key is a distribution's name, so a parameter whose
value is itself a mapping (`eval_args: {split: ..., order: TO}`) stays a fixed value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

KINDS = ("loguniform", "uniform", "int", "choice")
OPTIONS = {"int": ("step", "log"), "uniform": ("step",), "loguniform": (), "choice": ()}


@dataclass(frozen=True)
class Distribution:
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple = ()
    step: float | int | None = None
    log: bool = False

    def describe(self) -> str:
        if self.kind == "choice":
            return f"choice {list(self.choices)}"
        extra = (f", step {self.step}" if self.step is not None else "") + (", log" if self.log else "")
        return f"{self.kind} [{self.low}, {self.high}]{extra}"

    def to_optuna(self):
        import optuna.distributions as d

        if self.kind == "choice":
            return d.CategoricalDistribution(list(self.choices))
        if self.kind == "int":
            return d.IntDistribution(int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return d.FloatDistribution(float(self.low), float(self.high), step=self.step,
                                   log=self.kind == "loguniform")


def is_distribution(value: Any) -> bool:
    """Whether a grid value asks for a distribution (a mapping keyed by a distribution's name)."""
    return isinstance(value, Mapping) and any(kind in value for kind in KINDS)


def _unknown_distribution(value: Any) -> bool:
    """A one-key mapping onto a list of values (`{normal: [0, 1]}`): a distribution misnamed (pure)."""
    return (isinstance(value, Mapping) and len(value) == 1 and not is_distribution(value)
            and isinstance(next(iter(value.values())), list))


def parse(name: str, value: Any, source: str = "grid") -> Distribution:
    """A grid value (a distribution mapping, or a list: a choice) as a Distribution; ConfigError if malformed."""
    from ..core.errors import ConfigError

    if isinstance(value, list):
        return Distribution("choice", choices=tuple(value))
    kinds = [k for k in value if k in KINDS]
    unknown = [k for k in value if k not in KINDS]
    if len(kinds) != 1:
        raise ConfigError(f"{source}: {name}: give one distribution of {', '.join(KINDS)}, got {dict(value)}")
    kind = kinds[0]
    extra = [k for k in unknown if k not in OPTIONS[kind]]
    if extra:
        raise ConfigError(f"{source}: {name}: unknown option(s) {', '.join(map(str, extra))} for {kind}; "
                          f"{kind} takes {', '.join(OPTIONS[kind]) or 'no options'}")
    bounds = value[kind]
    if kind == "choice":
        if not isinstance(bounds, list) or not bounds:
            raise ConfigError(f"{source}: {name}: choice needs a non-empty list, got {bounds!r}")
        return Distribution("choice", choices=tuple(bounds))
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(_number(b) for b in bounds)):
        raise ConfigError(f"{source}: {name}: {kind} needs [low, high] numbers, got {bounds!r}")
    low, high = bounds
    if not low < high:
        raise ConfigError(f"{source}: {name}: {kind} needs low < high, got [{low}, {high}]")
    log = bool(value.get("log", False))
    if (kind == "loguniform" or log) and low <= 0:
        raise ConfigError(f"{source}: {name}: {kind}{' with log' if log else ''} needs a positive low bound, "
                          f"got {low}; use uniform for a range that includes 0")
    if kind == "int" and not all(float(b).is_integer() for b in bounds):
        raise ConfigError(f"{source}: {name}: int needs whole-number bounds, got {bounds!r}")
    step = value.get("step")
    if step is not None and (not _number(step) or step <= 0):
        raise ConfigError(f"{source}: {name}: step must be a positive number, got {step!r}")
    if kind == "int" and step is not None and log:
        raise ConfigError(f"{source}: {name}: int takes step or log, not both")
    return Distribution(kind, low, high, step=step, log=log)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def split(layers: Mapping[str, Any], source: str = "grid") -> tuple[dict, dict]:
    """(fixed parameters, {name: Distribution}) of a cell's layers in a search: lists and
    distribution mappings are searched, everything else is fixed (pure)."""
    from ..core.errors import ConfigError

    fixed, space = {}, {}
    for name, value in layers.items():
        if _unknown_distribution(value):
            raise ConfigError(f"{source}: {name}: unknown distribution {next(iter(value))!r}; distributions: "
                              f"{', '.join(KINDS)} (e.g. {{loguniform: [1e-4, 1e-2]}})")
        if isinstance(value, list) or is_distribution(value):
            space[name] = parse(name, value, source)
        else:
            fixed[name] = value
    return fixed, space


@dataclass(frozen=True)
class SearchSpec:
    """One study: a model on a dataset, its fixed parameters and its space."""

    model: str
    dataset: str
    fixed: dict
    space: dict                  # name -> space.Distribution
    seeds: tuple[int, ...]       # trials use the first; --final-seeds K the first K
    trials: int | None = None    # None: the search's; 1 where the space is empty (Pop: nothing to tune)
    unread: tuple[str, ...] = ()  # the grid's settings left out of the space: the model's numbers do not depend on them

    @property
    def study_name(self) -> str:
        return f"{self.dataset}/{self.model}"
