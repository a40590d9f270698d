"""The command line: every bad input is one clear line and exit code 2, no traceback."""

import json
import subprocess
import sys

import pytest

from recrunner.cli.main import main

from .conftest import REPO, TINY_BPR
from .conftest import run_cli as _run




@pytest.mark.parametrize("argv, expected", [
    (["--model", "SASRecc"], "unknown model 'SASRecc'. Did you mean SASRec"),
    (["--dataset", "no-such-data"], "dataset 'no-such-data' not found"),
    (["--set", "hiden_size=16"], "unknown config key 'hiden_size'; did you mean hidden_size"),
    (["--set", "epochs=many"], "epochs expects a number (default 300), got 'many'"),
    (["--set", "epochs=2.5"], "epochs expects an integer"),
    (["--set", "valid_metric=NDCG@50"], "valid_metric 'NDCG@50' is not computed by this run; available: recall@10, mrr@10"),
    (["--set", "novalue"], "--set expects key=value"),
    (["--config-file", "missing.yaml"], "config file not found: missing.yaml"),
    (["--model", "KGAT"], "KGAT needs the package 'dgl'"),  # dgl has no build for this torch
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, expected, base_args, capsys):
    code, out, err = _run(capsys, base_args + argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("recrunner: error: ")
    assert expected in err
    assert "Traceback" not in err


def test_malformed_yaml_names_file_and_line(base_args, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 2\nhidden_size: [16\nn_layers: 1\n")
    code, _, err = _run(capsys, base_args + ["--config-file", str(bad)])
    assert code == 2
    assert f"malformed YAML in {bad}:" in err and "Traceback" not in err


def test_missing_dataset_lists_the_folders_searched(base_args, tmp_path, capsys):
    code, _, err = _run(capsys, base_args + ["--dataset", "ml-20m-offline-test"])
    assert code == 2
    assert str(tmp_path / "data" / "ml-20m-offline-test") in err
    assert "dataset_example" in err and "--data-path" in err and "Available: ml-100k" in err


def test_nothing_is_written_for_a_bad_input(base_args, tmp_path, capsys):
    main(base_args + ["--set", "epochs=many"])
    assert not (tmp_path / "runs").exists()


def test_a_failed_run_exits_1_with_its_reason(base_args, capsys):
    code, out, _ = _run(capsys, base_args + ["--model", "BPR", "--quiet", "--set", "epochs=1", "embedding_size=8",
                                             "learning_rate=1e30", "user_inter_num_interval=[10,60]"])
    assert code == 1
    assert "FAILED  BPR on ml-100k: TrainingFailed: training loss became nan in epoch 0" in out


def test_run_experiments_script_rejects_unknown_model_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_experiments.py"), "--model", "Nope"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("recrunner: error: unknown model 'Nope'") and "Traceback" not in proc.stderr


def test_run_experiments_script_before_set_up_says_how_in_one_line(tmp_path):
    # -S: no site-packages, as in a fresh clone before `bash install.sh`
    proc = subprocess.run([sys.executable, "-S", str(REPO / "run_experiments.py"), "--model", "BPR"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == ("recrunner: error: yaml is not installed; set up first with `bash install.sh` "
                           "(README: Set up, run, test)\n")


def test_our_flags_never_reach_recbole_argv_parsing(base_args, capsys, monkeypatch):
    # RecBole's Config reads sys.argv and gives --key=value there top priority
    monkeypatch.setattr(sys, "argv", ["run_experiments.py", "--epochs=7", "--model", "BPR"])
    from recrunner import Experiment, Workspace, prepare

    workspace = Workspace(output_dir=REPO / "unused", data_path=REPO / "datasets", config_dir=REPO / "configs")
    prepared = prepare(Experiment("BPR", "ml-100k", {"epochs": 3}), workspace)
    assert prepared.config["epochs"] == 3
    assert sys.argv[1] == "--epochs=7"  # restored afterwards


def test_data_path_comes_from_the_environment_when_not_given(tmp_path, capsys, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("RECRUNNER_DATA_PATH", str(elsewhere))
    code, _, err = _run(capsys, ["--output", str(tmp_path / "runs"), "--dataset", "Amazon_Nothing"])
    assert code == 2 and str(elsewhere / "Amazon_Nothing") in err


def test_a_known_dataset_is_a_clear_error_when_its_server_cannot_be_reached(base_args, capsys, monkeypatch):
    from recrunner.data import files as data

    monkeypatch.setattr(data, "reachable", lambda url, timeout=3.0: False)
    code, _, err = _run(capsys, base_args + ["--dataset", "yelp"])
    assert code == 2
    assert "dataset 'yelp' not found (RecBole knows it, but its server cannot be reached)" in err


def test_an_unexpected_error_is_one_line_and_exit_code_1_and_keeps_the_finished_run(base_args, tmp_path,
                                                                                       monkeypatch, capsys):
    import recrunner.sweep.tables

    write_results = recrunner.sweep.tables.write_results

    def disk_full_once_a_run_is_done(sweep_dir, *args, **kwargs):
        if list(sweep_dir.rglob("metrics.json")):
            raise OSError(28, "No space left on device")
        return write_results(sweep_dir, *args, **kwargs)

    monkeypatch.setattr(recrunner.sweep.tables, "write_results", disk_full_once_a_run_is_done)
    argv = base_args + ["--model", "BPR", "--dataset", "ml-100k", "--set", *[f"{k}={v}" for k, v in TINY_BPR.items()]]
    code, _, err = _run(capsys, argv)
    assert code == 1
    last = err.splitlines()[-1]  # after the run's own log lines
    assert "Traceback" not in err and last.startswith("recrunner: error: ")
    assert "OSError: [Errno 28] No space left on device; finished runs are kept" in last and "--debug" in last
    (metrics,) = (tmp_path / "runs").rglob("metrics.json")
    assert json.loads(metrics.read_text())["status"] == "ok"
    with pytest.raises(OSError):
        main(argv + ["--debug"])
