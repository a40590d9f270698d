"""`recrunner data describe` and `data check`: what a dataset holds, and what RecBole's filters and
split leave of it, counted by RecBole itself (its own Dataset class, `seams.dataset.counted`)
before any training.

`describe(config)` builds the dataset a run of `config` would build (same class, filters and
split, no cache) and returns a `Description`; `too_small` is the pure decision of whether a step
left too little to train on, and which. `check_files` reads every atomic file of a dataset
whole, with the checks runs make on their first lines (data.files.atomic_file_problem).
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.errors import DataError, one_line
from ..seams.dataset import FILTER_STEPS, counted, dataset_class_name
from .augmentation import build_split
from .files import atomic_file_problem

PARTS = ("train", "valid", "test")


@dataclass
class Description:
    dataset: str
    model: str
    loaded: dict                                   # statistics of the interactions as the files hold them
    steps: list[dict] = field(default_factory=list)  # each filtering step: what it is, its settings, what is left
    filtered: dict = field(default_factory=dict)   # users, items, interactions after filtering (RecBole's counts)
    split: dict = field(default_factory=dict)      # part -> {interactions, users}; "settings": eval_args

    def as_dict(self) -> dict:
        return asdict(self)


def describe(config) -> Description:
    """The dataset of `config` built as a run builds it; a DataError when a step leaves too little."""
    import recbole.data.dataset as datasets

    dataset_class = counted(getattr(datasets, dataset_class_name(config)), loaded=statistics)
    try:
        dataset = dataset_class(config)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"RecBole could not build {config['dataset']} from its files ({one_line(exc)[:160]})") from None
    steps = [{"step": step, "what": FILTER_STEPS.get(step, ("as loaded", ()))[0],
              "settings": {key: config[key] for key in FILTER_STEPS.get(step, ("", ()))[1]},
              "interactions": rows, "users": users, "items": items}
             for step, rows, users, items in dataset.filter_counts]
    problem = too_small(steps)
    if problem:
        raise DataError(f"{config['dataset']}: {problem}")
    description = Description(config["dataset"], config["model"], dataset.loaded_stats, steps[1:],
                              {"interactions": dataset.inter_num, "users": dataset.user_num - 1,
                               "items": dataset.item_num - 1})
    try:
        built, _ = build_split(dataset)
    except ValueError as exc:
        raise DataError(f"{config['dataset']}: RecBole could not split it ({one_line(exc)[:200]})") from None
    description.split = {"settings": dict(config["eval_args"] or {}), **check_split(config, dataset, built)}
    return description


def check_split(config, dataset, built) -> dict:
    """Each part's interactions and users; a DataError naming the empty ones (what every run checks too,
    before it builds its loaders: recrunner.data.cache)."""
    sizes = {}
    for name, part in zip(PARTS, built):
        users = part.inter_feat[part.uid_field].unique().numel() if len(part.inter_feat) else 0
        sizes[name] = {"interactions": len(part.inter_feat), "users": int(users)}
    empty = [name for name in PARTS if sizes[name]["interactions"] == 0]
    if empty:
        raise DataError(f"{config['dataset']}: the split {config['eval_args']} leaves the {' and '.join(empty)} "
                        f"part{'s' if len(empty) > 1 else ''} empty ({dataset.inter_num} interactions of "
                        f"{dataset.user_num - 1} users after filtering); use a larger dataset or another split "
                        f"(`recrunner data describe {config['dataset']}` shows what each step leaves)")
    return sizes


def too_little(interactions: int, users: int, items: int) -> bool:
    """Whether a dataset, as filtered, leaves nothing to train on: no interaction, or under 2 users or
    items (pure; what `too_small` and every run's data loading decide by)."""
    return interactions == 0 or users < 2 or items < 2


def too_small(steps: list[dict]) -> str | None:
    """Which step (after loading) left fewer than 2 users or 2 items, named with its settings; the data
    itself where it holds too little as loaded (no step removed anything); or None."""
    loaded = steps[0] if steps else None
    if loaded and too_little(loaded["interactions"], loaded["users"], loaded["items"]):
        return (f"holds {loaded['interactions']} interactions of {loaded['users']} users and {loaded['items']} items "
                "as loaded; RecBole needs at least 2 users and 2 items: give a larger dataset")
    for before, after in zip(steps, steps[1:]):
        if too_little(after["interactions"], after["users"], after["items"]):
            settings = ", ".join(f"{key}: {value}" for key, value in after["settings"].items())
            return (f"{after['what']}{f' ({settings})' if settings else ''} left {after['interactions']} interactions "
                    f"of {after['users']} users and {after['items']} items (from {before['interactions']} of "
                    f"{before['users']} users and {before['items']} items); loosen it to have something to train on")
    if steps and (steps[0]["interactions"] == 0):
        return "its interactions file holds no rows"
    return None


def statistics(dataset) -> dict:
    """Counts, density, interactions per user and per item, time span and repeated pairs of the
    interactions RecBole loaded (pandas, before any filter)."""
    feat, uid, iid, time = dataset.inter_feat, dataset.uid_field, dataset.iid_field, dataset.time_field
    per_user, per_item = feat[uid].value_counts(), feat[iid].value_counts()
    stats = {"interactions": len(feat), "users": len(per_user), "items": len(per_item),
             "density": len(feat) / max(1, len(per_user) * len(per_item)),
             "per_user": _quantiles(per_user), "per_item": _quantiles(per_item),
             "repeated_pairs": int(feat.duplicated([uid, iid]).sum()), "time": None}
    if time in feat and len(feat):
        low, high = float(feat[time].min()), float(feat[time].max())
        stats["time"] = {"field": time, "min": low, "max": high, "dates": span_dates(low, high)}
    return stats


def _quantiles(counts) -> dict:
    q = counts.quantile([0.25, 0.5, 0.75, 0.9]) if len(counts) else None
    if q is None:
        return {}
    return {"min": int(counts.min()), "25%": float(q[0.25]), "median": float(q[0.5]), "75%": float(q[0.75]),
            "90%": float(q[0.9]), "max": int(counts.max()), "mean": float(counts.mean())}


def span_dates(low: float, high: float) -> list[str] | None:
    """The span as UTC dates when the numbers look like seconds since 1970 (1973 to 2096), else None."""
    if not (1e8 <= low <= high <= 4e9):
        return None
    return [datetime.datetime.fromtimestamp(v, datetime.timezone.utc).strftime("%Y-%m-%d") for v in (low, high)]


def check_files(folder: Path, name: str, separator: str = "\t") -> list[tuple[Path, int, str | None]]:
    """(file, rows, problem or None) for every atomic file `<name>.<suffix>` in `folder`, read whole."""
    found = []
    for path in sorted(Path(folder).glob(f"{name}.*")):
        if path.is_file() and path.suffix not in (".yaml", ".yml", ".md", ".txt", ".zip"):
            problem = atomic_file_problem(path, separator, rows=None)
            with open(path, "rb") as handle:
                rows = max(0, sum(1 for _ in handle) - 1)
            found.append((path, rows, problem))
    return found
