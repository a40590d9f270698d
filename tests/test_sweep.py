"""Sweeps end to end through the command line, with real worker processes and a local Ray."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from recrunner.training.callbacks.history import read_history
from recrunner.cli.main import main
from recrunner.sweep.record import SweepRecord

from .conftest import REPO

TINY_GRID = {
    "name": "grid",
    "models": ["SASRec", "GRU4Rec"],
    "model_params": {"SASRec": {"hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1},
                     "GRU4Rec": {"embedding_size": 16, "hidden_size": 16}},
    "seeds": [2020, 2021],
    "fixed": {"epochs": 2, "MAX_ITEM_LIST_LENGTH": 10, "train_batch_size": 2048,
              "user_inter_num_interval": "[10,60]"},
}


def _grid_file(tmp_path, datasets, **changes):
    path = tmp_path / "grid.yaml"
    per_dataset = {"ml-mini": {"load_col": {"inter": ["user_id", "item_id", "timestamp"]}}}  # no preset for it
    path.write_text(yaml.safe_dump({**TINY_GRID, "datasets": datasets, "dataset_params": per_dataset, **changes}))
    return path


def _args(workspace, grid, *extra):
    return ["--grid", str(grid), "--output", str(workspace.output_dir), "--data-path", str(workspace.data_path),
            "--config-dir", str(workspace.config_dir), "--quiet", *extra]


def _rows(sweep_dir):
    with open(sweep_dir / "results.csv") as f:
        return list(csv.DictReader(f))


def _run_logs(sweep_dir):
    return {path: path.read_text() for path in sweep_dir.rglob("run.log")}


def test_a_grid_of_2_models_2_datasets_2_seeds_runs_to_a_complete_table(workspace, mini_dataset, tmp_path, capsys):
    grid = _grid_file(tmp_path, ["ml-100k", mini_dataset])

    code = main(_args(workspace, grid, "--workers", "2"))

    out = capsys.readouterr().out
    assert code == 0, out
    sweep_dir = workspace.output_dir / "grid"
    rows = _rows(sweep_dir)
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    assert {(r["model"], r["dataset"]) for r in rows} == {(m, d) for m in ("SASRec", "GRU4Rec")
                                                          for d in ("ml-100k", mini_dataset)}
    assert all(r["test/ndcg@10"] and r["valid/mrr@10"] for r in rows) and {r["seed"] for r in rows} == {"2020", "2021"}
    markdown = (sweep_dir / "results.md").read_text()
    assert f"| model | ml-100k | {mini_dataset} |" in markdown and markdown.count("(n=2)") >= 4
    assert "[8/8] ok" in out and "sweep grid done: 8 ok, 0 failed, 0 skipped" in out
    # one dataset build per dataset; the other 6 cells, running two at a time, reused it
    logs = "\n".join(_run_logs(sweep_dir).values())
    assert logs.count("data cache: built and saved") == 2 and logs.count("data cache: reusing") == 6


def test_a_killed_sweep_finishes_on_rerun_with_every_row_once_and_nothing_trained_twice(workspace, mini_dataset,
                                                                                      tmp_path):
    grid = _grid_file(tmp_path, ["ml-100k", mini_dataset], fixed={**TINY_GRID["fixed"], "epochs": 4})
    command = [sys.executable, str(REPO / "run_experiments.py"), *_args(workspace, grid, "--workers", "2")]
    sweep_dir = workspace.output_dir / "grid"
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    in_flight = set()
    while time.time() < deadline and proc.poll() is None and not (_finished(sweep_dir) >= 3 and in_flight):
        time.sleep(0.05)
        in_flight = {p.parent for p in sweep_dir.rglob("metrics.json") if _mid_training(p.parent, epochs=4)}
    os.kill(proc.pid, signal.SIGKILL)  # the sweep process itself, while a worker is in a cell's epochs
    proc.communicate(timeout=60)
    _wait_for_workers_to_leave(sweep_dir)
    # the cells in flight were stopped, not left to train on beside the next sweep
    interrupted = {p.parent for p in sweep_dir.rglob("metrics.json") if _status(p.parent) == "interrupted"}
    assert in_flight and in_flight <= interrupted, {p.name: _status(p) for p in in_flight}
    done_before = {p: p.stat().st_mtime_ns for p in sweep_dir.rglob("best.pth") if _ok(p.parents[1])}
    assert 3 <= len(done_before) < 8
    # the other worker may have been stopped in a cell it had just begun, before its training started
    starts_before = {path.parent: _starts(log) for path, log in _run_logs(sweep_dir).items()}
    finished_before = {run_dir for run_dir in starts_before if _ok(run_dir)}
    assert all(starts_before[run_dir] == 1 for run_dir in in_flight)

    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)

    assert again.returncode == 0, again.stderr[-3000:]
    rows = _rows(sweep_dir)
    assert len(rows) == 8 and len({r["cell"] for r in rows}) == 8 and {r["status"] for r in rows} == {"ok"}
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in done_before.items())  # finished cells not retrained
    for path, log in _run_logs(sweep_dir).items():
        # a cell the kill interrupted starts once more: at its last.pth, or at epoch 0 when none was saved yet;
        # a finished cell does not start again, and a cell the kill never reached starts once
        more = 0 if path.parent in finished_before else 1
        assert _starts(log) == starts_before.get(path.parent, 0) + more, path
        epochs = [row["epoch"] for row in read_history(path.parent / "history.jsonl")]
        assert epochs == list(range(-1, len(epochs) - 1)), path  # every epoch once: none trained twice
    assert f"{len(done_before)} skipped" in again.stdout


def _starts(log):
    return log.count("trainable parameters, device")  # the line each start of training logs


def _status(run_dir):
    try:
        return json.loads((run_dir / "metrics.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        return None


def _mid_training(run_dir, epochs):
    """Running, with at least one epoch done and two to go: not yet in its last epoch, test or record."""
    if _status(run_dir) != "running" or not (run_dir / "history.jsonl").exists():
        return False
    return 1 <= sum(row["epoch"] >= 0 for row in read_history(run_dir / "history.jsonl")) <= epochs - 2


def _ok(run_dir):
    return _status(run_dir) == "ok"


def _finished(sweep_dir):
    return sum(_ok(p.parent) for p in sweep_dir.rglob("metrics.json"))


def _wait_for_workers_to_leave(sweep_dir, timeout=60):
    """Workers of a killed sweep stop on their own (SIGTERM when the sweep's end of their pipe closes)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        states = [json.loads(p.read_text()).get("status") for p in sweep_dir.rglob("metrics.json")]
        if "running" not in states:
            return
        time.sleep(0.2)
    raise AssertionError("workers of the killed sweep kept running")


def test_a_broken_cell_fails_alone_retries_and_the_exit_code_says_so(workspace, tmp_path, capsys):
    grid = tmp_path / "broken.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "broken", "models": ["BPR", "Pop"], "datasets": ["ml-100k"],
        "params": {"learning_rate": [0.01, 1e30]},         # 1e30 diverges at the first step
        "model_params": {"Pop": {"learning_rate": 0.01, "n_heads": 2}},  # SASRec's key: prepare refuses it for Pop
        "fixed": {"epochs": 1, "embedding_size": 8, "user_inter_num_interval": "[10,60]"},
    }))

    code = main(_args(workspace, grid, "--retries", "1"))

    out = capsys.readouterr().out
    assert code == 1
    rows = {(r["model"], r["learning_rate"]): r for r in _rows(workspace.output_dir / "broken")}
    assert rows[("BPR", "0.01")]["status"] == "ok"
    assert rows[("BPR", "1e+30")]["status"] == "failed" and "training loss became nan" in rows[("BPR", "1e+30")]["error"]
    assert rows[("Pop", "0.01")]["status"] == "failed" and ("Pop's parameters (--set, --config-file, grid): unknown config key 'n_heads'; neither RecBole's overall.yaml "
                                                       "nor Pop's yaml has it (a grid gives a parameter only some of its models have under "
                                                       "model_params") in rows[("Pop", "0.01")]["error"]
    assert "retry   ml-100k/BPR/learning_rate=1e+30" in out
    record = SweepRecord(workspace.output_dir / "broken" / "sweep.jsonl")
    assert [s.failures for c, s in record.states().items() if "1e+30" in c] == [2]
    assert "sweep broken done: 1 ok, 2 failed" in out
    assert "## cells not finished" in (workspace.output_dir / "broken" / "results.md").read_text()


def test_a_cell_killed_after_its_run_ended_gets_its_end_recorded_without_running_again(workspace, tmp_path, capsys):
    grid = tmp_path / "one.yaml"
    grid.write_text(yaml.safe_dump({"name": "one", "models": ["BPR"], "datasets": ["ml-100k"],
                                    "fixed": {"epochs": 1, "embedding_size": 8}}))
    assert main(_args(workspace, grid)) == 0
    record = workspace.output_dir / "one" / "sweep.jsonl"
    lines = record.read_text().splitlines()
    record.write_text("\n".join(line for line in lines if json.loads(line)["state"] != "ok") + "\n")  # killed then
    assert SweepRecord(record).states().popitem()[1].state == "running"

    assert main(_args(workspace, grid)) == 0
    assert "0 ok, 0 failed, 1 skipped" in capsys.readouterr().out  # not trained again
    assert SweepRecord(record).states().popitem()[1].state == "ok"


def test_a_cell_whose_metrics_json_is_gone_runs_again_from_its_last_checkpoint(workspace, tmp_path, capsys):
    grid = tmp_path / "one.yaml"
    grid.write_text(yaml.safe_dump({"name": "one", "models": ["BPR"], "datasets": ["ml-100k"],
                                    "fixed": {"epochs": 1, "embedding_size": 8}}))
    assert main(_args(workspace, grid)) == 0
    [metrics] = (workspace.output_dir / "one").rglob("metrics.json")
    first = json.loads(metrics.read_text())
    metrics.unlink()  # deleted by hand: the record still says ok

    assert main(_args(workspace, grid)) == 0
    assert "1 ok, 0 failed, 0 skipped" in capsys.readouterr().out
    again = json.loads(metrics.read_text())
    assert again["status"] == "ok" and again["test"] == first["test"]
    assert "1 ok" in (workspace.output_dir / "one" / "results.md").read_text()


def test_a_cell_running_elsewhere_is_left_alone_until_its_heartbeat_is_stale(workspace, tmp_path, capsys):
    grid = tmp_path / "one.yaml"
    grid.write_text(yaml.safe_dump({"name": "one", "models": ["BPR"], "datasets": ["ml-100k"],
                                    "fixed": {"epochs": 1, "embedding_size": 8}}))
    assert main(_args(workspace, grid, "--dry-run")) == 0
    cell = capsys.readouterr().out.splitlines()[1].split()[-1]
    assert not workspace.output_dir.exists()  # --dry-run writes nothing
    SweepRecord(workspace.output_dir / "one" / "sweep.jsonl", owner="another-host:4242").append(cell, "running")

    assert main(_args(workspace, grid)) == 0
    assert "busy    " + cell in capsys.readouterr().out
    assert main(_args(workspace, grid, "--stale-after", "0")) == 0
    out = capsys.readouterr().out
    assert "reclaim " + cell in out and "1 ok" in out


def test_the_ray_backend_runs_cells_and_a_race_on_a_local_instance_with_the_same_numbers(workspace, tmp_path, capsys):
    pytest.importorskip("ray")
    grid = tmp_path / "ray.yaml"
    grid.write_text(yaml.safe_dump({"name": "ray", "models": ["BPR"], "datasets": ["ml-100k"],
                                    "params": {"learning_rate": [0.01, 0.02]}, "select_top": 2, "select_seeds": 2,
                                    "fixed": {"epochs": 2, "embedding_size": 8, "user_inter_num_interval": "[10,60]"}}))
    assert main(_args(workspace, grid, "--backend", "ray", "--workers", "2")) == 0
    on_ray = {r["cell"]: r["test/ndcg@10"] for r in _rows(workspace.output_dir / "ray")}
    assert main(_args(workspace, grid, "--name", "local")) == 0
    local = {r["cell"]: r["test/ndcg@10"] for r in _rows(workspace.output_dir / "local")}
    assert len(on_ray) == 4 and on_ray == local
    assert sum(cell.startswith("select/") for cell in on_ray) == 2  # each contender's second seed, raced on Ray
    races = [json.loads((workspace.output_dir / name / "selection.json").read_text()) for name in ("ray", "local")]
    assert races[0] == races[1]


def test_the_final_tables_show_a_cell_another_command_finished_meanwhile(workspace, tmp_path, monkeypatch, capsys):
    """Two sweep commands on one folder: a cell the other command runs ('busy' here) and finishes while
    this one works must not stay 'pending' in the tables this command writes last."""
    import shutil
    import socket

    from recrunner.sweep import runner

    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"name": "two", "models": ["Pop"], "datasets": ["ml-100k"], "seeds": [1, 2],
                                    "fixed": {"epochs": 1}}))
    assert main(_args(workspace, grid)) == 0  # the runs the other command will have made
    sweep_dir = workspace.output_dir / "two"
    (first, other) = sorted(p.parent for p in sweep_dir.rglob("metrics.json"))
    kept = tmp_path / "kept"
    shutil.copytree(other, kept)
    shutil.rmtree(other)
    for name in ("sweep.jsonl", "results.csv", "results.md"):
        (sweep_dir / name).unlink()
    shutil.rmtree(first)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:  # the other command: alive, holding the cell
        cell = "/".join(other.parts[-3:])
        SweepRecord(sweep_dir / "sweep.jsonl", owner=f"{socket.gethostname()}:{sleeper.pid}").append(cell, "running")
        real_dispatch = runner._Sweep._dispatch

        def dispatch_while_the_other_finishes(self, cell_id, executor):
            if not other.exists():
                shutil.copytree(kept, other)  # ... and finishes it once this command has begun
            return real_dispatch(self, cell_id, executor)

        monkeypatch.setattr(runner._Sweep, "_dispatch", dispatch_while_the_other_finishes)
        assert main(_args(workspace, grid)) == 0
    finally:
        sleeper.kill()
    assert "running in another sweep process" in capsys.readouterr().out
    assert sorted(row["status"] for row in _rows(sweep_dir)) == ["ok", "ok"]
    assert "pending" not in (sweep_dir / "results.md").read_text()
