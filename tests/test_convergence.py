"""The "may be under-trained" flag: a pure rule, and where it shows (record, results, console)."""

import csv

import yaml

from recrunner.run.convergence import last_validated_epoch, under_trained
from tests.conftest import run_cli


def test_the_rule():
    flagged = under_trained(best_epoch=9, epochs_trained=10, max_epochs=10, stopped_early=False)
    assert flagged == ("may be under-trained: its best epoch (9) is the last it validated and it reached "
                       "epochs=10 without early stopping")
    assert under_trained(best_epoch=3, epochs_trained=8, max_epochs=100, stopped_early=True) is None
    assert under_trained(best_epoch=2, epochs_trained=10, max_epochs=10, stopped_early=False) == (
        "may be under-trained: it reached epochs=10 without early stopping")
    # validating every 3 epochs, epoch 8 is the last validated one of 0..9
    assert last_validated_epoch(9, 3) == 8 and last_validated_epoch(1, 3) is None
    assert under_trained(best_epoch=8, epochs_trained=10, max_epochs=50, stopped_early=False, eval_step=3) == (
        "may be under-trained: its best epoch (8) is the last it validated")
    # Pop, ItemKNN, EASE... are fitted in one pass: nothing to converge
    assert under_trained(best_epoch=0, epochs_trained=1, max_epochs=1, stopped_early=False, single_pass=True) is None


def test_a_max_epoch_run_is_flagged_and_an_early_stopped_one_is_not(tmp_path, capsys, base_args):
    grid = tmp_path / "grid.yaml"
    # min_delta 1.0: nothing after epoch 0 counts as an improvement, so patience 1 stops at epoch 2
    grid.write_text(yaml.safe_dump({
        "name": "converge", "models": ["BPR", "Pop"], "datasets": ["ml-100k"],
        "model_params": {"BPR": {"epochs": [2, 10], "embedding_size": 8}},
        "fixed": {"user_inter_num_interval": "[10,60]", "stopping_step": 1,
                  "early_stop_min_delta": 1.0}}))
    code, out, err = run_cli(capsys, ["--grid", str(grid), *base_args])
    assert code == 0, out
    rows = {(r["model"], r["epochs"]): r for r in csv.DictReader(open(tmp_path / "runs" / "converge" / "results.csv"))}
    capped, stopped, pop = rows[("BPR", "2")], rows[("BPR", "10")], rows[("Pop", "")]
    assert capped["under_trained"] == "may be under-trained: it reached epochs=2 without early stopping"
    assert capped["epochs_trained"] == "2" and capped["epochs_to_best"] == "1"
    assert stopped["under_trained"] == "" and stopped["epochs_trained"] == "3" and stopped["epochs_to_best"] == "1"
    assert float(stopped["seconds_to_best"]) > 0
    assert pop["under_trained"] == ""
    assert out.count("warning: may be under-trained") == 1  # the console's summary of each cell
    assert out.count("warning: the split leaks the future") == 1  # a protocol's warning: once per sweep
    markdown = (tmp_path / "runs" / "converge" / "results.md").read_text()
    assert "‡ may be under-trained" in markdown
