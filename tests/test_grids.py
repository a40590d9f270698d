"""Every cell of every shipped grid (configs/grids/) runs, at tiny sizes on a data subset.

The grids' own models, datasets, parameter lists and seeds, with tests/tiny_models.py's settings
on top (one epoch, small sizes, users with 10-60 interactions): a cell that cannot run at all
(a model refused, a key the model lacks, a dataset preset missing) fails here, not in a user's
overnight sweep.
"""


import pytest

from recrunner import Experiment, Workspace, run_experiment
from recrunner.sweep.grid import expand, expand_search, load_grid

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
    assert cells
    failed = []
    for cell in cells:
        params = {**cell.params, **tiny_params(cell.model, model_keys(cell.model)), **SUBSET}
        result = run_experiment(Experiment(cell.model, cell.dataset, params, sweep=grid.name or grid_file.stem),
                                workspace, console=False)
        if result.status != "ok":
            failed.append(f"{cell.key}: {result.error}")
    assert not failed, f"{len(failed)} of {len(cells)} cells failed:\n" + "\n".join(failed)
