"""What a sweep command asks for, checked before torch and RecBole are imported: its cells (or a
search's specs) and its name, from a grid file, config files and `--set` options; what a dry run
shows; and whether anything is left to run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..config.params import load_yaml, parse_set_options
from .grid import Grid, example_cells, expand, expand_search, load_grid, unread_swept


@dataclass(frozen=True)
class SweepRequest:
    grid_file: Path | None = None
    models: tuple[str, ...] = ()          # empty: the grid's (or SASRec)
    datasets: tuple[str, ...] = ()        # empty: the grid's (or ml-100k)
    config_files: tuple[Path, ...] = ()
    set_options: tuple[str, ...] = ()     # key=value, values YAML
    name: str | None = None               # empty: the grid's name, else "default"
    output: Path = Path("runs")
    resume_from: Path | None = None


def grid_of(request: SweepRequest) -> tuple[Grid, dict]:
    """The grid with the request's models and datasets, and the overrides of the config files and
    --set (in that order); each source of parameters is checked on the way."""
    from ..config.checks import check_request_early, key_lines, plain_name
    from ..config.recbole_files import canonical_model

    sources, overrides = [], {}
    for path in request.config_files:
        params = load_yaml(path)
        sources.append((str(path), params, key_lines(path)))
        overrides.update(params)
    given = parse_set_options(request.set_options)
    sources.append(("--set", given, None))
    overrides.update(given)
    grid = load_grid(request.grid_file) if request.grid_file else Grid(models=("SASRec",), datasets=("ml-100k",))
    models = tuple(canonical_model(m) for m in (request.models or grid.models))
    grid = replace(grid, models=models, datasets=tuple(request.datasets or grid.datasets))
    for what, names in (("--model", models), ("--dataset", grid.datasets)):
        for name in names:
            plain_name(what, name)
    check_request_early(sources, models, output=request.output, resume_from=request.resume_from)
    return grid, overrides


def cells_of(request: SweepRequest, grid: Grid, overrides: dict, final_seeds: int | None = None):
    """The sweep's cells, or with `final_seeds` (a search) one spec per (model, dataset); each checked
    against RecBole's keys and types (config/checks.py), naming the grid file's lines."""
    from ..config.checks import check_grid_cells, key_lines
    from ..config.recbole_files import recbole_model_defaults_file
    from ..config.one_pass import unread_settings

    lines = key_lines(request.grid_file) if request.grid_file else None
    source = str(request.grid_file or "--set")
    if final_seeds is not None:
        specs = expand_search(replace(grid, final_seeds=final_seeds), overrides, unread_settings,
                              own=lambda model: tuple(recbole_model_defaults_file(model)))
        check_grid_cells(example_cells(specs), source, lines)
        return specs
    cells = expand(grid, overrides, unread_settings)
    if request.grid_file:
        check_grid_cells(cells, source, lines)
    return cells


def describe_unread(grid: Grid, overrides: dict) -> str | None:
    """A line for the models whose cells the grid's lists do not multiply (config/one_pass.py), or None."""
    from ..config.one_pass import unread_because, unread_settings

    found = unread_swept(grid, unread_settings, overrides)
    if not found:
        return None
    groups: dict[tuple, list[str]] = {}
    for model, keys in found.items():
        groups.setdefault((unread_because(model), tuple(keys)), []).append(model)
    parts = []
    for (because, keys), models in groups.items():
        one = len(models) == 1
        parts.append(f"{_listed(models)} {'is' if one else 'are'} {because}: {_listed(keys)} "
                     f"change{'s' if len(keys) == 1 else ''} nothing in {'its' if one else 'their'} numbers, so one "
                     f"cell stands for all {'its' if len(keys) == 1 else 'their'} values")
    return "; ".join(parts)


def _listed(names) -> str:
    """`a`, `a and b`, `a, b and c` (pure)."""
    names = list(names)
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def sweep_name(request: SweepRequest, grid: Grid) -> str:
    """--name, else the grid's, else `default`: a plain name (it is a folder under --output)."""
    from ..config.checks import plain_name

    return plain_name("--name" if request.name else "the grid's name", request.name or grid.name or "default")


def may_have_work(record_path: Path, cells, *, restart: bool = False, resume_from: Path | None = None) -> bool:
    """False when the sweep's record already shows as many finished cells as the grid has: the
    worker server is then not started ahead (it starts at the first cell, if any)."""
    from .record import SweepRecord

    if restart or resume_from is not None or not Path(record_path).is_file():
        return True
    finished = sum(state.state.finished for state in SweepRecord(record_path).states().values())
    return finished < len(cells)


def describe_plan(name: str, planned, output_dir: Path) -> str:
    """--dry-run: each cell with its run id and status (new, ok, failed, ...), or why it is invalid."""
    from ..run.record import RunRecord

    lines = [f"sweep {name}: {len(planned)} cell{'' if len(planned) == 1 else 's'} -> {output_dir / name}"]
    for item in planned:
        if item.error:
            lines.append(f"  invalid  {item.cell.dataset}/{item.cell.model}: {item.error}")
            continue
        record = RunRecord.read(item.run_dir)
        status = record.status.value if record else "new"
        lines.append(f"  {status:<8} {item.cell_id}")
    return "\n".join(lines)
