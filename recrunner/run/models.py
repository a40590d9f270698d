"""Which RecBole models exist, what each needs installed and refuses, what its failures mean, and which trainer
runs it."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import logging
from dataclasses import dataclass

from ..config.recbole_files import exlib_models
from ..core.errors import ConfigError, EnvironmentProblem, failure_reason, one_line

_MODEL_PACKAGES = (
    "general_recommender",
    "sequential_recommender",
    "context_aware_recommender",
    "knowledge_aware_recommender",
)


@functools.lru_cache(maxsize=None)
def available_models() -> tuple[str, ...]:
    """Every model class name RecBole 1.2.1 can build, sorted (the exlib ones even when their
    package is missing: `check_requirements` then names what to install)."""
    from recbole.model.abstract_recommender import AbstractRecommender

    names = set(exlib_models())
    for package in _MODEL_PACKAGES:
        module = importlib.import_module(f"recbole.model.{package}")
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, AbstractRecommender) and obj.__module__.startswith(
                f"recbole.model.{package}."
            ):
                names.add(name)
    return tuple(sorted(names))


@functools.lru_cache(maxsize=None)
def context_aware(model: str) -> bool:
    """Whether RecBole gives `model` the context-aware settings (features are its input): the
    context_aware_recommender package and the decision trees (ModelType CONTEXT, DECISIONTREE)."""
    if model in exlib_models():
        return True
    return model in vars(importlib.import_module("recbole.model.context_aware_recommender"))


def resolve_model(name: str) -> str:
    """The model's RecBole class name; case-insensitive; unknown names list what exists."""
    models = available_models()
    if name in models:
        return name
    by_lower = {m.lower(): m for m in models}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    close = difflib.get_close_matches(name, models, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"unknown model {name!r}.{hint} Available: {', '.join(models)}")


@dataclass(frozen=True)
class Requirement:
    module: str  # what the model imports
    install: str  # what to do
    why: str = ""  # where a plain pip install is not enough


# optional packages some models import (none is a RecBole requirement); docs/models.md.
# KGIN and MCCLK import torch_scatter: recrunner.seams.torch_scatter supplies its two functions when it is missing.
REQUIREMENTS = {
    "NCL": Requirement("faiss", "pip install 'recrunner[ncl]' (faiss-cpu)"),
    "XGBoost": Requirement("xgboost", "pip install 'recrunner[trees]' (xgboost)"),
    "LightGBM": Requirement("lightgbm", "pip install 'recrunner[trees]' (lightgbm)"),
    "KGAT": Requirement("dgl", "install torch <= 2.4 with the dgl build for it (https://www.dgl.ai/pages/start.html)",
                        "dgl's newest builds support torch up to 2.4"),
}


def check_requirements(model: str) -> None:
    """A missing (or unusable) optional package is one line naming what to install."""
    requirement = REQUIREMENTS.get(model)
    if requirement is None:
        return
    try:
        importlib.import_module(requirement.module)
    except Exception as exc:  # ImportError, or a package that breaks on import (dgl on a newer torch)
        why = f"; {requirement.why}" if requirement.why else ""
        raise EnvironmentProblem(f"{model} needs the package {requirement.module!r}, which cannot be imported here "
                                 f"({one_line(exc)[:150]}){why}: {requirement.install}") from None


# failures that a model's own settings cause in plain RecBole as well, with the setting to change
_HINTS = (
    ("ConvNCF", "Kernel size can't be greater than actual input size",
     "ConvNCF's CNN reduces the embedding_size x embedding_size map by the product of cnn_strides "
     "(default 4*4*2*2 = 64): set embedding_size to at least that product, or use fewer or smaller cnn_strides"),
    ("FEARec", "by zero",
     "FEARec shares its frequency bands among n_layers - 1 layers: set n_layers to 2 or more"),
)


def failure_hint(model: str, exc: BaseException) -> str | None:
    """The one-line reason for a known failure of `model`'s own code, naming the setting (pure)."""
    for name, marker, hint in _HINTS:
        if model == name and marker in str(exc):
            return f"{type(exc).__name__}: {hint}"
    return None


# sequential models whose loss reads no sampled negative under loss_type BPR: BERT4Rec draws its own; GRU4RecCPR
# and SASRecCPR refuse BPR while they are built (seams/models.py `built_model` says so)
_OWN_NEGATIVES = frozenset({"BERT4Rec", "GRU4RecCPR", "SASRecCPR"})


def check_model_settings(model: str, config) -> None:
    """What RecBole's configuration of `model` takes and the model then fails on (`check_negatives`, `check_heads`)."""
    check_negatives(model, config)
    check_heads(model, config)


def check_negatives(model: str, config) -> None:
    """RecBole refuses `loss_type: CE` with sampled negatives but takes `loss_type: BPR` without any, and a
    sequential model's BPR loss then fails at its first batch (KeyError: 'neg_item_id'): refused here."""
    from recbole.utils import ModelType

    loss = config["loss_type"] if "loss_type" in config else None
    if (config["MODEL_TYPE"] == ModelType.SEQUENTIAL and loss == "BPR" and model not in _OWN_NEGATIVES
            and config["train_neg_sample_args"]["distribution"] == "none"):
        raise ConfigError(f"{model} with loss_type BPR scores a sampled negative item per sequence, and "
                          "train_neg_sample_args samples none: set train_neg_sample_args to {distribution: uniform, "
                          "sample_num: 1}, or loss_type to CE")


def check_heads(model: str, config) -> None:
    """RecBole's transformers (SASRec, BERT4Rec, FEARec, ...) split `hidden_size` among `n_heads` heads and fail
    while the model is built when it does not divide; refused here, before any run folder."""
    width, heads = (config[key] if key in config else None for key in ("hidden_size", "n_heads"))
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and width % heads:
        raise ConfigError(f"{model}: hidden_size ({width}) must be a multiple of n_heads ({heads}): each attention head "
                          f"gets hidden_size / n_heads features")


def model_caveat(model: str, settings) -> str | None:
    """What a reader of a run's numbers must know about the model itself, from its settings (RecBole's
    Config or a mapping; pure), or None: Pop counting per batch (seams/models.py)."""
    if model == "Pop" and (settings["pop_counts"] or "batches") == "batches":
        return (f"counted each item once per training batch it is in, as RecBole 1.2.1's Pop does (its issue #1844): "
                f"its scores depend on train_batch_size ({settings['train_batch_size']}); pop_counts: interactions "
                "counts every interaction once")
    return None


def logged_failure(model: str, exc: BaseException) -> str:
    """Log a run's failure in its own code and return its one-line reason: with the traceback, or, for a known
    cause (`failure_hint`), one line on the console and the traceback in run.log only."""
    hint = failure_hint(model, exc)
    logger = logging.getLogger("recrunner")
    if hint is None:
        logger.exception(f"run failed: {failure_reason(exc)}")
        return failure_reason(exc)
    logger.error(f"run failed: {hint}")
    logger.info("the traceback of that failure:", exc_info=True, extra={"file_only": True})
    return hint


def trainer_class_for(model_name: str, model_type, custom_trainer: type) -> type:
    """The trainer that runs `model_name` under recrunner's loop (recrunner.training.families.layers)."""
    from ..training.families.layers import trainer_class

    try:
        return trainer_class(model_name, model_type, custom_trainer)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
