"""data/placement.py: batches gathered where the model is, the same batches RecBole builds.

No GPU here: the device path is the same code with the CPU as the device, and `OnAnotherDevice`
tensors stand for a GPU's (reading one on the host, as `.numpy()` does, fails as it does on CUDA).
"""

import numpy as np
import pytest
import torch

from recrunner import Experiment, prepare
from recrunner.data import placement
from recrunner.data.cache import load_data
from recrunner.seams import batch_tables as seam
from recrunner.seams.batch_order import EpochOrder
from tests.conftest import REPO, TINY_BPR, TINY_SASREC, OnAnotherDevice


def test_where_batches_is_the_device_where_the_tables_fit():
    gpu = "cuda:0"
    assert placement.where_batches("cpu", True, 10**12, None) == placement.Where("cpu", "")
    placed = placement.where_batches(gpu, True, 60 * 2**20, 100 * 2**30)
    assert placed.device == gpu and placed.reason == "batches: built on cuda:0 (tables 60 MiB, copied once)"
    full = placement.where_batches(gpu, True, 6 * 2**30, 10 * 2**30)
    assert full.device == "cpu" and "(6.0 GiB) would take more than half of cuda:0's free memory (10.0 GiB)" in full.reason
    assert placement.where_batches(gpu, True, 5 * 2**30, 10 * 2**30).device == gpu  # exactly half fits
    assert placement.where_batches(gpu, False, 1, 10**12).reason.endswith("(batches_on_device: false)")
    assert placement.where_batches(gpu, True, 1, 10**12, "worker: 2 builds batches").device == "cpu"
    assert placement.where_batches(gpu, True, 1, None).device == gpu  # free memory unknown: try


def test_the_lines_docs_show_are_the_rule_s():
    from tests.conftest import REPO

    text = (REPO / "docs" / "fast.md").read_text()
    main_job = 43282316  # SASRec on ml-1m: the bytes of its tables (623962588 with the training set's history lists)
    assert placement.where_batches("cuda:0", True, main_job, 139 * 2**30).reason in text
    assert placement.where_batches("cuda:0", True, main_job, 64 * 2**20).reason in text


class FullSortEvalDataLoader:  # what small_evaluation_batches reads of RecBole's loader of that name
    def __init__(self, users, batches, items, sequential=False):
        self.step, self.batches, self.is_sequential = users, batches, sequential
        self._dataset = type("Dataset", (), {"item_num": items})()

    def __len__(self):
        return self.batches


ML_1M_LINE = ("evaluation: 6040 batches of 1 user (eval_batch_size 4096 holds 3417 scores of 3417 items), mostly "
              "per-batch work; eval_batch_size: 4096000 (1198 users a batch) is faster, its scores can differ in the "
              "last bits (docs/runs.md: Evaluation batches)")


def test_an_evaluation_of_one_user_a_batch_is_named_with_what_to_do():
    config = {"eval_batch_size": 4096}
    one_user = FullSortEvalDataLoader(1, 6040, 3417)  # BPR on ml-1m at RecBole's eval_batch_size
    assert placement.small_evaluation_batches(config, [None, one_user, one_user]) == ML_1M_LINE
    assert placement.small_evaluation_batches(config, [None, FullSortEvalDataLoader(2, 472, 1683)]) is None  # ml-100k
    assert placement.small_evaluation_batches(config, [None, FullSortEvalDataLoader(1, 6040, 3417, True)]) is None
    assert placement.small_evaluation_batches(config, [one_user, None]) is None  # training is not evaluation
    assert ML_1M_LINE in (REPO / "docs" / "runs.md").read_text()


def test_fast_mode_widens_only_a_full_sort_of_users_that_has_too_few():
    from recbole.model.context_aware_recommender import DeepFM
    from recbole.model.general_recommender import BPR, NeuMF
    from recbole.utils import ModelType

    from recrunner.training.fast.data import FAST_EVAL_USERS, evaluation_users, own_full_sort

    assert evaluation_users(True, True) == FAST_EVAL_USERS == 256
    assert evaluation_users(False, True) is None and evaluation_users(True, False) is None  # exact mode never
    assert own_full_sort(BPR) and not own_full_sort(NeuMF) and not own_full_sort(DeepFM)  # scored row by row
    full = {"eval_batch_size": 4096, "MODEL_TYPE": ModelType.GENERAL, "eval_args": {"mode": {"valid": "full", "test": "full"}}}
    size, line = placement.wider_full_sort(full, 3417, 256)  # BPR on ml-1m: one user a batch
    assert size == 256 * 3417 and line == (
        "fast mode: full-sort evaluation in batches of 256 users (1 a batch at eval_batch_size 4096, 3417 items); "
        "scores of several users in one product can differ in the last bits (docs/runs.md: Evaluation batches)")
    assert placement.wider_full_sort(full, 3417, None) is None
    assert placement.wider_full_sort({**full, "eval_batch_size": 4096000}, 3417, 256) is None  # 1198 users already
    assert placement.wider_full_sort({**full, "MODEL_TYPE": ModelType.SEQUENTIAL}, 3417, 256) is None  # batches users
    assert placement.wider_full_sort({**full, "eval_args": {"mode": {"valid": "full", "test": "uni100"}}}, 3417,
                                     256) is None  # a sampled evaluation's eval_batch_size counts its rows
    assert placement.wider_full_sort({**full, "eval_args": {"mode": "full"}}, 3417, 256)[0] == 256 * 3417


def test_a_fast_run_of_a_general_model_validates_in_wide_batches_with_the_same_metrics(workspace, tmp_path):
    from recrunner import Workspace, run_experiment

    params = {**TINY_BPR, "epochs": 1, "eval_batch_size": 1683}  # ml-100k [10,60]: one user a batch
    exact = run_experiment(Experiment("BPR", "ml-100k", params), workspace, console=False)
    other = Workspace(tmp_path / "fast", workspace.data_path, workspace.config_dir)
    training_as_exact = {"fast_precision": "fp32", "fast_compile": False, "fast_negatives": "numpy"}  # a GPU's defaults: bf16, torch's negatives
    fast = run_experiment(Experiment("BPR", "ml-100k", {**params, "fast": True, **training_as_exact}), other, console=False)
    log = (fast.run_dir / "run.log").read_text()
    assert "fast mode: full-sort evaluation in batches of 256 users (1 a batch at eval_batch_size 1683" in log
    assert "full-sort evaluation in batches" not in (exact.run_dir / "run.log").read_text()  # exact mode: never
    assert fast.test == pytest.approx(exact.test, abs=2e-4) and fast.best_valid == pytest.approx(exact.best_valid, abs=2e-4)


def test_host_only_names_what_needs_the_host():
    config = {"worker": 0, "transform": None}
    assert placement.host_only(config, [None]) is None
    assert placement.host_only({**config, "worker": 2}, [None]).startswith("worker: 2")
    assert placement.host_only({**config, "transform": "mask_itemseq"}, [None]).startswith("transform: mask_itemseq")

    class Dynamic:
        neg_sample_args = {"dynamic": True}

    assert "dynamic" in placement.host_only(config, [Dynamic()])


def test_a_tensor_is_on_the_device_torch_names_it_by():
    host = torch.zeros(1)
    assert seam._on(host, torch.device("cpu")) and seam._on(host, torch.device("cpu:0"))
    assert not seam._on(host, torch.device("cuda")) and not seam._on(host, torch.device("cuda:1"))


def test_a_batch_is_sent_to_a_gpu_from_pinned_memory(monkeypatch):
    calls = []  # no GPU here: what the copy asks torch for
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, device, **kw: calls.append((str(device), kw)) or self)
    rows = torch.arange(4)
    assert seam.to_device(rows, torch.device("cuda:0")) is rows
    assert calls == ["pin", ("cuda:0", {"non_blocking": True})]  # queued behind the GPU's work, never waiting for it
    calls.clear()
    seam.to_device(rows, "cpu")
    assert calls == [("cpu", {})]  # a CPU run copies nothing


def _recbole_loaders(workspace, model, params):
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    return data_preparation(config, create_dataset(config))


def _recrunner_loaders(workspace, model, params, device_only=False, monkeypatch=None):
    """recrunner's loaders (the data cache, windowed histories); device_only: the tables as a GPU's."""
    from recbole.utils import init_seed

    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    if device_only:  # every table copied "to the device" as a OnAnotherDevice tensor, the sampler's ids on the host
        wrap = lambda tensor, device, moved: tensor.as_subclass(OnAnotherDevice)  # noqa: E731
        monkeypatch.setattr(seam, "moved_to", wrap)
        monkeypatch.setattr(seam, "_on", lambda tensor, device: isinstance(tensor, OnAnotherDevice))  # where ids are
        monkeypatch.setattr(placement, "where_batches", lambda *a: placement.Where("cpu:0", "batches: on the test's device"))
    return load_data(config, workspace.cache_dir)


def _gathered(loader) -> bool:
    return loader.collate_fn.__qualname__.startswith(("gather_batches.", "gather_eval_batches.", "gather_user_batches.",
                                                   "gather_sampled_batches."))


def _host(tensor):  # with a GPU visible, recrunner's batches are on it
    return tensor.as_subclass(torch.Tensor).cpu()


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(_host(a[key]), _host(b[key])), key


def _epoch(loaders):
    from recbole.utils import init_seed

    init_seed(2020, True)
    train = [batch.interaction for batch in loaders[0]]
    valid = [batch for batch in loaders[1]]
    return train, valid, (np.random.get_state()[1].copy(), loaders[0].generator.get_state())


@pytest.mark.parametrize("model, params", [
    ("SASRec", {**TINY_SASREC, "train_batch_size": 512, "eval_batch_size": 256}),  # windowed histories, CE
    ("SASRec", {**TINY_SASREC, "loss_type": "BPR", "train_neg_sample_args": {"uniform": 1}}),  # negatives
    ("BPR", {**TINY_BPR, "train_neg_sample_args": {"uniform": 2}}),               # plain interactions
    ("BPR", {**TINY_BPR, "eval_args": {"mode": "uni100"}}),                       # sampled evaluation
    ("NeuMF", {"user_inter_num_interval": "[10,60]"}),                           # pointwise negatives, labels
    ("DeepFM", {"user_inter_num_interval": "[10,60]", "embedding_size": 8}),     # features joined, labels
])
@pytest.mark.parametrize("device_only", [False, True], ids=["cpu", "device"])
def test_an_epoch_of_gathered_batches_is_recbole_s(workspace, monkeypatch, model, params, device_only):
    expected_train, expected_valid, expected_rng = _epoch(_recbole_loaders(workspace, model, params))
    loaders = _recrunner_loaders(workspace, model, params, device_only, monkeypatch)
    assert _gathered(loaders[0])
    assert _gathered(loaders[1]) and _gathered(loaders[2])  # every evaluation: full sort, sampled, labeled
    assert all(isinstance(vars(loader)["sampler"], EpochOrder) for loader in loaders)  # rows as one tensor
    train, valid, rng = _epoch(loaders)
    assert len(train) == len(expected_train) > 1 and len(valid) == len(expected_valid)
    for a, b in zip(train, expected_train):
        _same(a, b)
        if device_only:  # pointwise negatives' labels too (RecBole makes them on the host)
            assert all(isinstance(column, OnAnotherDevice) for name, column in a.items()  # the sampler's negatives
                       if not name.startswith("neg_"))  # are sent with .to(device)
    for a, b in zip(valid, expected_valid):
        _same(a[0].interaction, b[0].interaction)
        if device_only:  # gathered there; sampled evaluation's labels are made there (torch.zeros on the device)
            assert all(isinstance(column, OnAnotherDevice) for name, column in a[0].interaction.items() if name != "label")
            assert not isinstance(a[1], tuple) or all(isinstance(part, OnAnotherDevice) for part in (*a[1], a[3]))
        for x, y in zip(a[1:], b[1:]):
            x, y = (x, y) if isinstance(x, tuple) else ((x,), (y,))  # (history users, history items)
            assert all((u is None and v is None) or torch.equal(_host(u), _host(v)) for u, v in zip(x, y))
    assert (rng[0] == expected_rng[0]).all()  # numpy's RNG moved as in RecBole: the same negatives drawn
    assert torch.equal(rng[1], expected_rng[1])  # and the loader's generator: the same order drawn
    if model == "SASRec":  # its histories made a batch at a time: the training set's lists never whole
        from recrunner.data.augmentation import WindowedColumns

        train = loaders[0]._dataset.inter_feat.interaction
        assert isinstance(train, WindowedColumns) and not any(name.endswith("_list") for name in train.made)
    if device_only:  # the dataset read whole on the host (RecBole's tree trainers do): host features
        whole = loaders[0]._dataset[:]
        assert not any(isinstance(column, OnAnotherDevice) for column in whole.interaction.values())


@pytest.mark.parametrize("device_only", [False, True], ids=["cpu", "device"])
def test_a_knowledge_graph_model_s_user_item_batches_are_gathered_and_recbole_s(workspace, monkeypatch, device_only):
    """RecBole's KnowledgeBasedDataLoader holds a user-item loader (gathered) and a triples' loader
    (RecBole's collate); in RSKG mode each batch is both, merged."""
    from recbole.utils import KGDataLoaderState, init_seed

    from .tiny_models import model_keys, tiny_params

    params = tiny_params("CKE", model_keys("CKE"))

    def epoch(loaders):
        init_seed(2020, True)
        loaders[0].set_mode(KGDataLoaderState.RSKG)
        batches = [batch.interaction for batch in loaders[0]]
        generators = [loaders[0].general_dataloader.generator, loaders[0].kg_dataloader.generator]
        return batches, np.random.get_state()[1].copy(), [g.get_state() for g in generators]

    expected, expected_rng, expected_generators = epoch(_recbole_loaders(workspace, "CKE", params))
    loaders = _recrunner_loaders(workspace, "CKE", params, device_only, monkeypatch)
    assert _gathered(loaders[0].general_dataloader) and not _gathered(loaders[0].kg_dataloader)
    batches, rng, generators = epoch(loaders)
    assert len(batches) == len(expected) > 1
    for a, b in zip(batches, expected):
        _same(a, b)
        if device_only:  # the user-item columns gathered there; the triples' and negatives' sent by the trainer
            assert isinstance(a["user_id"], OnAnotherDevice) and not isinstance(a["head_id"], OnAnotherDevice)
    assert (rng == expected_rng).all() and all(torch.equal(x, y) for x, y in zip(generators, expected_generators))


def test_rows_are_taken_by_index_select_where_the_index_is_a_row_tensor():
    columns = {"item_id": torch.arange(10) * 3, "item_id_list": torch.arange(40).reshape(10, 4),
               "timestamp": torch.rand(10)}
    rows = seam.Rows(columns)
    index = torch.tensor([7, 0, 7, 3])
    taken = rows.take(index)
    assert all(torch.equal(taken[name], column[index]) for name, column in columns.items())
    mask = torch.arange(10) % 2 == 0  # any other index: what indexing gives
    assert all(torch.equal(rows.take(mask)[name], column[mask]) for name, column in columns.items())
    with _Calls() as calls:  # a batch's row numbers: index_select, several times as fast on a CPU
        rows.take(index)
    assert torch.Tensor.__getitem__ not in calls and torch.Tensor.index_select in calls


class _Calls(torch.overrides.TorchFunctionMode, list):
    """The torch functions called inside it. (Patching `torch.Tensor.__getitem__` instead leaves
    CPython's sequence slot changed after the undo: `torch.Tensor([0-d tensors])` then fails.)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.append(func)
        return func(*args, **(kwargs or {}))


def test_ragged_rows_are_recbole_s_cats_of_per_user_tensors():
    from recrunner.seams.batch_tables import Ragged, consecutive_span

    lists = [torch.tensor([5, 3]), torch.tensor([], dtype=torch.int64), torch.tensor([7]), torch.tensor([1, 2, 9])]
    ragged = Ragged(lists)
    for index in ([0, 1, 2], [1, 2, 3], [3, 0], [2, 2], [1], [0, 2]):  # RecBole's collate, on any rows
        expected_u = torch.cat([torch.full_like(lists[i], k) for k, i in enumerate(index)])
        expected_i = torch.cat([lists[i] for i in index])
        users, items = ragged.take(np.array(index), consecutive_span(index))
        assert torch.equal(users, expected_u) and torch.equal(items, expected_i)
        assert users.dtype == items.dtype == torch.int64
    assert consecutive_span([4, 5, 6]) == (4, 7) and consecutive_span(np.array([4, 5])) == (4, 6)
    assert consecutive_span([4, 6]) is None and consecutive_span([2, 2]) is None and consecutive_span([]) is None


def test_a_table_is_copied_once_however_many_loaders_read_it(workspace, monkeypatch):
    asked, copies = [], []

    def counted(tensor, device, moved):
        asked.append(id(tensor))
        if id(tensor) not in moved:
            moved[id(tensor)] = (tensor, tensor.clone())
            copies.append(id(tensor))
        return moved[id(tensor)][1]

    monkeypatch.setattr(seam, "moved_to", counted)
    monkeypatch.setattr(placement, "where_batches", lambda *a: placement.Where("cpu:0", "x"))
    from recbole.utils import init_seed

    with_items = {"load_col": {"inter": ["user_id", "item_id", "rating", "timestamp"], "item": ["item_id", "release_year"]}}
    config = prepare(Experiment("SASRec", "ml-100k", {**TINY_SASREC, **with_items}), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    load_data(config, workspace.cache_dir)
    assert len(copies) == len(set(asked)) < len(asked)  # the item features train, valid and test share: once
