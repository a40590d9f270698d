"""Sweep decisions as pure functions: grid expansion, the record's fold and decide, the tables."""

import json
import signal

import pytest

from recrunner import ConfigError
from recrunner.sweep import Grid, expand, grid_from_mapping, load_grid, swept_parameters
from recrunner.sweep.grid import unread_swept
from recrunner.sweep.request import describe_unread
from recrunner.sweep.executors import died
from recrunner.sweep.record import CellState, SweepRecord, decide, fold
from recrunner.sweep.results import cell_row, results_csv, results_markdown
from recrunner.report.tables import best_configurations
from recrunner.sweep.planning import dispatch_order

from .conftest import REPO


def test_grid_expands_models_datasets_swept_params_model_blocks_and_seeds():
    grid = grid_from_mapping({
        "models": ["SASRec", "GRU4Rec"], "datasets": ["ml-100k"],
        "params": {"learning_rate": [0.001, 0.01], "epochs": 3},
        "model_params": {"SASRec": {"n_layers": [1, 2]}},
        "seeds": [1, 2], "fixed": {"topk": [10, 20]},
    })
    cells = expand(grid, overrides={"epochs": 5})
    assert len(cells) == 2 * 2 * 2 + 2 * 2          # SASRec: lr x layers x seeds; GRU4Rec: lr x seeds
    first = cells[0]
    assert first.params == {"epochs": 5, "learning_rate": 0.001, "n_layers": 1, "topk": [10, 20], "seed": 1}
    assert first.swept == ("learning_rate", "n_layers", "seed")
    assert swept_parameters(cells) == ["learning_rate", "n_layers", "seed"]
    assert len({cell.key for cell in cells}) == len(cells)


def test_repeats_make_consecutive_seeds_and_an_override_stops_a_sweep():
    grid = grid_from_mapping({"models": ["BPR"], "datasets": ["ml-100k"], "params": {"learning_rate": [0.1, 0.2]},
                              "repeats": 3})
    assert [c.params["seed"] for c in expand(grid)] == [2020, 2021, 2022, 2020, 2021, 2022]
    assert len(expand(grid, overrides={"learning_rate": 0.5})) == 3


def _unread(model):
    return frozenset({"learning_rate", "train_batch_size"}) if model in ("Pop", "ItemKNN") else frozenset()


def test_a_model_that_does_not_read_a_swept_setting_gets_one_cell_for_all_its_values():
    grid = grid_from_mapping({"models": ["BPR", "ItemKNN"], "datasets": ["d"], "seeds": [1, 2],
                              "params": {"learning_rate": [0.1, 0.01], "train_batch_size": [256, 512], "epochs": 3},
                              "model_params": {"ItemKNN": {"k": [10, 50]}}})
    cells = expand(grid, unread=_unread)
    knn = [cell for cell in cells if cell.model == "ItemKNN"]
    assert len(cells) == 2 * 2 * 2 + 2 * 2      # BPR: lr x batch x seeds; ItemKNN: its own k x seeds
    assert [cell.params for cell in knn[:2]] == [{"epochs": 3, "k": 10, "seed": 1}, {"epochs": 3, "k": 10, "seed": 2}]
    assert knn[0].swept == ("k", "seed")
    assert len(expand(grid)) == 2 * 2 * 2 + 2 * 2 * 2 * 2  # without `unread`, every value multiplies
    fixed = expand(grid, overrides={"learning_rate": 0.5}, unread=_unread)  # an override is taken as it is
    assert all(cell.params["learning_rate"] == 0.5 for cell in fixed)
    assert unread_swept(grid, _unread) == {"ItemKNN": ["learning_rate", "train_batch_size"]}
    assert unread_swept(grid, _unread, {"learning_rate": 0.5}) == {"ItemKNN": ["train_batch_size"]}


def test_the_grid_says_which_models_get_one_cell_for_the_values_they_do_not_read():
    grid = grid_from_mapping({"models": ["BPR", "Pop", "ItemKNN", "EASE"], "datasets": ["d"],
                              "params": {"learning_rate": [0.1, 0.01], "train_batch_size": [256, 512]}})
    assert describe_unread(grid, {}) == (
        "Pop is fitted in one pass: learning_rate changes nothing in its numbers, so "
        "one cell stands for all its values; ItemKNN and EASE are fitted in one pass: "
        "learning_rate and train_batch_size change nothing in their numbers, so one cell stands for all their values")
    assert describe_unread(grid_from_mapping({"models": ["BPR"], "datasets": ["d"],
                                              "params": {"learning_rate": [0.1, 0.01]}}), {}) is None
    trees = grid_from_mapping({"models": ["LightGBM", "XGBoost"], "datasets": ["d"],
                               "params": {"learning_rate": [0.1, 0.01], "epochs": [2, 4]}})
    assert describe_unread(trees, {}) == (  # XGBoost boosts on each epoch: its epochs count
        "LightGBM is fitted in one pass: epochs and learning_rate change nothing in its numbers, so one cell stands for "
        "all their values; XGBoost is not a torch model (boosted trees): learning_rate changes nothing in its numbers, "
        "so one cell stands for all its values")


def test_a_search_leaves_out_what_a_model_does_not_read_and_gives_nothing_to_tune_one_trial():
    from recrunner.sweep.grid import expand_search

    grid = grid_from_mapping({"models": ["BPR", "Pop"], "datasets": ["d"], "search": "tpe",
                              "params": {"learning_rate": {"loguniform": [1e-4, 1e-2]}}})
    own = {"BPR": ("embedding_size",), "Pop": (), "ItemKNN": ("k", "shrink")}.get
    bpr, pop = expand_search(grid, unread=_unread, own=own)
    assert (list(bpr.space), bpr.trials, bpr.unread) == (["learning_rate"], None, ())
    assert (pop.space, pop.trials, pop.unread) == ({}, 1, ("learning_rate",))
    with pytest.raises(ConfigError, match=r"learning_rate changes nothing in ItemKNN's numbers; "
                                          r"search its own parameters \(k, shrink\) under model_params"):
        expand_search(grid_from_mapping({**{"models": ["ItemKNN"], "datasets": ["d"], "search": "tpe"},
                                         "params": {"learning_rate": [0.1, 0.2]}}), unread=_unread, own=own)
    with pytest.raises(ConfigError, match="has nothing to search: give a list or a distribution"):
        expand_search(grid_from_mapping({"models": ["Pop"], "datasets": ["d"], "search": "tpe"}), unread=_unread, own=own)


@pytest.mark.parametrize("raw, message", [
    ({"models": "BPR", "datasets": ["d"], "seeds": [1], "repeats": 2}, "seeds or repeats, not both"),
    ({"models": ["BPR"], "datasets": ["d"], "seeds": ["a"]}, "seeds must be a list of integers"),
    ({"models": ["BPR"], "datasets": ["d"], "seeds": 3},
     r"seeds: 3 could be one seed or 3 seeds; write seeds: \[3\] for seed 3, or repeats: 3 for 3 seeds"),
    ({"models": ["BPR"], "datasets": ["d"], "params": [1]}, "params must be a mapping"),
    ({"models": [1], "datasets": ["d"]}, "models must be a list of names"),
])
def test_malformed_grids_are_one_clear_error(raw, message):
    with pytest.raises(ConfigError, match=message):
        grid_from_mapping(raw)


def test_grid_files_shipped_in_configs_load(tmp_path):
    from recrunner.sweep.grid import expand_search

    for path in sorted((REPO / "configs" / "grids").glob("*.yaml")):
        grid = load_grid(path)
        assert (expand_search(grid) if grid.search else expand(grid)), path
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [BPR]\ndatasets: [ml-100k]\nparam: {learning_rate: [1, 2]}\n")
    with pytest.raises(ConfigError, match="unknown grid key"):
        load_grid(bad)
    assert expand(Grid(models=("BPR",), datasets=("ml-100k",)))[0].params == {}


def _line(cell, state, t, owner="h:1", **extra):
    return {"t": t, "cell": cell, "state": state, "owner": owner, **extra}


def test_cells_sharing_a_dataset_are_spread_apart_so_parallel_workers_build_different_ones():
    cells = [("ml/SASRec/a", "ml"), ("ml/SASRec/b", "ml"), ("ml/GRU/a", "ml"), ("az/SASRec/a", "az"),
             ("az/SASRec/b", "az"), ("yelp/BPR/a", "yelp")]
    assert dispatch_order(cells) == ["ml/SASRec/a", "az/SASRec/a", "yelp/BPR/a", "ml/SASRec/b", "az/SASRec/b",
                                     "ml/GRU/a"]
    assert dispatch_order([("a", "k"), ("b", "k")]) == ["a", "b"]
    assert dispatch_order([]) == []


def test_fold_keeps_the_last_state_failures_and_heartbeats_of_the_current_owner():
    states = fold([
        _line("a", "pending", 1), _line("a", "running", 2), _line("a", "failed", 3, error="boom"),
        _line("a", "running", 4, owner="h:2"), _line("a", "heartbeat", 9, owner="h:2"),
        _line("a", "heartbeat", 10, owner="h:1"),  # a late line from an old owner changes nothing
        _line("b", "pending", 1), _line("b", "ok", 5),
    ])
    assert states["a"] == CellState(state="running", owner="h:2", seen=9, failures=1, error="boom")
    assert states["b"].state == "ok"


def test_a_pending_line_registers_a_new_cell_and_never_undoes_a_claim_a_failure_or_an_end():
    states = fold([  # another sweep process planned the cells after this one had claimed or ended them
        _line("a", "pending", 1), _line("a", "running", 2, owner="h:1"), _line("a", "pending", 3, owner="h:2"),
        _line("b", "failed", 1, error="boom"), _line("b", "pending", 2),
        _line("c", "ok", 1), _line("c", "pending", 2),
    ])
    assert states["a"] == CellState(state="running", owner="h:1", seen=2)  # h:2's claim now finds it busy
    assert states["b"] == CellState(state="failed", owner="h:1", seen=1, failures=1, error="boom")
    assert states["c"].state == "ok"


@pytest.mark.parametrize("state, alive, now, retries, expected", [
    (CellState("pending"), None, 0, 0, "run"),
    (CellState("interrupted"), None, 0, 0, "run"),
    (CellState("failed", failures=1), None, 0, 0, "failed"),
    (CellState("failed", failures=1), None, 0, 1, "run"),
    (CellState("failed", failures=2), None, 0, 1, "failed"),
    (CellState("running", owner="h:1", seen=100), True, 10_000, 0, "busy"),
    (CellState("running", owner="h:1", seen=100), False, 101, 0, "reclaim"),      # its process is gone
    (CellState("running", owner="x:1", seen=100), None, 200, 0, "busy"),          # another host, fresh
    (CellState("running", owner="x:1", seen=100), None, 500, 0, "reclaim"),       # another host, stale
    (CellState("ok"), None, 0, 0, "ok"),
])
def test_decide(state, alive, now, retries, expected):
    assert decide(state, now=now, stale_after=300, retries=retries, owner_alive=lambda owner: alive) == expected


def test_decide_runs_a_cell_the_record_says_finished_when_its_metrics_json_is_gone():
    for state in ("ok", "pruned"):
        assert decide(CellState(state), now=0, stale_after=300, retries=0, owner_alive=lambda owner: None,
                      finished_on_disk=lambda: False) == "run"
        assert decide(CellState(state), now=0, stale_after=300, retries=0, owner_alive=lambda owner: None,
                      finished_on_disk=lambda: True) == state


def test_record_ignores_a_line_cut_short_and_claims_under_a_lock(tmp_path):
    record = SweepRecord(tmp_path / "sweep.jsonl", owner="host:1")
    record.append("a", "pending")
    with open(record.path, "ab") as f:
        f.write(b'{"t": 3, "cell": "a", "sta')  # a kill in the middle of a write
    assert record.states()["a"].state == "pending"
    assert record.claim("a", stale_after=300, retries=0) == "run"
    assert record.states()["a"].state == "running"


def test_record_reads_each_line_once_and_sees_other_writers_and_a_restart(tmp_path, monkeypatch):
    path = tmp_path / "sweep.jsonl"
    mine, other = SweepRecord(path, owner="host:1"), SweepRecord(path, owner="host:2")
    for cell in "abc":
        mine.append(cell, "pending")
    assert set(mine.states()) == {"a", "b", "c"}
    other.append("a", "running")
    with open(path, "ab") as f:
        f.write(b'{"t": 3, "cell": "b", "state": "ok"')  # a writer still (or never) finishing its line
    folded = []
    monkeypatch.setattr("recrunner.sweep.record.fold", lambda lines, cells=None: folded.extend(lines) or fold(lines, cells))
    states = mine.states()
    assert [line["cell"] for line in folded] == ["a"]  # only what was appended since the last read
    assert states["a"] == CellState(state="running", owner="host:2", seen=states["a"].seen)
    assert states["b"].state == "pending"
    other.append("c", "failed", error="boom")  # ends the cut line: the fragment is dropped, this one kept
    assert mine.states()["c"].failures == 1 and mine.states()["b"].state == "pending"
    assert mine.states() == SweepRecord(path).states()  # the same as reading the whole file
    path.unlink()  # --restart
    assert mine.states() == {}
    other.append("z", "pending")
    assert set(mine.states()) == {"z"}


def test_a_dead_worker_is_named_with_its_signal():
    assert died(-signal.SIGKILL) == "worker process killed by SIGKILL (out of memory? the kernel's OOM killer sends SIGKILL)"
    assert died(-signal.SIGSEGV) == "worker process killed by SIGSEGV"
    assert died(3) == "worker process exited with code 3 without a result"


def _row(model, dataset, lr, seed, valid, test, status="ok"):
    return {"cell": f"{dataset}/{model}/lr={lr},seed={seed}", "model": model, "dataset": dataset, "learning_rate": lr,
            "seed": seed, "status": status, "best_valid_score": valid, "valid_metric": "mrr@10",
            "test/ndcg@10": test, "valid/mrr@10": valid}


def test_tables_select_on_validation_report_test_mean_std_and_bold_the_best():
    rows = [
        _row("SASRec", "ml-1m", 0.001, 1, 0.30, 0.10), _row("SASRec", "ml-1m", 0.001, 2, 0.32, 0.12),
        _row("SASRec", "ml-1m", 0.01, 1, 0.20, 0.50), _row("SASRec", "ml-1m", 0.01, 2, 0.22, 0.52),  # best test, worse valid
        _row("GRU4Rec", "ml-1m", 0.001, 1, 0.25, 0.08), _row("GRU4Rec", "ml-1m", 0.001, 2, 0.27, 0.10),
        _row("GRU4Rec", "ml-1m", 0.01, 1, None, None, status="failed"),
    ]
    chosen = best_configurations(rows, ["learning_rate", "seed"])
    assert [r["learning_rate"] for r in chosen[("SASRec", "ml-1m")]] == [0.001, 0.001]
    markdown = results_markdown(rows, ["learning_rate", "seed"], "Sweep t")
    assert "| SASRec | **0.1100 ± 0.0141 (n=2)** |" in markdown
    assert "| GRU4Rec | 0.0900 ± 0.0141 (n=2) |" in markdown
    assert "7 cells: 1 failed, 6 ok." in markdown and "## cells not finished" in markdown
    header = results_csv(rows, ["learning_rate", "seed"]).splitlines()[0]
    assert header.startswith("cell,model,dataset,learning_rate,seed,status,error,best_epoch")


def test_a_cell_row_reads_metrics_json_and_marks_missing_ones_pending(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({
        "status": "ok", "seed": 7, "best_epoch": 3, "best_valid": {"mrr@10": 0.2}, "test": {"mrr@10": 0.1},
        "data_seconds": 1.0, "train_seconds": 2.0, "test_seconds": 0.5}))
    row = cell_row("c", "BPR", "ml-100k", {"learning_rate": 0.1}, ["learning_rate"], tmp_path)
    assert row["status"] == "ok" and row["seconds"] == 3.5 and row["valid/mrr@10"] == 0.2 and row["seed"] == 7
    assert cell_row("c", "BPR", "ml-100k", {}, [], tmp_path / "none")["status"] == "pending"


def test_tables_are_rewritten_after_each_cell_unless_that_costs_more_than_a_tenth_of_the_time():
    from recrunner.sweep.tables import TableSchedule

    schedule = TableSchedule(share=0.1)
    assert schedule.due(0.0)  # never written
    schedule.written(10.0, 10.01)  # 10 ms: due again 0.1 s later
    assert not schedule.due(10.05) and schedule.due(10.11)
    schedule.written(20.0, 21.0)  # a big table took 1 s: not before 10 s have passed
    assert not schedule.due(25.0) and schedule.due(31.0)
