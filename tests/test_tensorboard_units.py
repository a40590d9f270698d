"""The HParams columns file under concurrent writers (sweep workers, Ray hosts sharing one folder)."""

import json
import subprocess
import sys

import pytest

from recrunner.run.hparams_columns import (
    INDEX_FILE,
    ROWS_DIR,
    ColumnStats,
    columns_file,
    shown_columns,
    write_experiment,
)
from recrunner.core.layout import HPARAMS_ROW as HPARAMS_FILE
from recrunner.core.layout import OutputPaths
from recrunner.training.logging.tensorboard import hparams_summaries, write_event_file

WRITER = """
import sys
from recrunner.run.hparams_columns import write_experiment
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
    assert sorted(p.name for p in OutputPaths(tmp_path).hparams_columns.iterdir()) == [HPARAMS_FILE, INDEX_FILE, ROWS_DIR]
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
    import recrunner.training.logging.tensorboard as tensorboard

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
    (OutputPaths(tmp_path).hparams_columns / INDEX_FILE).write_text("{cut short")  # unreadable: every run is read again
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


def test_columns_kept_as_counts_equal_the_columns_of_every_run_read_again(tmp_path):
    """Runs written, rewritten with a new status, and deleted, in a random order: after each
    one-run update the index's counts, the columns and the row files are what reading every run
    gives, and there is one row file per run."""
    import random
    import shutil

    from recrunner.run.hparams_columns import _Columns

    rng = random.Random(0)
    alive = set()
    for step in range(40):
        name = f"r{rng.randrange(12)}"
        if name in alive and rng.random() < 0.3:
            shutil.rmtree(tmp_path / name)
            alive.discard(name)
            changed = next(iter(alive), None) and tmp_path / next(iter(alive))
            if changed is None:
                continue
        else:
            if name in alive:
                shutil.rmtree(tmp_path / name)
            hparams = {"model": rng.choice(["BPR", "SASRec"]), "learning_rate": rng.choice([0.1, 0.01, 1]),
                       rng.choice(["dropout", "hidden_size"]): rng.choice([0.5, "x", True])}
            _run(tmp_path, name, hparams, rng.choice(["recall@10", "ndcg@10"]))
            alive.add(name)
            changed = tmp_path / name
        write_experiment(tmp_path, changed=changed)
        index = json.loads((OutputPaths(tmp_path).hparams_columns / INDEX_FILE).read_text())
        incremental = (_columns(columns_file(tmp_path)), index["stats"])
        assert sorted(index["runs"]) == sorted(f"{run}/{HPARAMS_FILE}" for run in alive)
        assert len(list((OutputPaths(tmp_path).hparams_columns / ROWS_DIR).iterdir())) == len(alive)
        rebuilt = _Columns(tmp_path)._rebuild()
        assert incremental == (_columns(columns_file(tmp_path)), rebuilt["stats"])
        write_experiment(tmp_path)  # every run read again: the same columns
        assert _columns(columns_file(tmp_path)) == incremental[0], step


def test_column_stats_count_values_in_and_out():
    rows = [{"model": "BPR", "lr": 0.1}, {"model": "BPR", "lr": 0.01}, {"model": "BPR"}]
    stats = ColumnStats.of(rows, metrics=[["Test/recall@10"], ["Test/recall@10", "Best_Valid/score"]])
    assert stats.shown() == ["model", "lr"] and stats.metrics == {"Test/recall@10": 2, "Best_Valid/score": 1}
    stats.remove({"hparams": rows[1], "metrics": ["Test/recall@10", "Best_Valid/score"]})
    assert stats.values["lr"] == {"0.1": [0.1, 1]} and stats.shown() == ["model", "lr"]  # lr only some runs have
    stats.remove({"hparams": rows[2], "metrics": []})
    assert stats == ColumnStats.of(rows[:1], metrics=[["Test/recall@10"]])
    assert stats.shown() == ["model", "lr"]  # a lone run shows all it has


def test_a_kill_between_a_row_and_the_index_leaves_columns_the_next_run_gets_right(tmp_path, monkeypatch):
    import shutil

    import recrunner.run.hparams_columns as hparams_columns

    _run(tmp_path, "a", {"model": "BPR", "embedding_size": 8}, "recall@10")
    _run(tmp_path, "b", {"model": "BPR", "embedding_size": 16}, "recall@10")
    write_experiment(tmp_path)
    shutil.rmtree(tmp_path / "b")
    _run(tmp_path, "b", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")  # b again, another row

    def killed(path, text):
        raise KeyboardInterrupt  # the row file is written; the index and the columns are not
    monkeypatch.setattr(hparams_columns, "write_text_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        write_experiment(tmp_path, changed=tmp_path / "b")
    monkeypatch.undo()

    write_experiment(tmp_path, changed=tmp_path / "b")  # the same run's next update (or a later run's)
    assert _columns(columns_file(tmp_path))[0] == {"model", "embedding_size", "hidden_size", "status"}
    index = json.loads((OutputPaths(tmp_path).hparams_columns / INDEX_FILE).read_text())
    assert index["stats"] == hparams_columns._Columns(tmp_path)._rebuild()["stats"]
    assert len(list((OutputPaths(tmp_path).hparams_columns / ROWS_DIR).iterdir())) == 2
