"""What recrunner reads of the installed RecBole's files without importing it (well under a second).

RecBole's YAML files (every key any of them defines, the overall and each model's defaults), its
metric class names (evaluator/metrics.py) and its model classes (model/**/*.py), for the checks
before torch is imported (config/checks.py) and for what is known of a model from its source
(config/one_pass.py). Nothing here imports RecBole.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import yaml

from .params import CONTEXT_UNDECLARED_KEYS, RECBOLE_DERIVED_KEYS, RECBOLE_UNDECLARED_KEYS, RECRUNNER_KEYS

_CLASS = re.compile(r"^class (\w+)\b", re.M)


@functools.lru_cache(maxsize=None)
def recbole_dir() -> Path | None:
    """The installed recbole package's folder, found without importing it."""
    spec = importlib.util.find_spec("recbole")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _metric_names(base: str = r"\w+") -> list[str]:
    """RecBole's metric names (recbole.evaluator.register.metrics_dict), read from its source file;
    `base`: only the subclasses of that class (LossMetric: the value metrics)."""
    recbole = recbole_dir()
    try:
        source = (recbole / "evaluator" / "metrics.py").read_text() if recbole else ""
    except OSError:
        return []
    return sorted(name.lower() for name in re.findall(rf"^class (\w+)\({base}\)", source, re.M))


METRICS = _metric_names()
VALUE_METRICS = _metric_names("LossMetric")  # AUC, LogLoss, MAE, RMSE: labeled evaluation; the rest rank


@functools.lru_cache(maxsize=None)
def model_sources() -> tuple[str, ...]:
    """The text of each of RecBole's model files (recbole/model/**/*.py), in path order; () without RecBole."""
    recbole = recbole_dir()
    sources = []
    for path in sorted((recbole / "model").rglob("*.py")) if recbole is not None else ():
        try:
            sources.append(path.read_text(encoding="utf-8"))
        except OSError:
            continue
    return tuple(sources)


@functools.lru_cache(maxsize=None)
def exlib_models() -> tuple[str, ...]:
    """XGBoost and LightGBM, RecBole's gradient-boosted trees: they subclass their libraries' boosters, so
    importing them needs the library; their names are read from exlib_recommender/__init__.py instead."""
    recbole = recbole_dir()
    try:
        init = (recbole / "model" / "exlib_recommender" / "__init__.py").read_text() if recbole else ""
    except OSError:
        return ()
    return tuple(sorted(re.findall(r"^from \S+ import (\w+)\s*$", init, re.M)))


def class_bodies(source: str) -> list[tuple[str, str]]:
    """(name, text up to the next class) of each top-level class of a Python source (pure)."""
    heads = list(_CLASS.finditer(source))
    ends = [head.start() for head in heads[1:]] + [len(source)]
    return [(head[1], source[head.end():end]) for head, end in zip(heads, ends)]


def canonical_model(name: str) -> str:
    """RecBole's spelling of a model name typed in any case (`sasrec` -> `SASRec`, `lightgbm` -> `LightGBM`:
    its class, whatever its YAML file is called, and with none: Random); as typed when RecBole has no
    such class (prepare then says what exists)."""
    return _model_classes().get(str(name).lower(), name)


@functools.lru_cache(maxsize=None)
def _model_classes() -> dict[str, str]:
    """RecBole's model class names by lower-cased name."""
    return {name.lower(): name for source in model_sources() for name, _ in class_bodies(source)}


# ---------------------------------------------------------------- RecBole's YAML files, read without importing it
def _properties() -> Path | None:
    recbole = recbole_dir()
    return recbole / "properties" if recbole else None


@functools.lru_cache(maxsize=None)
def _model_yamls() -> dict[str, Path]:
    """RecBole's model YAML files by lower-cased model name."""
    properties = _properties()
    return {path.stem.lower(): path for path in (properties / "model").glob("*.yaml")} if properties else {}


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(path.read_text(), Loader=loader)
    except (yaml.YAMLError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


@functools.lru_cache(maxsize=None)
def recbole_keys() -> frozenset:
    """Every key any of RecBole's YAML files defines, recrunner's keys and the keys RecBole derives."""
    keys = set(RECRUNNER_KEYS) | set(RECBOLE_DERIVED_KEYS) | set(CONTEXT_UNDECLARED_KEYS)
    keys.update(*RECBOLE_UNDECLARED_KEYS.values())
    properties = _properties()
    if properties is not None:
        for path in properties.rglob("*.yaml"):
            if path.name != "url.yaml":
                keys |= set(_read(path))
    return frozenset(keys)


def recbole_overall_defaults() -> dict:
    properties = _properties()
    return dict(_read(properties / "overall.yaml")) if properties is not None else {}


def recbole_model_defaults_file(model: str) -> dict:
    """The model's own YAML (case-insensitive name), or {} when RecBole ships none for it."""
    path = _model_yamls().get(str(model).lower())
    return dict(_read(path)) if path is not None else {}
