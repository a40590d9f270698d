"""What fast mode changes in a run's data: decided before the loaders are built, which the run layer
builds with them (recrunner.data.load_data).

    full_sort_users(config)        a general model's full-sort evaluation: at least 256 users a batch
    negatives_choice(...) (pure)   the training negatives: RecBole's sampler with numpy's RNG, or
                                   torch's draws where the batch is (recrunner.seams.negatives)
    static_choice(...) (pure)      training batches of one shape: the last, shorter one dropped
"""

from __future__ import annotations

from ...config.checks import FAST_NEGATIVES, SWITCH
from ...config.params import setting
from ...core.errors import ConfigError

FAST_EVAL_USERS = 256  # users a general model's full-sort evaluation batch holds at least in fast mode


def evaluation_users(fast: bool, own_full_sort: bool) -> int | None:
    """Users a general model's full-sort evaluation batch holds at least (pure); None: RecBole's
    `eval_batch_size` as it is. RecBole's counts scores (4096 is one user a batch on ml-1m), so most of
    a validation is per-batch work; fast mode scores `FAST_EVAL_USERS` users in one product where the
    model scores a batch of users itself (`own_full_sort`: its own `full_sort_predict`). A model
    RecBole scores through `predict`, one row for every user and item, keeps its batches: 256 users'
    rows could take gigabytes. Exact mode never changes them (docs/runs.md: Evaluation batches)."""
    return FAST_EVAL_USERS if fast and own_full_sort else None


def full_sort_users(config) -> int | None:
    """`evaluation_users` of a run's config: what the data layer's loaders are built with."""
    from ...seams.models import model_class

    fast = bool(setting(config, "fast"))
    return evaluation_users(fast, fast and own_full_sort(model_class(config["model"], setting(config, "detect_anomaly"))))


def own_full_sort(model_class) -> bool:
    """Whether a RecBole model class scores a batch of users itself (`full_sort_predict` of its own)."""
    from recbole.model.abstract_recommender import AbstractRecommender

    return getattr(model_class, "full_sort_predict", None) is not AbstractRecommender.full_sort_predict


def negatives_choice(asked, device_type: str, drawn: str) -> tuple[str, str]:
    """Who draws a fast run's training negatives, `numpy` (RecBole's sampler, as exact mode) or
    `torch` (where the batch is, seams/negatives.py), and what to say (pure).

    `drawn`: the training negatives' distribution ("uniform", "popularity"; "" where the loader draws
    none before the model sees the batch). `auto`: torch on a GPU, where RecBole's sampler is host work
    the GPU waits for at every batch; numpy on a CPU, where the batch is on the host already and the
    sampler's array check (seams/samplers.py) costs about as much as torch's draw (BENCHMARKS.md)."""
    if asked not in FAST_NEGATIVES:
        raise ConfigError(f"fast_negatives must be one of {', '.join(FAST_NEGATIVES)}, got {asked!r}")
    wanted = asked == "torch" or (asked == "auto" and device_type != "cpu")
    if not drawn or not wanted:
        return "numpy", ""
    if drawn not in ("uniform", "popularity"):
        return "numpy", (f"fast_negatives: {drawn} negatives are drawn by RecBole's sampler; torch draws uniform "
                         "and popularity ones")
    return "torch", (f"training negatives drawn by torch on {device_type}: RecBole's {drawn} distribution, not exact "
                     "mode's negatives for this seed (fast_negatives: numpy keeps them)")


def static_choice(asked) -> tuple[bool, str]:
    """Whether a fast run trains on batches of one shape, and what to say (pure): each epoch's last, shorter
    batch dropped (RecBole keeps it: n mod train_batch_size rows, other ones each epoch as the order is
    drawn anew), and the loss compiled for the one shape (`dynamic=None`: torch's static shapes, dynamic
    only if another shape comes), not for every shape (`dynamic=True`). On this project's CPU the main
    job's loss compiled in 21.6-22.1 s against 26.0-26.3 s into an empty cache, its step as fast (docs/fast.md); a
    GPU records one CUDA graph of the step, not two. `auto`: off, not measured on a GPU yet."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_static_shapes must be auto, true or false, got {asked!r}")
    if asked is not True:
        return False, ""
    return True, "static shapes: each epoch's last, shorter training batch dropped, the loss compiled for one shape"


def training_draws(config) -> str:
    """The distribution of the negatives a run's training loader draws before the model sees a batch
    ("" for none, or a dynamic sampler's, which scores candidates with the model) (pure over the config)."""
    args = config["train_neg_sample_args"] or {}
    if args.get("dynamic", False) or args.get("sample_num", "none") == "none":
        return ""
    distribution = args.get("distribution", "none")
    return "" if distribution == "none" else distribution
