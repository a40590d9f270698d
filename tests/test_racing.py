"""Racing over seeds: the pure race (report/racing.py), the selection that plans its runs from run
folders (sweep/selection.py), racing grids and searches end to end, a kill during the race, and
two commands racing one sweep at once."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from recrunner.core.errors import ConfigError
from recrunner.report.racing import Run, race
from recrunner.report.stats import user_differences
from recrunner.sweep.grid import check_select_settings
from tests.conftest import REPO, run_cli, run_cli_until_killed

SEEDS = (2020, 2021, 2022)
USERS = np.arange(400)


def _run(mean: float, seed: int, spread: float = 0.1) -> Run:
    """A run whose per-user mrr@10 values average `mean` (users in the same order every time)."""
    noise = np.random.default_rng(seed).normal(0, spread, len(USERS))
    values = mean + noise - noise.mean()
    return Run(float(values.mean()), {"users": USERS, "mrr@10": values})


def test_a_clearly_worse_contender_is_dropped_after_its_second_seed_and_the_best_mean_is_picked():
    means = {"a": 0.300, "b": 0.305, "c": 0.10, "d": 0.05}
    first = {"a": 0.33, "b": 0.30, "c": 0.29, "d": 0.05}  # c's first seed was lucky; d is not in the top 3
    runs = {(k, 2020): _run(means[k], 10 + i) for i, k in enumerate(first)}
    result = race(first, runs, SEEDS, top=3, metric="mrr@10")
    assert result.pick is None and sorted(result.wanted) == [("a", 2021), ("b", 2021), ("c", 2021)]
    runs.update({(k, 2021): _run(means[k], 20 + i) for i, k in enumerate("abc")})
    result = race(first, runs, SEEDS, top=3, metric="mrr@10")
    states = {s.key: s.state for s in result.standings}
    assert states == {"a": "racing", "b": "racing", "c": "dropped", "d": "out"}
    assert "worse than" in next(s.reason for s in result.standings if s.key == "c")
    assert sorted(result.wanted) == [("a", 2022), ("b", 2022)]  # the dropped run no more seeds
    runs.update({(k, 2022): _run(means[k], 30 + i) for i, k in enumerate("ab")})
    result = race(first, runs, SEEDS, top=3, metric="mrr@10")
    assert result.pick == "b" and not result.wanted  # the best mean over 3 seeds, not the best first seed
    picked = next(s for s in result.standings if s.key == "b")
    assert picked.state == "picked" and len(picked.scores) == 3


def test_contenders_that_a_test_cannot_tell_apart_all_run_every_seed():
    first = {"a": 0.30, "b": 0.30}
    runs = {(k, s): _run(0.30, s * 7 + i) for s in SEEDS for i, k in enumerate(first)}
    result = race(first, runs, SEEDS, top=2, metric="mrr@10")
    assert result.pick in first and {len(s.scores) for s in result.standings} == {3}
    other = next(s for s in result.standings if s.key != result.pick)
    assert other.state == "kept" and "not significantly worse" in other.reason


def test_a_user_counts_once_however_many_seeds_ran():
    """Two seeds that repeat the same per-user differences are no more evidence than one: pooled as
    80 pairs they would give p = 0.02 and drop b; as 40 users' mean differences, p = 0.10."""
    differences = np.random.default_rng(3).normal(-0.02, 0.1, 40)
    users = np.arange(40)
    leader = {"users": users, "mrr@10": np.full(40, 0.5)}
    other = {"users": users, "mrr@10": 0.5 + differences}
    runs = {(k, s): Run(float(values["mrr@10"].mean()), values) for s in SEEDS[:2]
            for k, values in (("a", leader), ("b", other))}
    result = race({"a": 0.5, "b": 0.49}, runs, SEEDS[:2], top=2, metric="mrr@10")
    assert result.pick == "a" and next(s for s in result.standings if s.key == "b").state == "kept"
    assert user_differences([users, users], [other["mrr@10"]] * 2, [leader["mrr@10"]] * 2) == pytest.approx(differences)


def test_a_race_ends_when_one_contender_is_left_and_a_failed_run_drops_its_contender():
    first = {"a": 0.3, "b": 0.2}
    runs = {("a", 2020): _run(0.3, 1), ("b", 2020): _run(0.2, 2), ("a", 2021): _run(0.3, 3), ("b", 2021): Run(None)}
    result = race(first, runs, SEEDS, top=2, metric="mrr@10")
    assert result.pick == "a" and not result.wanted  # no third seed: nothing left to race
    assert next(s for s in result.standings if s.key == "b").reason == "its seed 2021 run failed"


def test_a_metric_where_smaller_is_better_races_the_other_way():
    first = {"low": 0.10, "high": 0.50}
    runs = {(k, s): _run(first[k], s + i) for i, k in enumerate(first) for s in SEEDS}
    result = race(first, runs, SEEDS, top=2, metric="mrr@10", bigger=False)
    assert result.pick == "low" and next(s for s in result.standings if s.key == "high").state == "dropped"


def test_without_per_user_values_nothing_is_dropped_on_a_test():
    first = {"a": 0.3, "b": 0.1}
    runs = {(k, s): Run(first[k]) for k in first for s in SEEDS}
    result = race(first, runs, SEEDS, top=2, metric="mrr@10")
    assert result.pick == "a" and {s.state for s in result.standings} == {"picked", "kept"}


def test_a_group_with_no_finished_configuration_has_no_race_and_holds_nothing_up(tmp_path):
    from types import SimpleNamespace

    from recrunner.run.record import RunRecord, Status
    from recrunner.sweep.selection import GridRacing, SelectOptions, Selection

    cells = []
    for i in range(3):  # every first run failed: nothing to race, and the sweep is not kept waiting
        run_dir = tmp_path / f"run{i}"
        run_dir.mkdir()
        RunRecord(status=Status.FAILED, error="loss is NaN", model="BPR", dataset="d").write(run_dir / "metrics.json")
        cells.append(SimpleNamespace(cell_id=f"d/BPR/run{i}", run_dir=run_dir, config={"seed": 2020, "valid_metric": "MRR@10"},
                                     cell=SimpleNamespace(model="BPR", dataset="d", params={})))
    planned = lambda first, seed, role: pytest.fail("no run is planned for a race with no contender")  # noqa: E731
    racing = GridRacing(cells, Selection(planned, SelectOptions(top=2), tmp_path), seeds=3)
    assert racing.more(2) == [] and racing.exhausted() and racing.budget_left() == 0
    search_side = Selection(planned, SelectOptions(top=2), tmp_path)
    search_side.add("d/BPR", [], (2020, 2021, 2022))  # a search whose every trial was pruned
    assert search_side.more() == [] and search_side.over("d/BPR")
    assert not (tmp_path / "selection.json").exists()


@pytest.mark.parametrize("settings, message", [
    ({"select_top": 1}, "select_top must be a whole number >= 2"),
    ({"select_top": 3, "select_seeds": 1}, "select_seeds must be a whole number >= 2"),
    ({"select_seeds": 3}, "select_seeds belongs to racing"),
    ({"select_top": 3, "seeds": (1, 2, 3)}, "already runs every cell with 3 seeds"),
])
def test_impossible_racing_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        check_select_settings(**settings)


def _grid(tmp_path, **settings) -> str:
    grid = {"name": "race", "models": ["BPR"], "datasets": ["ml-100k"],
            "params": {"learning_rate": [0.0005, 0.002, 0.008, 0.02]},
            "fixed": {"embedding_size": 8, "user_inter_num_interval": "[10,60]", "epochs": 2}, **settings}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid))
    return str(path)


def _finished(sweep) -> list[str]:
    states = [json.loads(line) for line in (sweep / "sweep.jsonl").read_text().splitlines()]
    return [s["cell"] for s in states if s["state"] in ("ok", "pruned")]


def test_a_racing_grid_picks_on_validation_only_and_reports_the_race(tmp_path, capsys, base_args, monkeypatch):
    from recrunner.report.build import build_report
    from recrunner.report.render import markdown
    from recrunner.run import per_user

    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path), *base_args])  # the grid alone first
    assert code == 0, out + err
    sweep = tmp_path / "runs" / "race"
    for path in sweep.rglob("metrics.json"):  # test numbers that rank the cells against validation
        record = json.loads(path.read_text())
        record["test"] = {k: 1.0 - record["best_valid_score"] for k in record["test"]}
        path.write_text(json.dumps(record))
        (path.parent / "test_per_user.npz").unlink()
    loads = []
    real_load = per_user.load
    monkeypatch.setattr(per_user, "load", lambda path: loads.append(path.name) or real_load(path))

    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path, select_top=3, select_seeds=3), *base_args])
    assert code == 0, out + err
    assert "test_per_user.npz" not in loads and "valid_per_user.npz" in loads  # the race read validation only
    race_ = json.loads((sweep / "selection.json").read_text())["ml-100k/BPR"]
    contenders = [s for s in race_["standings"] if s["state"] != "out"]
    firsts = sorted((s["first"] for s in race_["standings"]), reverse=True)
    assert len(contenders) == 3 and sorted(s["first"] for s in contenders) == sorted(firsts[:3])
    picked = next(s for s in race_["standings"] if s["state"] == "picked")
    assert picked["key"] == race_["pick"] and len(race_["pick_runs"]) == 3
    assert picked["mean"] == max(s["mean"] for s in contenders if len(s["scores"]) == len(picked["scores"]))
    assert all(cell.startswith(("select/", "final/")) for cell in race_["pick_runs"][1:])
    assert sorted(set(_finished(sweep))) == sorted(_finished(sweep))  # no run twice
    monkeypatch.undo()
    results = (sweep / "results.md").read_text()
    assert "(n=3)" in results  # the pick's runs over its three seeds
    report = markdown(build_report(sweep))
    assert "## selection by racing" in report and "| picked |" in report
    assert "| selection runs |" in report and "| BPR | ml-100k | 0 | 0 |" in report


def test_a_search_races_its_best_trials_and_runs_the_pick_s_missing_final_seeds(tmp_path, capsys, base_args):
    pytest.importorskip("optuna")
    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path, search="random", trials=4), "--select-top", "2",
                                      "--select-seeds", "2", "--final-seeds", "3", *base_args])
    assert code == 0, out + err
    sweep = tmp_path / "runs" / "race"
    race_ = json.loads((sweep / "selection.json").read_text())["ml-100k/BPR"]
    assert race_["seeds"] == [2020, 2021] and race_["final_seeds"] == [2020, 2021, 2022]
    assert len(race_["pick_runs"]) == 3 and race_["pick_runs"][-1].startswith("final/")
    records = [json.loads(p.read_text()) for p in sweep.rglob("metrics.json")]
    assert {r["search"]["role"] for r in records} == {"trial", "select", "final"}
    assert sum(r["search"]["role"] == "final" for r in records) == 1  # seeds 2020 and 2021 were run already


def test_a_racing_grid_killed_during_the_race_loses_and_repeats_nothing(tmp_path, base_args):
    argv = ["--grid", _grid(tmp_path), "--select-top", "3", "--set", "epochs=4", *base_args, "--quiet"]
    command = [sys.executable, str(REPO / "run_experiments.py"), *argv]
    run_cli_until_killed(argv, inside="race/select/")  # while a race run trains
    assert not (tmp_path / "runs" / "race" / "selection.json").exists() or \
        json.loads((tmp_path / "runs" / "race" / "selection.json").read_text())["ml-100k/BPR"]["pick"] is None

    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    sweep = tmp_path / "runs" / "race"
    assert json.loads((sweep / "selection.json").read_text())["ml-100k/BPR"]["pick"]
    finished = _finished(sweep)
    assert len(finished) == len(set(finished))  # each run finished once
    for history in sweep.rglob("history.jsonl"):
        epochs = [json.loads(line)["epoch"] for line in history.read_text().splitlines()]
        assert len(epochs) == len(set(epochs)), f"{history.parent.name} trained an epoch twice"


def test_two_commands_racing_one_search_at_once_run_no_run_twice(tmp_path, base_args):
    pytest.importorskip("optuna")
    command = [sys.executable, str(REPO / "run_experiments.py"), "--grid", _grid(tmp_path), "--search", "random",
               "--trials", "4", "--select-top", "3", *base_args, "--quiet"]
    processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [p.communicate(timeout=600)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    sweep = tmp_path / "runs" / "race"
    race_ = json.loads((sweep / "selection.json").read_text())["ml-100k/BPR"]
    assert race_["pick"] and all(os.path.isdir(sweep / cell) for cell in race_["pick_runs"])
    states = [json.loads(line) for line in (sweep / "sweep.jsonl").read_text().splitlines()]
    assert len({s["owner"] for s in states if s["state"] == "running"}) == 2  # both trained: they overlapped
    finished = _finished(sweep)
    assert len(finished) == len(set(finished))  # no trial, race run or final seed ran twice
    assert any(cell.startswith("select/") for cell in finished)
