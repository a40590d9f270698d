"""Shared fixtures: tiny configurations so the whole suite stays fast on 2 CPU cores."""

from pathlib import Path

import pytest

from recrunner import Workspace

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"

# SASRec at a size that trains an epoch in about a second on ml-100k (users with 10-60 items)
TINY_SASREC = {
    "hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1, "MAX_ITEM_LIST_LENGTH": 10,
    "train_batch_size": 2048, "user_inter_num_interval": "[10,60]", "epochs": 2,
}
TINY_BPR = {"embedding_size": 8, "user_inter_num_interval": "[10,60]", "epochs": 2}


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    (tmp_path / "datasets").mkdir()
    return Workspace(output_dir=tmp_path / "runs", data_path=tmp_path / "datasets", config_dir=REPO / "configs")


@pytest.fixture
def shared_datasets() -> Path:
    if not (SHARED_DATASETS / "ml-1m" / "ml-1m.inter").is_file():
        pytest.skip(f"real datasets not found at {SHARED_DATASETS}")
    return SHARED_DATASETS


def read_scalars(run_dir: Path) -> dict:
    """{tag: [(step, value), ...]} read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def read_hparams(run_dir: Path) -> dict:
    """The hparams plugin data of a run: hparams, metric tags and status."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, metadata

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    contents = {tag: meta.plugin_data.content for tag, meta in accumulator.summary_metadata.items()
                if meta.plugin_data.plugin_name == metadata.PLUGIN_NAME}
    start = metadata.parse_session_start_info_plugin_data(contents[metadata.SESSION_START_INFO_TAG])
    experiment = metadata.parse_experiment_plugin_data(contents[metadata.EXPERIMENT_TAG])
    end = contents.get(metadata.SESSION_END_INFO_TAG)
    return {
        "hparams": {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()},
        "metric_tags": [m.name.tag for m in experiment.metric_infos],
        "status": api_pb2.Status.Name(metadata.parse_session_end_info_plugin_data(end).status) if end else None,
    }


@pytest.fixture
def mini_dataset(workspace) -> str:
    """A second small dataset, 'ml-mini': the first 40,000 interactions of ml-100k, in data_path."""
    import recbole

    source = Path(recbole.__file__).parent / "dataset_example" / "ml-100k" / "ml-100k.inter"
    folder = workspace.data_path / "ml-mini"
    folder.mkdir(parents=True, exist_ok=True)
    lines = source.read_text().splitlines(keepends=True)[:40001]
    (folder / "ml-mini.inter").write_text("".join(lines))
    return "ml-mini"
