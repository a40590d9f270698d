"""bench/make_synthetic.py: the large datasets of bench_scale.py, checked at a size a test can afford."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from recrunner import Experiment, Workspace, run_experiment

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def synthetic():
    spec = importlib.util.spec_from_file_location("make_synthetic", REPO / "bench" / "make_synthetic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_size_and_seed_give_the_same_dataset_shaped_like_a_public_one(synthetic):
    columns = synthetic.synthesize(30_000)
    assert all(np.array_equal(columns[k], v) for k, v in synthetic.synthesize(30_000).items())
    assert not np.array_equal(columns["item"], synthetic.synthesize(30_000, seed=1)["item"])

    user, item, timestamp = columns["user"], columns["item"], columns["timestamp"]
    assert len(user) == 30_000 and user.max() + 1 == 200 and item.max() < 40
    lengths = np.bincount(user)
    assert lengths.min() >= 5 and np.all(np.diff(user) >= 0)  # every user, rows grouped by user
    assert np.median(lengths) < lengths.mean() < lengths.max() / 3  # long-tailed sessions
    same_user = np.diff(user) == 0
    assert np.all(np.diff(timestamp)[same_user] >= 0)  # each user's rows in time order
    popularity = np.sort(np.bincount(item))[::-1]
    assert popularity[:4].sum() > 0.15 * len(item) > 3 * popularity[-4:].sum()  # a power law's head and tail
    assert np.argmax(np.bincount(item)) != 0  # the popular ones spread over the id range
    assert set(np.unique(columns["rating"])) == {1, 2, 3, 4, 5}
    assert synthetic.name_for(5_000_000) == "synth-5M" and synthetic.name_for(30_000) == "synth-30k"


def test_recbole_reads_what_it_writes_and_a_sequential_model_trains_on_it(synthetic, tmp_path):
    columns = synthetic.synthesize(6_000)
    path = synthetic.write(columns, tmp_path / "data", "synth-6k", chunk=2_500)  # three chunks
    lines = path.read_text().splitlines()
    assert lines[0] == "user_id:token\titem_id:token\trating:float\ttimestamp:float" and len(lines) == 6_001
    assert lines[-1].split("\t") == [str(columns[k][-1]) for k in ("user", "item", "rating", "timestamp")]

    workspace = Workspace(output_dir=tmp_path / "runs", data_path=tmp_path / "data", config_dir=REPO / "configs")
    tiny = {"epochs": 1, "hidden_size": 8, "inner_size": 16, "n_layers": 1, "n_heads": 1, "MAX_ITEM_LIST_LENGTH": 10,
            "load_col": {"inter": ["user_id", "item_id", "timestamp"]}}
    result = run_experiment(Experiment("SASRec", "synth-6k", tiny), workspace, console=False)
    assert result.status == "ok", result.error


def test_its_csv_imports_to_the_atomic_file_it_writes_itself(synthetic, tmp_path):
    from recrunner.cli.main import main

    columns = synthetic.synthesize(3_000)
    atomic = synthetic.write(columns, tmp_path / "atomic", "s")
    for dates in (False, True):
        csv = synthetic.write_csv(columns, tmp_path / f"s-{dates}.csv", chunk=1_000, dates=dates)
        assert csv.read_text().splitlines()[0] == "uid,iid,stars,ts"
        assert main(["data", "import", str(csv), "--name", "s", "--data-path", str(tmp_path / f"data-{dates}"),
                     "--user", "uid", "--item", "iid", "--rating", "stars", "--time", "ts"]) == 0
        imported = (tmp_path / f"data-{dates}" / "s" / "s.inter").read_text()
        assert imported == atomic.read_text()  # dates come back as the same seconds
