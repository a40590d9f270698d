"""Which RecBole models exist, and which trainer runs each one under recrunner's loop."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect

from .errors import ConfigError

_MODEL_PACKAGES = (
    "general_recommender",
    "sequential_recommender",
    "context_aware_recommender",
    "knowledge_aware_recommender",
    "exlib_recommender",
)


@functools.lru_cache(maxsize=None)
def available_models() -> tuple[str, ...]:
    """Every model class name RecBole 1.2.1 can build, sorted."""
    from recbole.model.abstract_recommender import AbstractRecommender

    names = set()
    for package in _MODEL_PACKAGES:
        try:
            module = importlib.import_module(f"recbole.model.{package}")
        except ImportError:  # exlib models need optional packages (xgboost, lightgbm)
            continue
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, AbstractRecommender) and obj.__module__.startswith(
                f"recbole.model.{package}."
            ):
                names.add(name)
    return tuple(sorted(names))


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


def trainer_class_for(model_name: str, model_type, custom_trainer: type) -> type:
    """`custom_trainer`, layered over the model's own RecBole trainer where that is safe.

    RecBole picks a trainer by model name (`get_trainer`). A model trainer that only
    overrides how an epoch is trained (KGTrainer, RecVAETrainer, TraditionalTrainer...) is
    combined with recrunner's loop; one that replaces `fit` or `evaluate` itself (NCL, S3Rec,
    the decision trees...) would silently lose its behaviour, so it is refused.
    """
    from recbole.trainer import Trainer
    from recbole.utils import get_trainer

    base = get_trainer(model_type, model_name)
    if base is Trainer:
        return custom_trainer
    if _layerable(base, Trainer):
        return type(f"Custom{base.__name__}", (custom_trainer, base), {})
    raise ConfigError(
        f"{model_name} trains with RecBole's {base.__name__}, which replaces the training loop "
        f"itself; recrunner cannot run it without losing that behaviour. Models not supported: "
        f"{', '.join(unsupported_models())}; every other RecBole model is"
    )


def _layerable(base: type, trainer_root: type) -> bool:
    """True when `base` derives from Trainer and keeps Trainer's fit, evaluate and checkpoints."""
    if not issubclass(base, trainer_root):
        return False
    kept = ("fit", "evaluate", "_valid_epoch", "_save_checkpoint", "resume_checkpoint")
    return all(getattr(base, name) is getattr(trainer_root, name) for name in kept)


@functools.lru_cache(maxsize=None)
def unsupported_models() -> tuple[str, ...]:
    """Models whose RecBole trainer replaces fit/evaluate (so recrunner refuses them)."""
    from recbole.trainer import Trainer
    from recbole.utils import get_model, get_trainer

    refused = []
    for name in available_models():
        trainer = get_trainer(get_model(name).type, name)
        if trainer is not Trainer and not _layerable(trainer, Trainer):
            refused.append(name)
    return tuple(refused)
