"""Grids: which cells a sweep runs, from a YAML file and the command line (pure).

    # configs/grids/example.yaml
    name: example                 # the sweep's default name (--name overrides)
    models: [SASRec, GRU4Rec]
    datasets: [ml-1m, Amazon_Beauty]
    params:                       # lists are swept (their product); scalars are fixed
      learning_rate: [0.001, 0.0005]
    model_params:                 # per-model blocks, swept the same way
      SASRec: {n_layers: [1, 2]}
    seeds: [2020, 2021]           # or  repeats: 3  (seed, seed+1, seed+2 from `seed`, default 2020)
    select_top: 3                 # racing: the 3 best on validation re-run with more seeds (sweep/selection.py)
    select_seeds: 3               #   up to 3 seeds each, the first included
    fixed:                        # overrides taken as they are, lists included
      epochs: 50
      topk: [10, 20]

A cell is a (model, dataset, parameters) triple. Its id, `<dataset>/<model>/<run_id>`, is made
by `prepare` from the resolved parameters (seed included), so the same grid always names the same
cells and the same run directories.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config.params import load_yaml
from ..core.errors import ConfigError
from ..config.run_id import make_run_id
from .space import SearchSpec, is_distribution, split

GRID_KEYS = ("name", "models", "datasets", "params", "model_params", "dataset_params", "seeds", "repeats", "fixed",
             "search", "trials", "prune", "final_seeds", "prune_after", "select_top", "select_seeds")
SEARCH_METHODS = ("random", "tpe")
PRUNERS = ("none", "median", "asha", "hyperband")
DEFAULT_SEED = 2020
Unread = Callable[[str], frozenset] | None  # a model -> the settings its numbers do not depend on


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    model_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dataset_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    search: str | None = None         # random | tpe: N trials per (model, dataset) instead of the product
    trials: int | None = None
    prune: str | None = None          # none | median | asha | hyperband
    final_seeds: int | None = None    # then the best trial's configuration with K seeds
    prune_after: int | None = None    # epochs every trial trains before it can be pruned
    select_top: int | None = None     # racing: contenders per (model, dataset), re-run with more seeds
    select_seeds: int | None = None   # racing: the most seeds a contender gets (default 3)


@dataclass(frozen=True)
class Cell:
    model: str
    dataset: str
    params: Mapping[str, Any]     # everything this cell sets, seed included
    swept: tuple[str, ...]        # which of them vary across the grid

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.model}/{make_run_id(self.params)}"


def load_grid(path: Path) -> Grid:
    """A grid file, checked: known keys, the right shapes, lists where lists belong."""
    raw = load_yaml(path)
    unknown = sorted(set(raw) - set(GRID_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown grid key(s) {', '.join(unknown)}; grid keys: {', '.join(GRID_KEYS)}")
    return grid_from_mapping(raw, source=str(path))


def grid_from_mapping(raw: Mapping, source: str = "grid") -> Grid:
    def names(key):
        value = raw.get(key) or ()
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: {key} must be a list of names, got {value!r}")
        return tuple(value)

    def mapping(key, value=None):
        value = raw.get(key) if value is None else value
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: {key} must be a mapping of parameter: value(s), got {value!r}")
        return dict(value)

    blocks = {}
    for key in ("model_params", "dataset_params"):
        outer = mapping(key)
        blocks[key] = {name: mapping(f"{key}.{name}", inner or {}) for name, inner in outer.items()}
    for where, block in [("params", mapping("params")), *((f"{k}.{n}", b) for k in blocks for n, b in blocks[k].items())]:
        empty = [name for name, value in block.items() if value == []]
        if empty:
            raise ConfigError(f"{source}: {where}.{empty[0]} is an empty list, so the grid has no cell; "
                              "give at least one value")
    search = {key: raw.get(key) for key in ("search", "trials", "prune", "final_seeds", "prune_after")}
    check_search_settings(**search, source=source)
    select = {key: raw.get(key) for key in ("select_top", "select_seeds")}
    seeds = _seeds(raw, source)
    check_select_settings(**select, seeds=seeds, search=search["search"], source=source)
    return Grid(models=names("models"), datasets=names("datasets"), params=mapping("params"),
                model_params=blocks["model_params"], dataset_params=blocks["dataset_params"],
                seeds=seeds, fixed=mapping("fixed"), name=raw.get("name"), **search, **select)


def check_search_settings(search=None, trials=None, prune=None, final_seeds=None, prune_after=None,
                          source: str = "grid") -> None:
    """The search's settings, from a grid file or the command line; ConfigError when impossible."""
    if search is not None and search not in SEARCH_METHODS:
        raise ConfigError(f"{source}: search {search!r}: use one of {', '.join(SEARCH_METHODS)}")
    if prune is not None and prune not in PRUNERS:
        raise ConfigError(f"{source}: prune {prune!r}: use one of {', '.join(PRUNERS)}")
    for key, value, least in (("trials", trials, 1), ("final_seeds", final_seeds, 0), ("prune_after", prune_after, 1)):
        _check_whole(source, key, value, least)
    if search is None and (trials or (prune not in (None, "none")) or final_seeds or prune_after):
        raise ConfigError(f"{source}: trials, prune, prune_after and final_seeds belong to a search; add search: "
                          "tpe (or --search tpe)")


def check_select_settings(select_top=None, select_seeds=None, seeds=None, search=None, source: str = "grid") -> None:
    """Racing's settings, from a grid file or the command line; ConfigError when impossible."""
    for key, value in (("select_top", select_top), ("select_seeds", select_seeds)):
        _check_whole(source, key, value, 2)
    if select_seeds is not None and select_top is None:
        raise ConfigError(f"{source}: select_seeds belongs to racing; add select_top: K (or --select-top K), "
                          "the configurations that race")
    if select_top is not None and search is None and seeds is not None and len(seeds) > 1:
        raise ConfigError(f"{source}: select_top races the best cells over new seeds, and this grid already runs "
                          f"every cell with {len(seeds)} seeds; give one seed, or leave select_top out")


def _check_whole(source: str, key: str, value, least: int) -> None:
    """A whole-number setting (None: not given); ConfigError naming it when it is not one >= `least`."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
        raise ConfigError(f"{source}: {key} must be a whole number >= {least}, got {value!r}")


def _seeds(raw: Mapping, source: str) -> tuple[int, ...] | None:
    if "seeds" in raw and "repeats" in raw:
        raise ConfigError(f"{source}: give seeds or repeats, not both")
    if "seeds" in raw:
        seeds = raw["seeds"]
        if isinstance(seeds, int) and not isinstance(seeds, bool):  # a count, like final_seeds and select_seeds?
            raise ConfigError(f"{source}: seeds: {seeds} could be one seed or {seeds} seeds; write seeds: [{seeds}] for "
                              f"seed {seeds}, or repeats: {seeds} for {seeds} seeds")
        if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ConfigError(f"{source}: seeds must be a list of integers, got {seeds!r}")
        return tuple(seeds)
    if "repeats" in raw:
        repeats = raw["repeats"]
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise ConfigError(f"{source}: repeats must be a whole number >= 1, got {repeats!r}")
        first = raw.get("params", {}).get("seed", DEFAULT_SEED) if isinstance(raw.get("params"), Mapping) else DEFAULT_SEED
        return tuple(range(first, first + repeats))
    return None


def expand(grid: Grid, overrides: Mapping[str, Any] | None = None, unread: Unread = None) -> list[Cell]:
    """Every cell of the grid, in a stable order; `overrides` (--config-file, --set) win over all.
    `unread(model)`: the settings the model's numbers do not depend on (config/one_pass.py); the
    grid's lists of them do not multiply its cells, and its cells do not set them."""
    if not grid.models or not grid.datasets:
        raise ConfigError("a sweep needs at least one model and one dataset")
    overrides = dict(overrides or {})
    cells, seen = [], set()
    for model, dataset in itertools.product(grid.models, grid.datasets):
        layers = _layers(grid, model, dataset)
        for name, value in layers.items():
            if is_distribution(value) and name not in overrides:
                raise ConfigError(f"{name}: a distribution ({value}) is searched, not swept: add --search tpe "
                                  "(or random) and --trials N, or give a list of values")
        ignored = _unread_swept(layers, overrides, unread(model) if unread else ())
        layers = {k: v for k, v in layers.items() if k not in ignored}
        swept_keys = [k for k, v in layers.items() if isinstance(v, list) and k not in overrides]
        for values in itertools.product(*(layers[k] for k in swept_keys)):
            params = {**{k: v for k, v in layers.items() if k not in swept_keys}, **dict(zip(swept_keys, values)),
                      **grid.fixed, **overrides}
            for seed in grid.seeds or (None,):
                cell_params = dict(params) if seed is None else {**params, "seed": seed}
                swept = tuple(swept_keys) + (("seed",) if grid.seeds and len(grid.seeds) > 1 else ())
                cell = Cell(model, dataset, cell_params, swept)
                if cell.key not in seen:
                    seen.add(cell.key)
                    cells.append(cell)
    return cells


def expand_search(grid: Grid, overrides: Mapping[str, Any] | None = None, unread: Unread = None,
                  own: Callable[[str], tuple] | None = None) -> list[SearchSpec]:
    """One search per (model, dataset): its fixed parameters and its space (lists and
    distributions); `overrides` (--config-file, --set) fix a parameter. `unread(model)`: settings
    left out of the model's space (config/one_pass.py); a model whose space is then empty gets one
    trial where it has no parameters of its own (`own(model)`: Pop), else it is an error (pure)."""
    if not grid.models or not grid.datasets:
        raise ConfigError("a search needs at least one model and one dataset")
    overrides = dict(overrides or {})
    specs = []
    for model, dataset in itertools.product(grid.models, grid.datasets):
        layers = _layers(grid, model, dataset)
        fixed, space = split({k: v for k, v in layers.items() if k not in overrides}, source=f"{model} on {dataset}")
        fixed.update({**grid.fixed, **overrides})
        space = {k: v for k, v in space.items() if k not in grid.fixed}
        ignored = [k for k in space if k in (unread(model) if unread else ())]
        space = {k: v for k, v in space.items() if k not in ignored}
        parameters = tuple(own(model)) if own else ()
        if not space and not (ignored and not parameters):
            verb = "changes" if len(ignored) == 1 else "change"
            raise ConfigError(f"the search of {model} on {dataset} has nothing to search: " + (
                f"{', '.join(ignored)} {verb} nothing in {model}'s numbers; search its own "
                f"parameters ({', '.join(parameters)}) under model_params: {{{model}: ...}}" if ignored else
                "give a list or a distribution ({loguniform: [1e-4, 1e-2]}, ...) in params or model_params"))
        first = fixed.pop("seed", DEFAULT_SEED)
        seeds = grid.seeds or (first,)
        wanted = grid.final_seeds or 0
        seeds = seeds if len(seeds) >= wanted else tuple(seeds) + tuple(range(seeds[-1] + 1, seeds[-1] + 1 + wanted - len(seeds)))
        specs.append(SearchSpec(model, dataset, fixed, space, tuple(seeds), trials=None if space else 1,
                                unread=tuple(ignored)))
    return specs


def _layers(grid: Grid, model: str, dataset: str) -> dict:
    """The grid's parameters of one (model, dataset): its params, then the dataset's, then the model's (pure)."""
    return {**grid.params, **grid.dataset_params.get(dataset, {}), **grid.model_params.get(model, {})}


def _unread_swept(layers: Mapping[str, Any], overrides: Mapping[str, Any], unread) -> set[str]:
    """The grid's lists of settings a model does not read (pure)."""
    return {k for k, v in layers.items() if k in unread and isinstance(v, list) and k not in overrides}


def unread_swept(grid: Grid, unread: Unread, overrides: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """Per model, the swept settings it does not read, so that its cells are fewer than the grid's
    product (pure); models without any are left out."""
    found = {}
    for model in grid.models:
        keys = set()
        for dataset in grid.datasets:
            layers = _layers(grid, model, dataset)
            keys |= _unread_swept(layers, overrides or {}, unread(model))
        if keys:
            found[model] = sorted(keys)
    return found


def swept_parameters(cells) -> list[str]:
    """The union of the parameters that vary across these cells, in first-seen order (pure)."""
    names: list[str] = []
    for cell in cells:
        names += [name for name in cell.swept if name not in names]
    return names



def example_cells(specs) -> list:
    """A cell per study with an example value of each distribution, for the checks that need no torch."""
    return [Cell(spec.model, spec.dataset, {**spec.fixed, **{n: example_value(d) for n, d in spec.space.items()},
                                            "seed": spec.seeds[0]}, swept=tuple(spec.space)) for spec in specs]


def example_value(distribution):
    """A value of the distribution, to check the space's keys and types before any trial (pure)."""
    if distribution.kind == "choice":
        return distribution.choices[0]
    return int(distribution.low) if distribution.kind == "int" else float(distribution.low)
