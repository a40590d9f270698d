"""Each dependency pin of pyproject.toml and each name seams/environment.py restores has a test here that fails without it."""

import subprocess
import sys

import numpy as np
import pytest

from recrunner.seams import config as config_seam
from recrunner.seams import environment
from recrunner.core.errors import EnvironmentProblem

from .conftest import REPO, TINY_BPR


def _config(model, dataset, data_path, **extra):
    from recbole.config import Config

    environment.restore_removed_names()
    with config_seam.recbole_argv_cleared():
        return Config(model=model, dataset=dataset, config_dict={"data_path": str(data_path), **extra})


def test_incompatible_versions_are_named_with_their_fix():
    assert environment.incompatibilities({"recbole": "1.2.1", "pandas": "3.0.1"}) == [
        "pandas 3.0.1 is installed but RecBole 1.2.1 silently corrupts missing features under pandas 3: pip install 'pandas<3'",
    ]
    assert environment.incompatibilities({"pandas": "2.3.3"}) == [
        "RecBole is not installed: run `bash install.sh` in recrunner's folder, or `pip install --no-deps recbole==1.2.1`"]
    assert environment.incompatibilities({"recbole": "1.2.0", "pandas": "2.3.3"}) == [
        "recbole 1.2.0 is installed but recrunner is made for 1.2.1: pip install --no-deps recbole==1.2.1"]
    # numpy 2 and scipy >= 1.13 are not refused: restore_removed_names gives back what they removed
    assert environment.incompatibilities({"recbole": "1.2.1", "numpy": "2.4.0", "scipy": "1.17.1", "pandas": "2.3.3"}) == []


def test_the_installed_environment_passes_the_check():
    environment.check_environment()


def test_check_environment_raises_a_config_error(monkeypatch):
    monkeypatch.setattr(environment, "installed_versions", lambda: {"recbole": "1.2.1", "pandas": "3.0.0"})
    with pytest.raises(EnvironmentProblem, match="pip install 'pandas<3'"):
        environment.check_environment()


def test_a_missing_recbole_is_one_line_with_exit_code_2(monkeypatch, capsys):
    from recrunner.cli.main import main

    monkeypatch.setattr(environment, "installed_versions", lambda: {"pandas": "2.3.3"})
    assert main(["--model", "BPR", "--dataset", "ml-100k", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (
        "recrunner: error: RecBole is not installed: run `bash install.sh` in recrunner's folder, "
        "or `pip install --no-deps recbole==1.2.1`")


_BARE_CONFIG = """
import sys
from recrunner.seams import environment
if sys.argv[1] == "restored":
    environment.restore_removed_names()
from recbole.config import Config
try:
    Config(model="BPR", dataset="ml-100k", config_dict={"data_path": sys.argv[2]})
except AttributeError as exc:
    print("AttributeError", exc)
else:
    import numpy as np
    print("built", np.float is np.float64, np.long is np.int_)
"""


@pytest.mark.parametrize("restored", [False, True])
def test_recbole_config_builds_on_numpy_2_only_with_its_aliases_restored(tmp_path, restored):
    """RecBole's Config assigns np.float = np.float_ (and complex_, unicode_), which numpy 2 removed."""
    if np.lib.NumpyVersion(np.__version__) < "2.0.0":
        pytest.skip(f"numpy {np.__version__} still has the aliases")
    out = subprocess.run([sys.executable, "-c", _BARE_CONFIG, "restored" if restored else "bare", str(tmp_path)],
                         capture_output=True, text=True, timeout=300).stdout.strip().splitlines()[-1]
    assert out == ("built True True" if restored else "AttributeError `np.float_` was removed in the NumPy 2.0 "
                   "release. Use `np.float64` instead.")


def test_restoring_is_idempotent_and_leaves_numpys_own_names_alone():
    environment.restore_removed_names()
    environment.restore_removed_names()
    assert np.float_ is np.float64 and np.complex_ is np.complex128 and np.unicode_ is np.str_
    assert np.bool_ is not np.float64 and np.float32(1).dtype == np.dtype("float32")


def test_recbole_config_builds(tmp_path):
    assert _config("BPR", "ml-100k", tmp_path)["model"] == "BPR"


def test_missing_features_are_filled_not_corrupted(tmp_path):
    """pandas 3 makes RecBole's chained fillna a no-op: tokens become -2**63, floats stay NaN."""
    from recbole.data import create_dataset

    folder = tmp_path / "tiny"
    folder.mkdir()
    rows = [(u, i, 10 * u + i) for u in range(1, 8) for i in range(1, 6)]
    (folder / "tiny.inter").write_text("user_id:token\titem_id:token\ttimestamp:float\n"
                                       + "".join(f"{u}\t{i}\t{t}\n" for u, i, t in rows))
    items = ["1\tdrama\t1.5\tcomedy drama", "2\t\t\t", "3\taction\t2.5\taction", "4\tdrama\t\tdrama", "5\t\t3.5\t"]
    (folder / "tiny.item").write_text("item_id:token\tgenre:token\tprice:float\ttags:token_seq\n" + "\n".join(items) + "\n")

    dataset = create_dataset(_config("BPR", "tiny", tmp_path, load_col={"inter": ["user_id", "item_id"],
                                                                      "item": ["item_id", "genre", "price", "tags"]}))
    items = dataset.item_feat
    assert int(items["genre"].min()) >= 0  # missing token -> padding id 0
    assert not np.isnan(np.asarray(items["price"], dtype=float)).any()  # missing float -> column mean
    assert len(items["tags"]) == dataset.item_num  # token_seq loads (Series.agg(len) breaks on pandas 3)


def test_scipy_lacks_dok_update_until_it_is_restored():
    """scipy >= 1.13 removed dok_matrix._update: LightGCN, NGCF, GCMC, NCL... fail to build without it."""
    import scipy
    from scipy.sparse import dok_matrix

    code = ("from scipy.sparse import dok_matrix; from recrunner.seams import environment; "
            "print(hasattr(dok_matrix, '_update')); environment.restore_removed_names(); "
            "m = dok_matrix((2, 3)); m._update({(0, 1): 2.0, (1, 2): 1.0}); print(m.toarray().tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.split("\n")
    bare = tuple(int(p) for p in scipy.__version__.split(".")[:2]) < (1, 13)
    assert out[:2] == [str(bare), "[[0.0, 2.0, 0.0], [0.0, 0.0, 1.0]]"]
    assert hasattr(dok_matrix, "_update") or bare  # this process prepared its environment


def test_lightgcn_builds_its_normalised_graph(tmp_path):
    """The graph LightGCN builds through the restored dok_matrix._update is the normalised adjacency."""
    import torch
    from recbole.data import create_dataset, data_preparation
    from recbole.model.general_recommender import LightGCN

    config = _config("LightGCN", "ml-100k", tmp_path, user_inter_num_interval="[40,45]")
    dataset = create_dataset(config)
    train_data, _, _ = data_preparation(config, dataset)
    model = LightGCN(config, train_data._dataset)

    inter = train_data._dataset.inter_matrix(form="coo").toarray() > 0
    users, items = inter.shape
    adjacency = np.zeros((users + items, users + items))
    adjacency[:users, users:] = inter
    adjacency[users:, :users] = inter.T
    degree = adjacency.sum(1) + 1e-7
    expected = adjacency / np.sqrt(degree)[:, None] / np.sqrt(degree)[None, :]
    assert torch.allclose(model.norm_adj_matrix.to_dense().double(), torch.from_numpy(expected), atol=1e-6)


def test_the_graph_models_deprecated_sparse_constructor_is_quiet():
    """RecBole's graph models call torch.sparse.FloatTensor, which torch warns about once a process
    (in a sweep, once a cell): nothing a user can act on. In a fresh process, so the warning is not spent."""
    code = ("import torch; from recrunner.seams import environment; environment.quiet_known_warnings(); "
            "torch.sparse.FloatTensor(torch.tensor([[0], [0]]), torch.tensor([1.0]), torch.Size([1, 1]))")
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    loud = subprocess.run([sys.executable, "-c", code.replace("environment.quiet_known_warnings(); ", "")],
                          capture_output=True, text=True, cwd=REPO)
    assert quiet.returncode == loud.returncode == 0 and "is deprecated" in loud.stderr  # the fact this rests on
    assert "deprecated" not in quiet.stderr, quiet.stderr


def test_ray_imports_for_the_cluster_backend():
    """The Ray backend uses a current Ray (RecBole's ray<=2.6.3 has no wheel past Python 3.11)."""
    proc = subprocess.run([sys.executable, "-c", "import ray; print(ray.__version__)"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert tuple(int(p) for p in proc.stdout.split(".")[:2]) >= (2, 9)


def test_recbole_turns_on_anomaly_detection_for_every_model_and_model_class_turns_it_off():
    code = """
import torch
from recbole.utils import get_model
from recrunner.seams.models import model_class
get_model("SASRec")
print(torch.is_anomaly_enabled())
model_class("BPR")
print(torch.is_anomaly_enabled())
model_class("BPR", detect_anomaly=True)
print(torch.is_anomaly_enabled())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "True"]  # RecBole's sine.py, then recrunner's setting


def test_the_benches_that_time_recrunner_build_their_models_as_runs_do():
    """bench_fast.py built its models with RecBole's get_model until 2026-11-26: anomaly detection stayed
    on, slowing exact mode's backward far more than fast mode's compiled one, so its CPU speed-ups were
    inflated (BENCHMARKS.md). bench_trainer.py keeps get_model: it times both trainers on one model."""
    for name in ("bench_fast.py", "bench_placement.py", "bench_loaders.py", "fast_scoring.py"):
        text = (REPO / "bench" / name).read_text()
        assert "get_model(" not in text and "model_class(model)(config" in text, name


def test_every_name_a_bench_imports_from_recrunner_exists():
    """bench_compile.py imported CompileClock from apply.py for a day after it moved to compile_clock.py:
    benches are run by hand, so no test noticed."""
    import ast
    import importlib
    import importlib.util

    missing = []
    for path in sorted((REPO / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                missing += [f"{path.name}: import {alias.name}" for alias in node.names
                            if alias.name.startswith("recrunner") and importlib.util.find_spec(alias.name) is None]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("recrunner") and not node.level:
                module = importlib.import_module(node.module)
                missing += [f"{path.name}: from {node.module} import {alias.name}" for alias in node.names
                            if not hasattr(module, alias.name)
                            and importlib.util.find_spec(f"{node.module}.{alias.name}") is None]
    assert not missing


@pytest.mark.parametrize("asked", [False, True])
def test_a_run_trains_with_anomaly_detection_as_configured(workspace, asked):
    import torch

    from recrunner import Callback, Experiment, run_experiment

    class Seen(Callback):
        during_training = None

        def on_train_epoch_end(self, trainer, control, losses):
            Seen.during_training = torch.is_anomaly_enabled()

    torch.autograd.set_detect_anomaly(True)  # as RecBole leaves it after importing its models
    try:
        params = {**TINY_BPR, "epochs": 1, "detect_anomaly": asked}
        result = run_experiment(Experiment("BPR", "ml-100k", params), workspace, callbacks=[Seen()], console=False)
    finally:
        torch.autograd.set_detect_anomaly(False)
    assert result.status == "ok" and Seen.during_training is asked
