"""`recrunner reproduce RUN_DIR`: the recorded run again, side by side, each difference explained."""

import json

from recrunner.run.reproduce import explain
from tests.conftest import TINY_BPR, run_cli


def _run(capsys, base_args, dataset):
    settings = [f"{k}={v}" for k, v in TINY_BPR.items()]
    code, out, _ = run_cli(capsys, ["--model", "BPR", "--dataset", dataset, *base_args, "--set", *settings, "--quiet"])
    assert code == 0
    return out.split("-> ")[-1].split()[0]


def test_a_finished_run_reproduces_identically(workspace, mini_dataset, capsys, base_args, tmp_path):
    base_args[base_args.index("--data-path") + 1] = str(workspace.data_path)
    run_dir = _run(capsys, base_args, mini_dataset)
    code, out, err = run_cli(capsys, ["reproduce", run_dir, "--quiet"])
    assert code == 0, err
    assert "identical: all 13 values are equal" in out and "DIFFERS" not in out
    assert "test per user, unrounded" in out and "recorded differences" not in out
    new_dir = out.splitlines()[1].split()[-1]
    assert "/reproduce-" in new_dir and json.load(open(f"{new_dir}/metrics.json"))["status"] == "ok"

    # a data file changes: the same command names it
    inter = workspace.data_path / mini_dataset / f"{mini_dataset}.inter"
    inter.write_text("".join(inter.read_text().splitlines(keepends=True)[:30001]))
    code, out, err = run_cli(capsys, ["reproduce", run_dir, "--quiet"])
    assert code == 1, err
    assert "DIFFERS" in out and "values differ" in out
    assert f"data file {mini_dataset}.inter changed: " in out


def test_the_new_run_has_the_original_s_cpu_threads(workspace, mini_dataset, capsys, base_args):
    import torch

    base_args[base_args.index("--data-path") + 1] = str(workspace.data_path)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as a sweep cell with --threads 1
    try:
        run_dir = _run(capsys, base_args, mini_dataset)
    finally:
        torch.set_num_threads(2)
    assert json.load(open(f"{run_dir}/metrics.json"))["provenance"]["threads"] == 1
    code, out, err = run_cli(capsys, ["reproduce", run_dir, "--quiet"])
    assert code == 0 and "identical" in out, out + err
    new_dir = out.splitlines()[1].split()[-1]
    assert json.load(open(f"{new_dir}/metrics.json"))["provenance"]["threads"] == 1  # run with the original's
    assert torch.get_num_threads() == 2  # and given back
    torch.set_num_threads(before)


def test_only_a_finished_run_can_be_reproduced(tmp_path, capsys):
    code, _, err = run_cli(capsys, ["reproduce", str(tmp_path)])
    assert code == 2 and "holds no run" in err
    run_dir = tmp_path / "runs" / "s" / "ml-100k" / "BPR" / "x"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps({"status": "interrupted", "model": "BPR"}))
    (run_dir / "config.yaml").write_text("model: BPR\n")
    code, _, err = run_cli(capsys, ["reproduce", str(run_dir)])
    assert code == 2 and "is interrupted: only a run that finished and was tested (ok)" in err


def test_each_recorded_difference_is_one_line():
    then = {"versions": {"torch": "2.13.0", "recbole": "1.2.1"}, "machine": {"cpu": "A", "gpus": [], "cpus": 2},
            "data": [{"file": "x.inter", "bytes": 10, "sha256": "a" * 64}, {"file": "x.item", "bytes": 5, "sha256": "c" * 64}],
            "git": {"recrunner": {"commit": "1" * 40, "dirty": False}}}
    now = {"versions": {"torch": "2.12.0", "recbole": "1.2.1"}, "machine": {"cpu": "A", "gpus": ["NVIDIA H100"], "cpus": 2},
           "data": [{"file": "x.inter", "bytes": 11, "sha256": "b" * 64}],
           "git": {"recrunner": {"commit": "2" * 40, "dirty": True}}}
    lines = explain(then, now, {"epochs": 5, "checkpoint_dir": "/a"}, {"epochs": 6, "checkpoint_dir": "/b"})
    assert lines == [
        "torch differs: 2.13.0 then, 2.12.0 now",
        "data file x.inter changed: 10 bytes (sha256 aaaaaaaaaaaa) then, 11 bytes (sha256 bbbbbbbbbbbb) now",
        "data file x.item is gone since the original run",
        "the machine differs: GPUs [] then, ['NVIDIA H100'] now",
        "recrunner code differs: git 1111111111 then, 2222222222 (uncommitted changes) now",
        "configuration differs: epochs was 5, is 6 (a layer in the config folder or RecBole's defaults changed)",
    ]
    assert explain(then, then, {"epochs": 5}, {"epochs": 5}) == []
    assert explain({"threads": 1}, {"threads": 2}, {}, {}) == ["CPU threads differ: 1 then, 2 now (CPU sums depend on them)"]
    assert explain({}, {"threads": 2}, {}, {}) == [
        "CPU threads differ: not recorded (recrunner before 2026-11-25) then, 2 now (CPU sums depend on them)"]


def test_fast_mode_is_named_in_the_comparison():
    fast = {"fast": {"precision": "bf16", "compile": True, "scaler": False, "reason": ""}}
    assert explain({}, fast, {}, {}) == ["fast mode differs: exact then, bf16, compiled now (documentation: Fast mode)"]
    assert explain(fast, fast, {}, {}) == [
        "both ran in fast mode (bf16, compiled): its numbers repeat on one machine and torch version, not across them"]
    numpy_masks = {"fast": {**fast["fast"], "dropout": "numpy"}}
    assert explain(fast, numpy_masks, {}, {}) == [
        "fast mode differs: bf16, compiled then, bf16, compiled, numpy's dropout masks now (documentation: Fast mode)"]
    ran_exactly = {"fast": {"precision": "fp32", "compile": False, "reason": "GRU4Rec runs exactly on cpu"}}
    assert explain(ran_exactly, {}, {}, {}) == []  # --fast whose plan changed nothing ran as exact mode does
    assert explain(fast, ran_exactly, {}, {}) == [
        "fast mode differs: bf16, compiled then, exact now (documentation: Fast mode)"]


def test_a_gpu_run_without_deterministic_is_compared_within_its_tolerance():
    from recrunner.run.reproduce import compare, render
    from recrunner.run.record import RunRecord

    def record(ndcg, deterministic=False, device="cuda:0"):
        return RunRecord(best_epoch=3, epochs_trained=5, best_valid={"ndcg@10": 0.0612}, test={"ndcg@10": ndcg},
                         device={"device": device}, provenance={"deterministic": deterministic})

    config = {"metric_decimal_place": 4}
    within = compare(record(0.0398), record(0.0399), config, config)
    assert within.identical and within.tolerance == 1e-4
    assert "equal within the GPU's run-to-run tolerance: every metric within 0.0001 (1 of 4 values not identical)" \
        in render("a", "b", within)
    assert not compare(record(0.0398), record(0.0400), config, config).identical  # two units apart
    assert not compare(record(0.0398, deterministic=True), record(0.0399), config, config).identical
    assert not compare(record(0.0398, device="cpu"), record(0.0399), config, config).identical
