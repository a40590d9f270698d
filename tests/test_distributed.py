"""Data-parallel runs (docs/distributed.md): 2 processes on gloo, tiny models, CPU only."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from recrunner import Callback, Experiment
from recrunner.core.errors import ConfigError
from recrunner.run.record import Status
from recrunner.training.distributed.iteration import part_bounds, rank_part

from .conftest import REPO, TINY_BPR, TINY_SASREC

EXACT = {"metric_decimal_place": 10}  # metrics unrounded, so "equal" means equal to 1e-6, not to 4 places
LONGER_BPR = {**TINY_BPR, **EXACT, "epochs": 4, "train_batch_size": 256, "checkpoint_every_steps": 20}


def test_every_sample_and_every_evaluation_batch_belongs_to_exactly_one_process():
    import torch

    for length in (1, 2, 5, 2048, 2049):
        for size in (2, 3, 4):
            spans = [part_bounds(length, rank, size) for rank in range(size)]
            assert spans[0][0] == 0 and spans[-1][1] == length
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, in rank order
            assert max(e - s for s, e in spans) - min(e - s for s, e in spans) <= 1
    batch = list(range(100, 111))
    assert sum((rank_part(batch, rank, 3) for rank in range(3)), []) == batch
    assert [rank_part([7], rank, 2) for rank in range(2)] == [[7], [7]]  # a 1-sample batch: no process left empty
    rows = torch.arange(100, 111)  # as recrunner's loaders hand a batch over (seams/batch_order.py)
    assert torch.equal(torch.cat([rank_part(rows, rank, 3) for rank in range(3)]), rows)
    assert [rank_part(torch.tensor([7]), rank, 2).tolist() for rank in range(2)] == [[7], [7]]


def test_a_cell_of_n_processes_takes_n_gpus_and_nccl_only_where_cuda_is():
    from recrunner.sweep.distributed import _backend
    from recrunner.sweep.executors import LocalProcesses
    from recrunner.sweep.worker import Task, on_gpu

    assert LocalProcesses(3, (0, 1, 2, 3), gpus_per_cell=2).free_slots() == 2
    assert LocalProcesses(3, (0, 1, 2), gpus_per_cell=2).free_slots() == 1
    task = on_gpu(Task("cell", Experiment("BPR", "ml-100k", {"nproc": 2}), None), [2, 3])
    assert task.experiment.runtime["gpu_id"] == "2,3"  # process i trains on the cell's i-th GPU
    import torch

    assert _backend(task) == ("nccl" if torch.cuda.is_available() else "gloo")


def test_what_cannot_be_data_parallel_is_refused_in_one_line(workspace):
    from recrunner.run.distributed import check_data_parallel
    from recrunner.run.experiment import prepare

    for model, why in (("Pop", "fitted in one pass"), ("RecVAE", "trains its epochs with RecVAETrainer"),
                       ("S3Rec", "pre-training stages")):
        with pytest.raises(ConfigError, match=why):
            check_data_parallel(prepare(Experiment(model, "ml-100k", {"nproc": 2}), workspace))
    assert check_data_parallel(prepare(Experiment("BPR", "ml-100k", {"nproc": 2}), workspace)) == 2
    bad = _cli(workspace, "--model", "BPR", "--set", "nproc=1.5")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "recrunner: error: --set: nproc expects an integer (default 1), got 1.5"]
    zero = _cli(workspace, "--model", "BPR", "--set", "nproc=0")
    assert zero.returncode == 2 and "nproc counts processes: a whole number >= 1, got 0" in zero.stderr


def _cli(workspace, *args, output=None, timeout=600):
    command = [sys.executable, "-m", "recrunner", "--dataset", "ml-100k", "--config-dir", str(REPO / "configs"),
               "--output", str(output or workspace.output_dir), "--quiet", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=workspace.output_dir.parent)


def _record(output):
    (path,) = output.glob("default/ml-100k/*/*/metrics.json")
    return json.loads(path.read_text()), path.parent


def _single_process_evaluation(run_dir, experiment, workspace):
    """best.pth of a data-parallel run, evaluated in this one process: per-user test values and the
    valid and test metrics."""
    from recrunner.run.building import loaders as build_loaders, trainer as build_trainer
    from recrunner.run.experiment import prepare
    from recrunner.seams.evaluator import capture_per_user
    from recrunner.training.logging.tensorboard import NullWriter

    prepared = prepare(experiment, workspace)
    _, valid_data, test_data = loaders = build_loaders(prepared, workspace)
    trainer = build_trainer(prepared, None, loaders[0], NullWriter(), ())
    trainer.eval_collector.data_collect(loaders[0])
    best = run_dir / "checkpoints" / "best.pth"
    valid = dict(trainer.evaluate(valid_data, model_file=best))
    per_user: dict = {}
    with capture_per_user(trainer, test_data, per_user):
        test = dict(trainer.evaluate(test_data, model_file=best))
    return valid, test, per_user


def _assert_close(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert abs(a[key] - b[key]) <= 1e-6, (key, a[key], b[key])


def test_two_processes_train_bpr_and_evaluate_exactly_as_one_process_would(workspace, tmp_path):
    """--nproc 2 and torchrun give the same run; its metrics are a one-process evaluation of its best.pth."""
    params = {**LONGER_BPR, "nproc": 2}
    sets = [f"{key}={value}" for key, value in LONGER_BPR.items()]
    done = _cli(workspace, "--model", "BPR", "--nproc", "2", "--set", *sets)
    assert done.returncode == 0, done.stderr
    record, run_dir = _record(workspace.output_dir)
    assert record["status"] == "ok" and record["provenance"]["processes"] == 2

    valid, test, per_user = _single_process_evaluation(run_dir, Experiment("BPR", "ml-100k", params), workspace)
    _assert_close(record["test"], test)
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    best_line = next(line for line in history if line["epoch"] == record["best_epoch"] and "valid" in line)
    _assert_close(best_line["valid"], valid)
    saved = np.load(run_dir / "test_per_user.npz")
    for name, values in per_user.items():
        np.testing.assert_array_equal(saved[name], values)  # every user once, in a single process's order

    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:0", "-m", "recrunner", "--model", "BPR", "--dataset", "ml-100k",
                "--config-dir", str(REPO / "configs"), "--output", str(tmp_path / "torchrun"), "--quiet", "--set", *sets]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    again = subprocess.run(torchrun, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    # the processes' own lines come first in torchrun's stderr, its traceback and failure summary last
    assert again.returncode == 0, again.stderr[:4000] + "\n...\n" + again.stderr[-1500:]
    other, _ = _record(tmp_path / "torchrun")
    assert other["test"] == record["test"] and other["run_id"] == record["run_id"]


@pytest.mark.parametrize("model, params", [
    ("SASRec", {**TINY_SASREC, "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": "uni100"}}),
    ("DeepFM", {"epochs": 1, "embedding_size": 8}),
], ids=["sampled", "labeled"])
def test_sampled_and_labeled_evaluation_equal_a_single_process_evaluation(model, params, workspace, tmp_path):
    """A 2-process run ends ok; then its best.pth, evaluated by 2 processes and by one, from the same
    RNG state (sampled ranking draws its negatives while it evaluates), gives the same metrics."""
    import torch.multiprocessing as mp

    from recrunner.sweep.worker import Task, run_task

    experiment = Experiment(model, "ml-100k", {**params, **EXACT, "nproc": 2})
    result = run_task(Task("cell", experiment, workspace))
    assert result.status == Status.OK, result.error
    _, run_dir = _record(workspace.output_dir)
    mp.start_processes(_evaluate_in_group, args=(experiment, workspace, run_dir, tmp_path), nprocs=2)
    together = json.loads((tmp_path / "together.json").read_text())
    _assert_close(together, _evaluate(experiment, workspace, run_dir))


def _evaluate_in_group(index, experiment, workspace, run_dir, folder):
    import torch.distributed

    from recrunner.sweep.distributed import _loopback_only
    from recrunner.training.distributed.world import init_group

    os.environ.update(RANK=str(index), WORLD_SIZE="2", LOCAL_RANK=str(index))
    _loopback_only()  # as recrunner's own launcher does
    init_group("gloo", 60, init_method=(folder / "rendezvous").as_uri())
    metrics = _evaluate(experiment, workspace, run_dir)
    if index == 0:
        (folder / "together.json").write_text(json.dumps(metrics))
    torch.distributed.destroy_process_group()


def _evaluate(experiment, workspace, run_dir) -> dict:
    """The test metrics of the run's best.pth, evaluated from RNG seed 7 (in a group: by all of it)."""
    from recbole.utils import init_seed

    from recrunner.run.building import loaders as build_loaders, trainer as build_trainer
    from recrunner.run.experiment import prepare
    from recrunner.training.logging.tensorboard import NullWriter

    prepared = prepare(experiment, workspace)
    train_data, _, test_data = build_loaders(prepared, workspace)
    trainer = build_trainer(prepared, None, train_data, NullWriter(), ())
    trainer.eval_collector.data_collect(train_data)
    init_seed(7, True)
    return {k: float(v) for k, v in trainer.evaluate(test_data, model_file=run_dir / "checkpoints" / "best.pth").items()}


class FailOnProcessOne(Callback):
    """Raises in process 1 only, at the end of epoch 1 (a bug, or an out-of-memory error, on one GPU)."""

    def on_epoch_end(self, loop, control):
        import torch.distributed

        if torch.distributed.get_rank() == 1 and loop.epoch == 1:
            raise MemoryError("CUDA out of memory on process 1 (simulated)")


def test_a_failing_process_fails_the_run_with_its_reason(workspace):
    from recrunner.sweep.worker import Task, run_task

    experiment = Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 4, "nproc": 2, "ddp_timeout": 30})
    result = run_task(Task("cell", experiment, workspace, callbacks=(FailOnProcessOne(),)))
    assert result.status == Status.FAILED
    assert result.error.startswith("process 1 of the run failed: MemoryError: CUDA out of memory on process 1")
    record, _ = _record(workspace.output_dir)
    assert record["status"] == "failed" and record["error"] == result.error


class StopOnRankZero(Callback):
    """Requests a stop on rank 0 only, after epoch 0 (as a search's pruner, which rank 0 alone has)."""

    def on_epoch_end(self, loop, control):
        import torch.distributed

        if torch.distributed.get_rank() == 0 and loop.epoch == 0:
            control.should_stop = True


def test_a_request_made_on_rank_0_is_carried_out_by_every_process(workspace):
    from recrunner.sweep.worker import Task, run_task

    experiment = Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 4, "nproc": 2, "ddp_timeout": 20})
    result = run_task(Task("cell", experiment, workspace, callbacks=(StopOnRankZero(),)))
    assert result.status == Status.OK, result.error  # no process waited for another: they stopped together
    record, run_dir = _record(workspace.output_dir)
    assert record["stopped_early"] is True
    assert [line["epoch"] for line in _history(run_dir)] == [-1, 0]


class HangOnProcessOne(Callback):
    """Process 1 stops answering at the end of epoch 1 (a deadlock, a stuck device)."""

    def on_epoch_end(self, loop, control):
        import torch.distributed

        if torch.distributed.get_rank() == 1 and loop.epoch == 1:
            time.sleep(600)


def test_a_hanging_process_fails_the_run_after_the_timeout_never_hangs_it(workspace):
    from recrunner.sweep.worker import Task, run_task

    experiment = Experiment("BPR", "ml-100k", {**TINY_BPR, "epochs": 4, "nproc": 2, "ddp_timeout": 5})
    started = time.time()
    result = run_task(Task("cell", experiment, workspace, callbacks=(HangOnProcessOne(),)))
    assert time.time() - started < 300  # not the 600 s process 1 sleeps
    assert result.status == Status.FAILED
    assert result.error.startswith("a process of the run stopped answering for ddp_timeout seconds"), result.error


def _rank_pids(launcher: int) -> list[int]:
    """The launcher's training processes in rank order: forked, in order, from its fork server."""
    table = {int(pid): (int(ppid), args) for pid, ppid, args in (
        line.split(None, 2) for line in subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True,
                                                       text=True).stdout.splitlines())}
    servers = [pid for pid, (ppid, args) in table.items() if ppid == launcher and "forkserver import" in args]
    return sorted(pid for pid, (ppid, _) in table.items() if ppid in servers)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The 2-process BPR run that nothing stopped: (its record, its run folder)."""
    output = tmp_path_factory.mktemp("whole")
    done = subprocess.run(_command(output), capture_output=True, text=True, timeout=600, cwd=output)
    assert done.returncode == 0, done.stderr
    return _record(output)


def _command(output):
    return [sys.executable, "-m", "recrunner", "--model", "BPR", "--dataset", "ml-100k", "--nproc", "2",
            "--config-dir", str(REPO / "configs"), "--output", str(output), "--quiet",
            "--set", *[f"{key}={value}" for key, value in LONGER_BPR.items()]]


def _within_an_epoch(output) -> bool:
    """Whether the run's newest last.pth was saved within an epoch (a step checkpoint)."""
    from recrunner.training.checkpoints.files import load

    found = list(output.glob("default/ml-100k/BPR/*/checkpoints/last.pth"))
    try:
        return bool(found) and bool(load(found[0]).get("batch_in_epoch"))
    except Exception:  # noqa: BLE001 - being replaced right now: look again
        return False


@pytest.mark.parametrize("victim, sig, status", [
    ("process 0", signal.SIGKILL, "interrupted"),  # rank 0, the one that writes
    ("process 1", signal.SIGKILL, "interrupted"),
    ("launcher", signal.SIGKILL, "running"),     # its processes die with it; the record stays as it was
    ("launcher", signal.SIGTERM, "interrupted"),  # every process stops at the same step boundary, saved
])
def test_a_stopped_run_resumes_to_the_uninterrupted_result(victim, sig, status, uninterrupted, workspace, tmp_path):
    """Stop a 2-process run after a step checkpoint; the same command ends as if it never stopped."""
    command = _command(workspace.output_dir)
    launcher = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and launcher.poll() is None and not _within_an_epoch(workspace.output_dir):
        time.sleep(0.02)
    ranks = _rank_pids(launcher.pid)
    assert len(ranks) == 2, launcher.communicate()
    assert _listening(launcher.pid, *ranks) <= {"127.0.0.1", "::1"}  # nothing open to the network
    os.kill({"process 0": ranks[0], "process 1": ranks[1]}.get(victim, launcher.pid), sig)
    _, err = launcher.communicate(timeout=300)
    deadline = time.time() + 30
    while time.time() < deadline and any(map(_alive, ranks)):
        time.sleep(0.1)
    assert not any(map(_alive, ranks)), "a process outlived its launcher"
    stopped, run_dir = _record(workspace.output_dir)
    assert stopped["status"] == status, err
    if victim.startswith("process"):
        assert launcher.returncode == 130 and "run the same command again to resume" in err, err
        assert stopped["error"].startswith(f"{victim} of the run was killed (SIGKILL)")

    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    final, _ = _record(workspace.output_dir)
    reference, reference_dir = uninterrupted
    assert final["status"] == "ok" and final["test"] == reference["test"]
    assert final["best_epoch"] == reference["best_epoch"]
    assert _history(run_dir) == _history(reference_dir)
    assert "continuing within epoch" in (run_dir / "run.log").read_text()


def _listening(*pids) -> set:
    """The addresses these processes listen on."""
    import psutil

    found = set()
    for pid in pids:
        try:
            found |= {c.laddr.ip for c in psutil.Process(pid).net_connections("inet") if c.status == psutil.CONN_LISTEN}
        except psutil.NoSuchProcess:
            pass
    return found


def _alive(pid: int) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")  # a zombie has ended; only its parent's reaping is left


def _history(run_dir):
    return [{k: v for k, v in json.loads(line).items() if k not in ("time", "elapsed", "seconds", "train_seconds")}
            for line in (run_dir / "history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("rank", [0, 1])
def test_under_torchrun_every_process_leaves_the_group_before_the_interpreter_exits(monkeypatch, rank):
    """Left to Python's exit, gloo's threads can outlive the group: a torchrun worker of the BPR test above once
    aborted with "terminate called without an active exception" (exit -6)."""
    from types import SimpleNamespace

    from recrunner.cli import run as cli_run
    from recrunner.sweep import distributed
    from recrunner.training.distributed import world

    done = []
    monkeypatch.setattr(cli_run, "_under_torchrun", lambda args: SimpleNamespace(rank=rank, size=2))
    monkeypatch.setattr(cli_run, "_run", lambda args: done.append("sweep") or 0)
    monkeypatch.setattr(distributed, "follow_sweep", lambda group: done.append("followed") or 0)
    monkeypatch.setattr(distributed, "hand_over", lambda group, task: done.append(f"handed over {task}"))
    monkeypatch.setattr(world, "leave_group", lambda: done.append("left"))
    monkeypatch.setattr(cli_run, "EXIT_AT_ONCE", False)

    assert cli_run.run_command(SimpleNamespace()) == 0
    assert done == (["sweep", "handed over None", "left"] if rank == 0 else ["followed", "left"])
    assert cli_run.EXIT_AT_ONCE  # recrunner/__main__.py then ends the process without the interpreter's teardown


def test_a_torchrun_process_ends_without_the_interpreter_s_teardown_its_streams_flushed(monkeypatch, capsys):
    from recrunner.cli import run as cli_run

    ended = []
    monkeypatch.setattr(cli_run.os, "_exit", ended.append)
    print("written before the end")
    cli_run.exit_at_once(3)
    assert ended == [3] and "written before the end" in capsys.readouterr().out
