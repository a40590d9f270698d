"""The HParams columns file under concurrent writers (sweep workers, Ray hosts sharing one folder)."""

import json
import subprocess
import sys

from recrunner.tensorboard import (COLUMNS_DIR, HPARAMS_FILE, ROWS_FILE, columns_file, hparams_summaries,
                                   shown_columns, write_event_file, write_experiment)

WRITER = """
import sys
from recrunner.tensorboard import write_experiment
for _ in range(int(sys.argv[2])):
    write_experiment(sys.argv[1])
"""


def _columns(path):
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.plugins.hparams import metadata

    for event in event_file_loader.EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.tag == metadata.EXPERIMENT_TAG:
                content = value.metadata.plugin_data.content
                experiment = metadata.parse_experiment_plugin_data(content)
                return ({h.name for h in experiment.hparam_infos},
                        {m.name.tag for m in experiment.metric_infos})
    raise AssertionError(f"no experiment in {path}")


def _run(logdir, name, hparams, metric):
    run_dir = logdir / name
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps({"best_valid": {metric: 0.1}, "test": {metric: 0.2}}))
    write_event_file(run_dir / HPARAMS_FILE, hparams_summaries({**hparams, "status": "ok"}, "ok"))


def test_concurrent_writers_neither_collide_nor_leave_partial_files(tmp_path):
    _run(tmp_path, "a", {"model": "BPR", "embedding_size": 8}, "recall@10")
    _run(tmp_path, "b", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "25"], stderr=subprocess.PIPE, text=True)
               for _ in range(4)]
    errors = [w.communicate(timeout=300)[1] for w in writers]

    assert [w.returncode for w in writers] == [0] * 4, "\n".join(errors)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [".hparams.lock"]  # no run named "."
    assert sorted(p.name for p in (tmp_path / COLUMNS_DIR).iterdir()) == [HPARAMS_FILE, ROWS_FILE]
    hparams, metrics = _columns(columns_file(tmp_path))
    assert hparams == {"model", "embedding_size", "hidden_size", "status"}
    assert metrics == {"Best_Valid/score", "Best_Valid/recall@10", "Best_Valid/ndcg@10", "Test/recall@10", "Test/ndcg@10"}


def test_the_last_writer_sees_every_finished_run(tmp_path):
    _run(tmp_path, "a", {"model": "BPR", "embedding_size": 8}, "recall@10")
    write_experiment(tmp_path)
    _run(tmp_path, "b", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")
    write_experiment(tmp_path)
    assert _columns(columns_file(tmp_path))[0] == {"model", "embedding_size", "hidden_size", "status"}


def test_a_finished_run_reads_only_its_own_files_and_the_columns_stay_whole(tmp_path, monkeypatch):
    import recrunner.tensorboard as tensorboard

    for k in range(5):
        _run(tmp_path, f"r{k}", {"model": "BPR", "embedding_size": 8 * (k + 1)}, "recall@10")
    write_experiment(tmp_path)  # a sweep's start: every run is read
    reads = []
    real = tensorboard.read_session
    monkeypatch.setattr(tensorboard, "read_session", lambda path: reads.append(path.parent.name) or real(path))
    _run(tmp_path, "new", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")
    write_experiment(tmp_path, changed=tmp_path / "new")
    assert reads == ["new"]  # not the 5 others: a run's cost does not grow with the runs beside it
    assert _columns(columns_file(tmp_path))[0] == {"model", "embedding_size", "hidden_size", "status"}
    assert "Test/ndcg@10" in _columns(columns_file(tmp_path))[1]

    import shutil
    shutil.rmtree(tmp_path / "new")  # a deleted run leaves the columns
    write_experiment(tmp_path, changed=tmp_path / "r0")
    assert _columns(columns_file(tmp_path))[0] == {"model", "embedding_size", "status"}
    (tmp_path / COLUMNS_DIR / ROWS_FILE).write_text("{cut short")  # unreadable: every run is read again
    reads.clear()
    write_experiment(tmp_path, changed=tmp_path / "r0")
    assert sorted(reads) == [f"r{k}" for k in range(5)]


def test_columns_show_identity_and_what_varies_model_first_never_constants():
    rows = [{"model": "BPR", "dataset": "ml-100k", "learning_rate": 0.01, "shuffle": True, "seed": 1, "status": "ok"},
            {"model": "BPR", "dataset": "ml-100k", "learning_rate": 0.001, "shuffle": True, "seed": 2, "status": "ok"},
            {"model": "SASRec", "dataset": "ml-100k", "learning_rate": 0.01, "shuffle": True, "n_layers": 2,
             "seed": 1, "status": "failed"}]
    assert shown_columns(rows) == ["model", "dataset", "learning_rate", "n_layers", "seed", "status"]
    assert shown_columns(rows[:1]) == ["model", "dataset", "learning_rate", "shuffle", "seed", "status"]


def test_runs_set_aside_or_hidden_are_not_columns(tmp_path):
    _run(tmp_path, "a", {"model": "BPR", "embedding_size": 8}, "recall@10")
    _run(tmp_path / ".cache" / "replaced", "a", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")
    (tmp_path / HPARAMS_FILE).write_bytes(b"")  # where older versions wrote the columns
    write_experiment(tmp_path)
    assert _columns(columns_file(tmp_path))[0] == {"model", "embedding_size", "status"}
    assert not (tmp_path / HPARAMS_FILE).exists()


def test_an_interrupted_run_is_not_a_failure_in_tensorboard():
    from tensorboard.plugins.hparams import api_pb2, metadata

    end = hparams_summaries({"model": "BPR"}, "interrupted", group="ml-100k/BPR/epochs=2")
    start_info = metadata.parse_session_start_info_plugin_data(end[0].value[0].metadata.plugin_data.content)
    end_info = metadata.parse_session_end_info_plugin_data(end[1].value[0].metadata.plugin_data.content)
    assert start_info.group_name == "ml-100k/BPR/epochs=2"
    assert api_pb2.Status.Name(end_info.status) == "STATUS_UNKNOWN"
