"""Each dependency pin of pyproject.toml has a test here that fails without it."""

import subprocess
import sys

import numpy as np
import pytest

from recrunner.seams import config as config_seam
from recrunner.seams import environment
from recrunner.errors import EnvironmentProblem

from .conftest import TINY_BPR


def _config(model, dataset, data_path, **extra):
    from recbole.config import Config

    with config_seam.recbole_argv_cleared():
        return Config(model=model, dataset=dataset, config_dict={"data_path": str(data_path), **extra})


def test_incompatible_versions_are_named_with_their_fix():
    problems = environment.incompatibilities({"numpy": "2.1.0", "pandas": "3.0.1", "scipy": "1.13.0"})
    assert problems == [
        "numpy 2.1.0 is installed but RecBole 1.2.1's Config uses aliases numpy 2 removed: pip install 'numpy<2'",
        "pandas 3.0.1 is installed but RecBole 1.2.1 silently corrupts missing features under pandas 3: pip install 'pandas<3'",
        "scipy 1.13.0 is installed but RecBole 1.2.1's graph models (LightGCN, NGCF, NCL...) cannot be built: pip install 'scipy<1.13'",
    ]
    assert environment.incompatibilities({"numpy": "1.26.4", "pandas": "2.3.3", "scipy": "1.12.0"}) == []


def test_the_installed_environment_passes_the_check():
    environment.check_environment()


def test_check_environment_raises_a_config_error(monkeypatch):
    monkeypatch.setattr(environment, "installed_versions", lambda: {"pandas": "3.0.0"})
    with pytest.raises(EnvironmentProblem, match="pip install 'pandas<3'"):
        environment.check_environment()


def test_recbole_config_builds(tmp_path):  # numpy >= 2: AttributeError on np.float_
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


def test_lightgcn_builds_its_normalised_graph(tmp_path):
    """scipy >= 1.13 removed dok_matrix._update: LightGCN, NGCF, NCL... fail to build."""
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


def test_ray_imports_for_the_cluster_backend():
    """setuptools >= 82 drops pkg_resources, which ray 2.6.3 (RecBole's pin) imports."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import ray"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]


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
