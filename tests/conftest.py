"""Shared fixtures: tiny configurations so the whole suite stays fast on 2 CPU cores."""

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

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
def base_args(tmp_path) -> list[str]:
    """Command-line flags that keep a CLI test's output and data inside its tmp_path."""
    (tmp_path / "data").mkdir(exist_ok=True)
    return ["--output", str(tmp_path / "runs"), "--data-path", str(tmp_path / "data"), "--config-dir", str(REPO / "configs")]


# The command line in a process that SIGKILLs itself at a chosen point, whatever the machine's speed: when
# the nth run whose folder holds `in` ends the training of epoch `epoch` (before its validation, so no
# pruning or early stop can come first).
CLI_KILLER = textwrap.dedent("""
    import json, os, signal, sys
    import recrunner.training.loop.trainer as trainer_module
    from recrunner import Callback

    spec, runs = json.loads(sys.argv[1]), []
    defaults = trainer_module.default_callbacks

    class Kill(Callback):
        def on_train_epoch_end(self, trainer, control, losses):
            if trainer.epoch == spec["epoch"]:
                os.kill(os.getpid(), signal.SIGKILL)

    def with_kill(config, run_dir=None):
        callbacks = defaults(config, run_dir)
        if run_dir is not None and spec["in"] in str(run_dir):
            runs.append(run_dir)
            if len(runs) == spec["nth"]:
                callbacks.append(Kill())
        return callbacks

    trainer_module.default_callbacks = with_kill
    from recrunner.cli.main import main
    sys.exit(main(spec["argv"]))
""")


def run_cli_until_killed(argv, inside: str, nth: int = 1, epoch: int = 0) -> None:
    """Run the command line with `argv` until the SIGKILL of CLI_KILLER; fail when it ends otherwise."""
    spec = {"argv": list(argv), "in": inside, "nth": nth, "epoch": epoch}
    done = subprocess.run([sys.executable, "-c", CLI_KILLER, json.dumps(spec)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, f"exit {done.returncode}: {done.stderr[-2000:]}"


def run_cli(capsys, argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `recrunner.cli.main(argv)`."""
    from recrunner.cli.main import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


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
    """A run's hparams row (values, status) and the columns TensorBoard shows for its output folder."""
    from tensorboard.plugins.hparams import metadata

    from recrunner.run.hparams_columns import columns_file
    from recrunner.core.layout import HPARAMS_ROW as HPARAMS_FILE
    from recrunner.training.logging.tensorboard import read_session

    hparams, status = read_session(run_dir / HPARAMS_FILE)
    columns, metric_tags = [], []
    root = next((p for p in run_dir.parents if columns_file(p).is_file()), None)
    if root is not None:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

        for event in EventFileLoader(str(columns_file(root))).Load():
            for value in event.summary.value:
                if value.tag == metadata.EXPERIMENT_TAG:
                    experiment = metadata.parse_experiment_plugin_data(value.metadata.plugin_data.content)
                    columns = [info.name for info in experiment.hparam_infos]
                    metric_tags = [m.name.tag for m in experiment.metric_infos]
    return {"hparams": hparams, "status": status, "columns": columns, "metric_tags": metric_tags}


@pytest.fixture
def mini_dataset(workspace) -> str:
    """A second small dataset, 'ml-mini': the first 40,000 interactions of ml-100k, in data_path."""
    return write_mini_dataset(workspace.data_path)


def write_mini_dataset(data_path: Path) -> str:
    import recbole

    source = Path(recbole.__file__).parent / "dataset_example" / "ml-100k" / "ml-100k.inter"
    folder = data_path / "ml-mini"
    folder.mkdir(parents=True, exist_ok=True)
    lines = source.read_text().splitlines(keepends=True)[:40001]
    (folder / "ml-mini.inter").write_text("".join(lines))
    return "ml-mini"


def trainer_and_data(workspace, model_name: str, params: dict, callbacks=()):
    """A CustomTrainer (the model's trainer class) and its data, built as RecBole's run_recbole does."""
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    from recrunner import Experiment, prepare
    from recrunner.seams.models import model_class  # get_model, and torch's anomaly detection off as a run has it

    prepared = prepare(Experiment(model_name, "ml-100k", params), workspace)
    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    train, valid, test = data_preparation(config, create_dataset(config))
    init_seed(config["seed"], config["reproducibility"])
    model = model_class(model_name)(config, train._dataset).to(config["device"])
    return prepared.trainer_class(config, model, callbacks=callbacks), train, valid, test


def model_and_sequences(root: Path, model_name: str, params: dict):
    """RecBole's `model_name` built as a run builds it (ml-100k, `params`), and 40 sequences of every length from
    1 to MAX_ITEM_LIST_LENGTH 10, padded after the last item as RecBole pads: (model, items, lengths)."""
    (root / "datasets").mkdir(exist_ok=True)
    workspace = Workspace(output_dir=root / "runs", data_path=root / "datasets", config_dir=REPO / "configs")
    trainer, *_ = trainer_and_data(workspace, model_name, params)
    model = trainer.model
    torch.manual_seed(0)
    lengths = torch.arange(1, 11).repeat(4)
    items = torch.randint(1, model.n_items, (len(lengths), 10))
    items[torch.arange(10).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return model, items.to(trainer.device), lengths.to(trainer.device)


# Losses bit for bit on a CPU. A GPU's kernels that add with atomics (an embedding's backward) repeat only to
# its run-to-run tolerance without `deterministic: true`, which plain RecBole does not set and BPR cannot
# have there (index_add_cuda_): on an H200 an epoch's summed loss came out 47.96397161 against 47.96397257
# (2e-8 relative) in the GPU check of 2026-11-27, a resumed BPR's 1.0e-9 from the uninterrupted run's in
# that of 2026-11-29 (BENCHMARKS.md).
LOSSES = {"rel": 1e-6, "abs": 0} if torch.cuda.is_available() else {"rel": 0, "abs": 0}


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two tensors equal to `LOSSES`: bit for bit on a CPU, to a GPU's run-to-run tolerance there."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, rtol=LOSSES["rel"], atol=LOSSES["abs"])


class OnAnotherDevice(torch.Tensor):
    """A CPU test's stand-in for a tensor on a GPU, which CI has not: numpy and tolist refuse it as they
    refuse a CUDA tensor, and `.cpu()` brings it back as an ordinary tensor. For the CUDA paths CI cannot run."""

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                        "to host memory first.")

    def tolist(self):
        raise TypeError("a device tensor was read on the host")

    def cpu(self, *args, **kwargs):
        return torch.Tensor.cpu(self).as_subclass(torch.Tensor)


def elsewhere(value):
    """`value` (a tensor, or a dict or list of them) as if on another device (`OnAnotherDevice`)."""
    if isinstance(value, torch.Tensor):
        return value.as_subclass(OnAnotherDevice)
    if isinstance(value, dict):
        return {k: elsewhere(v) for k, v in value.items()}
    if isinstance(value, list):
        return [elsewhere(v) for v in value]
    return value


class Unmixable(OnAnotherDevice):
    """`OnAnotherDevice` that also refuses to meet an ordinary tensor (of one or more dimensions) in an
    operation, as torch's device check refuses a CPU and a CUDA tensor (the positives on the host while
    the scores are on a GPU); `.to(...)` brings it over as an ordinary tensor."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_leaves

        kwargs = kwargs or {}
        if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
            return super().__torch_function__(func, types, args, kwargs).as_subclass(torch.Tensor)
        tensors = [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        if any(isinstance(t, cls) for t in tensors) and any(not isinstance(t, cls) and t.dim() > 0 for t in tensors):
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices ({func.__name__})")
        return super().__torch_function__(func, types, args, kwargs)
