"""metrics.json has one owner: RunRecord, with one status enum."""

import json

from recrunner.record import RunRecord, Status


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
