"""The HParams columns file under concurrent writers (sweep workers, Ray hosts sharing one folder)."""

import json
import subprocess
import sys

from recrunner.tensorboard import HPARAMS_FILE, hparams_summaries, write_event_file, write_experiment

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
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [".hparams.lock", HPARAMS_FILE]
    hparams, metrics = _columns(tmp_path / HPARAMS_FILE)
    assert hparams == {"model", "embedding_size", "hidden_size", "status"}
    assert metrics == {"Best_Valid/score", "Best_Valid/recall@10", "Best_Valid/ndcg@10", "Test/recall@10", "Test/ndcg@10"}


def test_the_last_writer_sees_every_finished_run(tmp_path):
    _run(tmp_path, "a", {"model": "BPR", "embedding_size": 8}, "recall@10")
    write_experiment(tmp_path)
    _run(tmp_path, "b", {"model": "SASRec", "hidden_size": 16}, "ndcg@10")
    write_experiment(tmp_path)
    assert _columns(tmp_path / HPARAMS_FILE)[0] == {"model", "embedding_size", "hidden_size", "status"}
