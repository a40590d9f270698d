"""metrics.json has one owner: RunRecord, with one status enum."""

import json
from pathlib import Path

from recrunner.run.record import RunRecord, Status


def test_a_record_round_trips_and_its_status_is_written_as_text(tmp_path):
    record = RunRecord(status=Status.OK, model="BPR", dataset="ml-100k", seed=2020, best_epoch=3,
                       best_valid={"ndcg@10": 0.2}, test={"ndcg@10": 0.19}, data_seconds=1.5, train_seconds=2.0)
    record.write(tmp_path / "metrics.json")
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "ok"
    assert RunRecord.read(tmp_path) == record  # a run directory or its file
    assert record.seconds == 3.5


def test_older_or_newer_records_stay_readable(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "ok", "some_future_key": 1, "test": None}))
    record = RunRecord.read(tmp_path)
    assert record.status is Status.OK and record.test == {} and record.best_epoch is None


def test_an_unknown_status_reads_as_failed_and_a_broken_file_as_none(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "exploded"}))
    assert RunRecord.read(tmp_path).status is Status.FAILED
    (tmp_path / "metrics.json").write_text("{not json")
    assert RunRecord.read(tmp_path) is None
    assert RunRecord.read(tmp_path / "missing") is None


def test_statuses_compare_equal_to_their_text():
    assert Status.OK == "ok" and f"{Status.INTERRUPTED}" == "interrupted"
    assert "pretrain_seconds" not in RunRecord().to_json()  # only staged models have one


def test_every_run_records_where_its_numbers_come_from(base_args, capsys):
    import hashlib
    import os
    import subprocess

    from recrunner.cli.main import main

    from .conftest import REPO

    assert main(base_args + ["--model", "Pop", "--set", "epochs=1", "--quiet"]) == 0
    capsys.readouterr()
    run_dir = next(Path(base_args[1]).rglob("metrics.json")).parent
    origin = json.loads((run_dir / "metrics.json").read_text())["provenance"]

    assert origin["command"].endswith("--model Pop --set epochs=1 --quiet")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert origin["git"]["recrunner"]["commit"] == head.stdout.strip()
        assert origin["git"]["configs"]["commit"] == head.stdout.strip()
        assert isinstance(origin["git"]["recrunner"]["dirty"], bool)
    assert {"python", "recrunner", "recbole", "torch", "numpy", "pandas", "scipy"} <= set(origin["versions"])
    inter = next(f for f in origin["data"] if f["file"] == "ml-100k.inter")
    from recrunner.data.files import builtin_dataset_dir

    path = builtin_dataset_dir() / "ml-100k" / "ml-100k.inter"
    assert inter["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and inter["bytes"] == path.stat().st_size
    assert origin["machine"]["cpus"] == os.cpu_count() and isinstance(origin["machine"]["gpus"], list)
