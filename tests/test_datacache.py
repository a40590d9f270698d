"""The compact data cache: what it stores rebuilds exactly what RecBole built (recrunner.data.cache)."""

import numpy as np
import pytest
import torch

from recrunner import Experiment, prepare, run_experiment
from recrunner.data import compact, entry
from tests.conftest import TINY_BPR, TINY_SASREC
from tests.tiny_models import model_keys, tiny_params, write_ml100k_with_kg_embeddings


def _recbole_windows(source, ends, lengths, width):
    """RecBole's own fill (SequentialDataset.data_augmentation), row by row."""
    out = torch.zeros((len(ends), width, *source.shape[1:]), dtype=source.dtype)
    for i, (end, length) in enumerate(zip(ends.tolist(), lengths.tolist())):
        out[i][:length] = source[slice(end - length, end)]
    return out


@pytest.mark.parametrize("trailing", [(), (2,)])
def test_history_windows_equal_recbole_s_row_by_row_fill(trailing):
    generator = torch.Generator().manual_seed(0)
    source = torch.randint(1, 100, (300, *trailing), generator=generator)
    ends = torch.randint(0, 301, (500,), generator=generator)
    lengths = torch.minimum(torch.randint(0, 9, (500,), generator=generator), ends)
    expected = _recbole_windows(source, ends, lengths, 8)
    assert torch.equal(compact.windows(source, ends, lengths, 8), expected)
    assert torch.equal(compact.windows(source.float(), ends, lengths, 8), expected.float())
    from recrunner.data.window_rows import gather_windows, window_positions  # a batch's, made where its tables are
    assert torch.equal(gather_windows(source, *window_positions(ends, lengths, 8)), expected)
    assert torch.equal(gather_windows(source.double(), *window_positions(ends[:7], lengths[:7], 8)), expected[:7].double())


def test_locate_finds_each_row_even_among_duplicates():
    base = [np.array([3, 1, 3, 2, 1]), np.array([0.5, 0.1, 0.5, 0.2, 0.3], dtype=np.float32)]
    part = [np.array([1, 3, 3, 2]), np.array([0.1, 0.5, 0.5, 0.2], dtype=np.float32)]
    rows = compact.locate(compact.row_hash(base), compact.row_hash(part))
    assert all(np.array_equal(b[rows], p) for b, p in zip(base, part))
    assert compact.locate(compact.row_hash(base), compact.row_hash([np.array([9]), np.array([0.5], np.float32)])) is None


def test_a_part_is_its_rows_of_the_base_and_what_no_recipe_gives_is_kept_whole():
    base = {"user": torch.tensor([1, 1, 1, 2, 2]), "item": torch.tensor([5, 6, 7, 8, 9])}
    order = [4, 0, 3, 1]
    part = {"user": base["user"][order], "item": base["item"][order], "noise": torch.tensor([0.3, 0.1, 0.4, 0.1])}
    recipe = compact.describe(part, base)
    assert recipe.rows.tolist() == order and list(recipe.columns) == ["user", "item", "noise"]
    assert recipe.columns["item"] == ("take",) and recipe.full_columns == ["noise"]
    rebuilt = compact.rebuild(recipe, base)
    assert all(torch.equal(rebuilt[k], part[k]) and rebuilt[k].dtype == part[k].dtype for k in part)
    # a column that differs from the base in one value is stored as it is, never rebuilt wrong
    part["item"] = part["item"].clone()
    part["item"][2] = 99
    recipe = compact.describe(part, base)
    assert torch.equal(compact.rebuild(recipe, base)["item"], part["item"])


def _sequential_part(items, ends, lengths, width):
    base = {"user": torch.ones(len(items), dtype=torch.int64), "item": torch.tensor(items)}
    ends, lengths = torch.tensor(ends), torch.tensor(lengths)
    part = {"user": base["user"][ends], "item": base["item"][ends], "len": lengths,
            "item_list": compact.windows(base["item"], ends, lengths, width)}
    return base, part


def test_sequential_rows_with_the_same_target_are_told_apart_by_their_history():
    # item 4 twice in a row: two rows with the same target, told apart by the last item of their history
    base, part = _sequential_part([3, 4, 4, 5], ends=[3, 1, 2], lengths=[2, 1, 2], width=2)
    recipe = compact.describe(part, base, window_sources={"item_list": "item"}, length_field="len")
    assert recipe.full_columns == [] and recipe.columns["item_list"] == ("window", "item", 2)
    assert recipe.rows.tolist() == [3, 1, 2]
    rebuilt = compact.rebuild(recipe, base)
    assert all(torch.equal(rebuilt[k], part[k]) for k in part)
    # three in a row (same user, item and time) cannot be told apart by that key: the rows are then
    # stored whole, and still come back exact
    base, part = _sequential_part([3, 4, 4, 4, 5], ends=[1, 2, 3, 4], lengths=[1, 2, 2, 2], width=2)
    recipe = compact.describe(part, base, window_sources={"item_list": "item"}, length_field="len")
    assert recipe.full_columns and all(torch.equal(compact.rebuild(recipe, base)[k], part[k]) for k in part)


def test_entry_files_round_trip_narrowed_integers_and_refuse_damage(tmp_path):
    arrays = [np.arange(1000, dtype=np.int64), np.array([-5, 70000]), np.linspace(0, 1, 7, dtype=np.float32),
              np.array([2**40, 1]), np.zeros((0, 3), dtype=np.int64), np.array([True, False])]
    path = tmp_path / "e.entry"
    size = entry.write(path, {"about": "x"}, {"any": "payload"}, arrays)
    assert path.stat().st_size == size < 1000 * 8  # the first array is stored in 2 bytes a value
    header, payload, back = entry.read(path)
    assert header == {"about": "x"} and payload == {"any": "payload"}
    for a, b in zip(arrays, back):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(entry.EntryError):
        entry.read(path)
    (tmp_path / "old.pkl").write_bytes(b"\x80\x05old pickle")
    with pytest.raises(entry.EntryError):
        entry.read_header(tmp_path / "old.pkl")


KINDS = {  # dataset kind -> (model, settings)
    "sequential, augmented": ("SASRec", TINY_SASREC),
    "general": ("BPR", TINY_BPR),
    "context-aware, with user and item features": ("DeepFM", tiny_params("DeepFM", model_keys("DeepFM"))),
    "knowledge-aware": ("CKE", tiny_params("CKE", model_keys("CKE"))),
    "sequential with features": ("DIN", tiny_params("DIN", model_keys("DIN"))),
}


def _equal_interactions(a, b, what):
    assert list(a.interaction) == list(b.interaction), what
    for key in a.interaction:
        x, y = a.interaction[key], b.interaction[key]
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f"{what}: {key}"


def _assert_same_datasets(expected, got, what):
    """Every attribute of each dataset (whole, train, valid, test) equal, Interactions column by column."""
    from recbole.data.interaction import Interaction

    features = [name for name, value in vars(expected[0]).items() if isinstance(value, Interaction)]
    for original, back, part in zip(expected, got, ("dataset", "train", "valid", "test")):
        assert type(original) is type(back) and set(vars(original)) == set(vars(back)), f"{what} {part}"
        for name in features:
            _equal_interactions(getattr(original, name), getattr(back, name), f"{what} {part} {name}")
        for name, value in vars(original).items():
            if name not in ("config", "logger"):
                assert _same(value, getattr(back, name)), f"{what} {part} {name}"
    return features


def _recbole_build(config):
    """The reference: RecBole's own `build()` on a fresh dataset."""
    dataset = _fresh_dataset(config)
    return dataset, dataset.build()


def _fresh_dataset(config):
    """The dataset as a run makes it: seeded first (a random order draws from it)."""
    from recbole.utils import init_seed

    from recrunner.data import cache as datacache

    init_seed(config["seed"], config["reproducibility"])
    return datacache._dataset(config)


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_build_and_an_entry_give_back_exactly_what_recbole_built(kind, workspace):
    from recrunner.data import cache as datacache
    from recrunner.data.augmentation import WindowedColumns

    model, params = KINDS[kind]
    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    expected = _recbole_build(config)
    dataset = _fresh_dataset(config)
    built, base = datacache._split(config, dataset)
    windowed = kind.startswith("sequential")
    assert isinstance(dataset.inter_feat.interaction, WindowedColumns) == windowed
    if windowed:  # the whole dataset's history lists were never made
        assert not any(name.endswith("_list") for name in dataset.inter_feat.interaction.made)
    _assert_windowed_train(built, windowed)
    _assert_same_datasets((expected[0], *expected[1]), (dataset, *built), f"{kind}, built")

    path = workspace.output_dir / "entry"
    workspace.output_dir.mkdir(parents=True)
    size = datacache._write(path, datacache.description(config), dataset, built, base)
    back_dataset, back_built = datacache._read(path)
    _assert_windowed_train(back_built, windowed)
    assert isinstance(back_dataset.inter_feat.interaction, WindowedColumns)  # columns made when read
    assert not back_dataset.inter_feat.interaction.made and len(back_dataset.inter_feat) == len(dataset.inter_feat)
    features = _assert_same_datasets((expected[0], *expected[1]), (back_dataset, *back_built), f"{kind}, entry")
    if kind.startswith("context"):
        assert {"user_feat", "item_feat"} <= set(features)
    if kind.startswith("knowledge"):
        assert "kg_feat" in features
    assert back_built[0].field2id_token is back_dataset.field2id_token  # the id maps are stored once
    import pickle
    for whole in (dataset.inter_feat, back_dataset.inter_feat):  # pickles as a plain Interaction
        assert _same(expected[0].inter_feat, pickle.loads(pickle.dumps(whole)))
    if kind.startswith("sequential, augmented"):  # the histories are rebuilt, not stored
        header = entry.read_header(path)
        assert header["stored_whole"] == [] and size < 0.2 * _pickled_size(*expected)


def _assert_windowed_train(built, windowed):
    """A sequential train's history lists are windows, none made (data/window_rows.py); valid and
    test are plain Interactions."""
    from recrunner.data.augmentation import WindowedColumns

    train, *evaluation = (part.inter_feat.interaction for part in built)
    assert isinstance(train, WindowedColumns) == windowed
    if windowed:
        assert not any(name.endswith("_list") for name in train.made)
    assert all(type(columns) is dict for columns in evaluation)


WINDOWED = {  # name -> (model, settings): RecBole's augmentation and split, done by seams.augmentation
    "leave one out, histories cut at 3": ("SASRec", {**TINY_SASREC, "MAX_ITEM_LIST_LENGTH": 3}),
    "ratio split by user, a numerical feature": (
        "SASRec", {**TINY_SASREC, "load_col": {"inter": ["user_id", "item_id", "rating", "timestamp"]},
                   "numerical_features": ["rating"], "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]},
                                                                  "group_by": "user", "order": "TO"}}),
    "ratio split, not by user": ("GRU4Rec", {"embedding_size": 8, "hidden_size": 8, "MAX_ITEM_LIST_LENGTH": 20,
                                             "user_inter_num_interval": "[10,60]", "eval_args": {
                                                 "split": {"RS": [0.8, 0.1, 0.1]}, "group_by": None, "order": "TO"}}),
    "knowledge and sequence": ("GRU4RecKG", tiny_params("GRU4RecKG", model_keys("GRU4RecKG"))),
    "a class with its own augmentation": ("DIEN", tiny_params("DIEN", model_keys("DIEN"))),
}


@pytest.mark.parametrize("name", list(WINDOWED))
def test_the_windowed_augmentation_builds_what_recbole_builds(name, workspace):
    from recrunner.data import cache as datacache
    from recrunner.data.augmentation import WindowedColumns

    model, params = WINDOWED[name]
    if model == "GRU4RecKG":
        write_ml100k_with_kg_embeddings(workspace.data_path)  # its .ent and .rel files
    config = prepare(Experiment(model, "ml-100k", params), workspace).config
    expected = _recbole_build(config)
    dataset = _fresh_dataset(config)
    built, base = datacache._split(config, dataset)
    assert isinstance(dataset.inter_feat.interaction, WindowedColumns) == (model != "DIEN")
    _assert_same_datasets((expected[0], *expected[1]), (dataset, *built), name)
    assert list(base) == list(expected[0].inter_feat.interaction)[:len(base)]


@pytest.mark.parametrize("width", [1, 3, 50])
def test_history_rows_are_data_augmentation_s(width):
    from recrunner.data.augmentation import history_rows

    uid = np.repeat(np.array([1, 2, 5, 7]), [1, 4, 60, 2])
    rows, lengths = history_rows(uid, width)
    expected_rows, expected_lengths, last, start = [], [], None, 0  # RecBole's loop, verbatim
    for i, u in enumerate(uid):
        if last != u:
            last, start = u, i
        else:
            if i - start > width:
                start += 1
            expected_rows.append(i)
            expected_lengths.append(i - start)
    assert rows.tolist() == expected_rows and lengths.tolist() == expected_lengths


def _same(a, b) -> bool:
    """Deep equality of dataset attributes: dicts, sequences, arrays, tensors, Interactions."""
    from recbole.data.interaction import Interaction

    if isinstance(a, Interaction):  # the whole dataset's may be a WindowedInteraction
        return isinstance(b, Interaction) and len(a) == len(b) and list(a.interaction) == list(b.interaction) \
            and all(_same(a[k], b[k]) for k in a.interaction)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if type(a).__module__.startswith("recbole.sampler"):  # DIEN's dataset has one: equal by its state
        return _same(_own_state(a), _own_state(b))
    return a == b


def _own_state(obj) -> dict:
    """An object's attributes, less the datasets it refers back to."""
    from recbole.data.dataset import Dataset

    return {k: v for k, v in vars(obj).items() if not isinstance(v, Dataset)}


def _pickled_size(dataset, built) -> int:
    import pickle

    return len(pickle.dumps((dataset, built), protocol=pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize("kind", ["sequential, augmented", "general", "context-aware, with user and item features",
                                  "knowledge-aware"])
def test_a_run_from_the_cache_scores_what_a_run_without_it_scores(kind, workspace):
    model, params = KINDS[kind]
    params = {**params, "epochs": 1}
    fresh = run_experiment(Experiment(model, "ml-100k", {**params, "data_cache": False}), workspace, console=False)
    built = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False, restart=True)
    cached = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False, restart=True)
    log = (cached.run_dir / "run.log").read_text()
    assert "data cache: reusing" in log
    for result in (built, cached):
        assert result.status == "ok"
        assert result.best_valid == pytest.approx(fresh.best_valid, abs=0)
        assert result.test == pytest.approx(fresh.test, abs=0)


def test_cache_list_shows_sizes_and_prune_removes_entries_whose_files_changed(workspace, capsys):
    from recrunner.data.cache import load_data
    from recrunner.data.store import CachedEntry, prune_reason
    from tests.conftest import run_cli

    folder = workspace.data_path / "tiny"
    folder.mkdir()
    lines = ["user_id:token\titem_id:token\ttimestamp:float"] + \
        [f"u{u}\ti{(u * 7 + k) % 13}\t{k}" for u in range(6) for k in range(8)]
    (folder / "tiny.inter").write_text("\n".join(lines) + "\n")
    config = prepare(Experiment("Pop", "tiny", {"user_inter_num_interval": None}), workspace).config
    load_data(config, workspace.cache_dir)
    output = ["--output", str(workspace.output_dir)]
    code, out, _ = run_cli(capsys, ["cache", "list", *output])
    assert code == 0 and "1 entry" in out and "tiny" in out and "current" in out and "Dataset" in out

    (folder / "tiny.inter").write_text("\n".join(lines[:-8]) + "\n")  # the source changed: no run asks for it again
    code, out, _ = run_cli(capsys, ["cache", "list", *output])
    assert "stale: the files in" in out and "1 stale" in out
    code, out, _ = run_cli(capsys, ["cache", "prune", *output])
    assert code == 0 and "removed 1 entry" in out and not list(workspace.cache_dir.glob("*.entry"))
    code, out, _ = run_cli(capsys, ["cache", "prune", "--unused-days", "x", *output])
    assert code == 2

    entry_ = CachedEntry(workspace.cache_dir / "x.entry", 10, last_used=0.0, header={}, stale=None)
    assert prune_reason(entry_, everything=False, unused_days=None, now=10 * 86400) is None
    assert prune_reason(entry_, everything=False, unused_days=9, now=10 * 86400) == "unused for 10 days"
    assert prune_reason(entry_, everything=True, unused_days=None, now=0) == "--all"
