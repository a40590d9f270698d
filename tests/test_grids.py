"""Every shipped grid (configs/grids/) runs, at tiny sizes on a data subset.

Every cell passes the checks a sweep makes before it starts (keys, types, values); then a cell of
each (model, dataset) runs, the grid's own parameter values and seeds spread over those cells so
that each value runs at least once, with tests/tiny_models.py's settings on top (one epoch, small
sizes, users with 30-40 interactions): a cell that cannot run at all (a model refused, a key the
model lacks, a dataset preset missing, a value a model rejects) fails here, not in a user's
overnight sweep. Running every seed of every value again (162 cells for sequential-classic) would
find nothing more: no model's ability to run depends on the seed or on which of its values it got.
"""


import pytest

from recrunner import Experiment, Workspace, run_experiment
from recrunner.config.checks import check_grid_cells
from recrunner.sweep.grid import Cell, expand, expand_search, load_grid

from .conftest import REPO, SHARED_DATASETS
from .tiny_models import model_keys, tiny_params

SUBSET = {"user_inter_num_interval": "[30,40]", "item_inter_num_interval": "[1,inf)"}  # a few hundred users, no k-core
GRIDS = sorted((REPO / "configs" / "grids").glob("*.yaml"))


def test_there_are_grids_to_check():
    assert {path.stem for path in GRIDS} >= {"smoke", "general-classic", "sequential-classic", "search-sequential"}


@pytest.mark.parametrize("grid_file", GRIDS, ids=[path.stem for path in GRIDS])
def test_every_cell_of_a_shipped_grid_runs(grid_file, tmp_path):
    grid = load_grid(grid_file)
    needs_shared = [d for d in grid.datasets if d != "ml-100k"]
    if needs_shared and not all((SHARED_DATASETS / d / f"{d}.inter").is_file() for d in needs_shared):
        pytest.skip(f"{grid_file.name} needs {', '.join(needs_shared)} from {SHARED_DATASETS}")
    workspace = Workspace(output_dir=tmp_path / "runs", data_path=SHARED_DATASETS if needs_shared else tmp_path,
                          config_dir=REPO / "configs")
    if grid.search:  # a search grid: one example configuration per (model, dataset) from its space
        from recrunner.sweep.grid import example_cells

        cells = example_cells(expand_search(grid))
    else:
        cells = expand(grid)
    check_grid_cells(cells, grid_file.name, None)  # every cell, as a sweep checks it before its first run
    failed, run = [], covering(cells)
    for cell in run:
        params = {**cell.params, **tiny_params(cell.model, model_keys(cell.model)), **SUBSET}
        result = run_experiment(Experiment(cell.model, cell.dataset, params, sweep=grid.name or grid_file.stem),
                                workspace, console=False)
        if result.status != "ok":
            failed.append(f"{cell.key}: {result.error}")
    assert not failed, f"{len(failed)} of the {len(run)} cells run failed:\n" + "\n".join(failed)


def covering(cells: list[Cell]) -> list[Cell]:
    """One cell per (model, dataset), in the grid's order, each picked to run values of the swept
    parameters (seed included) that no cell picked before it ran, so that every value runs at least
    once where there are enough pairs; where there are not, more cells, of any pair, each the one that
    runs the most values not yet run (pure)."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.model, cell.dataset), []).append(cell)
    wanted = {(name, repr(cell.params[name])) for cell in cells for name in cell.swept if name in cell.params}
    picked: list[Cell] = []

    def new(cell: Cell) -> set:
        return {(name, repr(cell.params[name])) for name in cell.swept if name in cell.params} & wanted

    for group in groups.values():
        best = max(group, key=lambda cell: len(new(cell)))  # the first of the best: a stable choice
        picked.append(best)
        wanted -= new(best)
    left = [cell for cell in cells if new(cell) and cell not in picked]
    while wanted and left:
        best = max(left, key=lambda cell: len(new(cell)))
        picked.append(best)
        wanted -= new(best)
        left = [cell for cell in left if new(cell)]
    return picked


def test_the_covering_cells_run_each_pair_and_each_value_at_least_once():
    grid = load_grid(REPO / "configs" / "grids" / "sequential-classic.yaml")
    cells = expand(grid)
    picked = covering(cells)
    assert len(cells) == 162 and len(picked) == 18
    assert {(c.model, c.dataset) for c in picked} == {(c.model, c.dataset) for c in cells}
    for name in ("learning_rate", "seed"):
        assert {c.params[name] for c in picked} == {c.params[name] for c in cells}
    one_pair = [Cell("BPR", "ml-100k", {"learning_rate": lr, "seed": s}, ("learning_rate", "seed"))
                for lr in (0.1, 0.01, 0.001) for s in (1, 2)]
    picked = covering(one_pair)  # one pair, three values: more cells of it
    assert {c.params["learning_rate"] for c in picked} == {0.1, 0.01, 0.001} and {c.params["seed"] for c in picked} == {1, 2}
    assert len(picked) == 3
