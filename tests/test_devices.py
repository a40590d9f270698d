"""Devices: checkpoints that cross devices, the run's GPU, deterministic kernels, what a run used of its
device, and running out of memory. CI has no GPU: each CUDA path is reached here by a CPU test that
fails without it (bench/gpu_check.py runs the same promises on a real GPU)."""

import json

import numpy as np
import pytest
import torch

from recrunner import Experiment, Workspace, run_experiment
from recrunner.training.checkpoints import files as checkpoint, rng
from recrunner.training.loop import device

from .conftest import TINY_BPR, TINY_SASREC, elsewhere, run_cli, trainer_and_data

EPOCHS_3 = {**TINY_BPR, "epochs": 3, "save_total_limit": 3}


@pytest.fixture(autouse=True)
def _nondeterministic_after():
    yield
    torch.use_deterministic_algorithms(False)  # a failing test must not leave it on for the next


def test_rng_restore_accepts_states_from_another_device():
    generator = torch.Generator().manual_seed(3)
    state = elsewhere(rng.capture({"train": generator}))
    expected = (np.random.rand(), torch.rand(1).item(), torch.rand(1, generator=generator).item())
    rng.restore(state, {"train": generator})
    assert (np.random.rand(), torch.rand(1).item(), torch.rand(1, generator=generator).item()) == expected


def test_a_checkpoint_whose_tensors_arrive_on_another_device_resumes_exactly(workspace, tmp_path, monkeypatch):
    """What a GPU run met: torch.load(map_location=the run's device) put the RNG states on cuda:0 and
    the restore called .numpy() on them. Here every loaded tensor arrives as if on another device."""
    reference = run_experiment(Experiment("BPR", "ml-100k", EPOCHS_3), workspace, console=False)
    epoch_0 = reference.run_dir / "checkpoints" / "epoch-0000.pth"
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: elsewhere(real_load(*args, **kwargs)))

    other = Workspace(tmp_path / "elsewhere", workspace.data_path, workspace.config_dir)
    resumed = run_experiment(Experiment("BPR", "ml-100k", EPOCHS_3), other, console=False, resume_from=epoch_0)

    assert resumed.status == "ok", resumed.error
    assert (resumed.best_epoch, resumed.test) == (reference.best_epoch, reference.test)


def test_a_run_saved_with_another_cuda_device_count_resumes_with_one_warning(workspace):
    """A GPU run resumed on a CPU (on a GPU machine: a run of one more GPU than it has)."""
    present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    reference = run_experiment(Experiment("BPR", "ml-100k", EPOCHS_3), workspace, console=False)
    checkpoints = reference.run_dir / "checkpoints"
    state = torch.load(checkpoints / "epoch-0000.pth", weights_only=True)
    state["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8)] * (present + 1)  # what a run on more GPUs saves
    checkpoint.save_atomic(state, checkpoints / "last.pth")  # as if it had stopped after epoch 0 there
    for newer in ("epoch-0001.pth", "epoch-0002.pth"):
        (checkpoints / newer).unlink()
    metrics = reference.run_dir / "metrics.json"
    metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "interrupted"}))

    resumed = run_experiment(Experiment("BPR", "ml-100k", EPOCHS_3), workspace, console=False)

    assert resumed.status == "ok" and resumed.test == reference.test  # the CPU's random state was restored
    log = (resumed.run_dir / "run.log").read_text()
    assert "continuing at epoch 1" in log
    assert log.count(rng.cuda_plan(present + 1, present)) == 1


def test_cuda_states_are_restored_only_on_as_many_devices():
    assert rng.cuda_plan(0, 0) is None and rng.cuda_plan(2, 2) is None
    assert "of no CUDA device (a CPU run), this process has 1" in rng.cuda_plan(0, 1)
    assert "of 2 CUDA devices, this process has 1" in rng.cuda_plan(2, 1)


def test_checkpoints_are_written_from_the_cpu(tmp_path):
    path = tmp_path / "c.pth"
    checkpoint.save_atomic({"format_version": checkpoint.FORMAT_VERSION, "w": elsewhere(torch.ones(2))}, path)
    assert type(checkpoint.load(path)["w"]) is torch.Tensor


# ---------------------------------------------------------------------- the run's GPU
def test_gpu_id_is_where_a_run_runs_not_what_it_is(workspace):
    from recrunner import prepare

    here = prepare(Experiment("BPR", "ml-100k", TINY_BPR), workspace)
    there = prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "gpu_id": "1"}), workspace)
    assert (there.run_id, there.fingerprint) == (here.run_id, here.fingerprint)


def test_every_config_of_a_run_sees_the_run_gpu_before_cuda_is_asked(workspace, monkeypatch):
    """RecBole's Config sets CUDA_VISIBLE_DEVICES from gpu_id and asks CUDA: the first ask fixes what a
    process sees (RecBole issue 1887). recrunner's first Config used to be its defaults' (gpu_id 0)."""
    import os

    from recrunner import prepare
    from recrunner.seams import device as seam

    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: seen.append(os.environ.get("CUDA_VISIBLE_DEVICES")) or False)
    monkeypatch.setattr(seam, "machine_gpus", lambda: 0)  # a CPU machine (on a GPU one, CUDA stood in as off is refused)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    prepare(Experiment("BPR", "ml-100k", TINY_BPR, runtime={"gpu_id": "1"}), workspace)
    assert seen and set(seen) == {"1"}
    assert os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"  # asking CUDA starts nothing on any GPU


def test_a_gpu_id_that_hides_every_gpu_of_the_machine_is_refused_not_trained_on_the_cpu(workspace, monkeypatch):
    """RecBole sets CUDA_VISIBLE_DEVICES to gpu_id: `gpu_id: 1` on a one-GPU machine hid its GPU and the
    run trained on the CPU without a word. Here the machine's one GPU is NVML's count, stood in for."""
    import os

    from recrunner import ConfigError, prepare
    from recrunner.seams import device as seam

    monkeypatch.setattr(seam, "machine_gpus", lambda: 1)
    # CUDA sees the GPU where gpu_id names it, as in a fresh process (in this one CUDA may have started already)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: os.environ.get("CUDA_VISIBLE_DEVICES") == "0")
    with pytest.raises(ConfigError, match=r"gpu_id '1' names no GPU of this machine, which has 1 .*use_gpu: false"):
        prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "gpu_id": "1"}), workspace)
    for chosen in ({"use_gpu": False}, {"gpu_id": ""}):  # the CPU chosen: no question
        assert str(prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "gpu_id": "1", **chosen}), workspace).config["device"]) == "cpu"
    monkeypatch.setattr(seam, "machine_gpus", lambda: 0)  # a machine without GPUs: every run on its CPU
    assert str(prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "gpu_id": "1"}), workspace).config["device"]) == "cpu"
    assert seam.hidden_gpus("0", True, "cuda", lambda: 1) is None
    assert "names one, but torch cannot use it" in seam.hidden_gpus("0", True, "cpu", lambda: 1)  # the GPU there, CUDA not
    assert "names no GPU" in seam.hidden_gpus("0,3", True, "cpu", lambda: 2)


def test_a_device_setting_which_recbole_overwrites_is_refused(workspace):
    """RecBole sets `device` from use_gpu and gpu_id over any value: `device: cpu` trained on a GPU."""
    from recrunner import ConfigError, prepare

    with pytest.raises(ConfigError, match="device \\('cpu'\\) is set by RecBole from use_gpu and gpu_id.*use_gpu: false"):
        prepare(Experiment("BPR", "ml-100k", {**TINY_BPR, "device": "cpu"}), workspace)


# ---------------------------------------------------------------------- deterministic kernels
def test_deterministic_is_part_of_the_run_and_set_for_it_alone(workspace, monkeypatch):
    from recrunner import Callback

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seen = []

    class Watch(Callback):
        def on_fit_start(self, trainer, control):
            seen.append(torch.are_deterministic_algorithms_enabled())

    on = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "deterministic": True}), workspace, console=False,
                        callbacks=[Watch()])
    off = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, callbacks=[Watch()])

    assert seen == [True, False] and not torch.are_deterministic_algorithms_enabled()
    assert "deterministic=true" in on.run_dir.name and on.run_dir != off.run_dir  # a resume never mixes them
    assert json.loads((on.run_dir / "metrics.json").read_text())["provenance"]["deterministic"] is True
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == device.CUBLAS_WORKSPACE
    assert on.test == off.test  # on a CPU recrunner's kernels are deterministic anyway


def test_tf32_is_part_of_the_run_and_set_for_it_alone(workspace):
    from recrunner import Callback

    seen = []

    class Watch(Callback):
        def on_fit_start(self, trainer, control):
            seen.append(torch.backends.cuda.matmul.allow_tf32)

    on = run_experiment(Experiment("BPR", "ml-100k", {**TINY_BPR, "tf32": True}), workspace, console=False,
                        callbacks=[Watch()])
    off = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False, callbacks=[Watch()])
    assert seen == [True, False] and not torch.backends.cuda.matmul.allow_tf32
    assert "tf32=true" in on.run_dir.name and on.run_dir != off.run_dir  # the numbers differ: another run
    no_effect = "tf32: has no effect on a CPU" in (on.run_dir / "run.log").read_text()
    assert no_effect != torch.cuda.is_available()  # said where it does nothing; on a GPU it acts


def test_a_model_without_a_deterministic_kernel_fails_before_training_in_one_line(base_args, capsys, monkeypatch,
                                                                                   tmp_path):
    from recbole.model.general_recommender.bpr import BPR
    from torch._prims_common import alert_not_deterministic

    real = BPR.calculate_loss

    def calculate_loss(self, interaction):
        alert_not_deterministic("index_add_cuda_")  # what a CUDA kernel without a deterministic version raises
        return real(self, interaction)

    monkeypatch.setattr(BPR, "calculate_loss", calculate_loss)
    code, out, err = run_cli(capsys, [*base_args, "--model", "BPR", "--deterministic",
                                      "--set", "embedding_size=8", "epochs=2"])

    assert code == 2
    where = "cuda" if torch.cuda.is_available() else "cpu"  # the run's device (bench/gpu_check.py runs this on a GPU)
    assert f"deterministic: BPR uses index_add_cuda_ in training, which has no deterministic kernel on {where}" in out
    assert "Traceback" not in out + err
    record = json.loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    assert record["status"] == "failed" and record["epochs_trained"] == 0


def test_the_operation_is_read_from_torch_errors():
    assert device.nondeterministic_operation(RuntimeError(
        "median CUDA with indices output does not have a deterministic implementation, but you set ...")) == \
        "median CUDA with indices output"
    assert device.nondeterministic_operation(RuntimeError("size mismatch")) is None


# ---------------------------------------------------------------------- what a run used
def test_the_record_the_tables_and_the_final_line_say_where_a_run_trained(base_args, capsys, tmp_path):
    code, out, _ = run_cli(capsys, [*base_args, "--model", "BPR", "--set", "embedding_size=8", "epochs=1"])

    assert code == 0
    record = json.loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    where, memory = ("cuda:0", " allocated") if torch.cuda.is_available() else ("cpu", " RSS")  # the GPU check: a GPU
    assert record["device"]["device"] == where and record["device"]["peak_memory_mb"] > 0
    assert f"on {where}, peak " in out and memory in out
    csv = next((tmp_path / "runs").rglob("results.csv")).read_text().splitlines()
    assert {"device", "device_name", "peak_memory_mb"} <= set(csv[0].split(","))


# ---------------------------------------------------------------------- out of memory
def _oom_when_more_than(limit):
    def raise_past(count):
        if count > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {count} rows")
    return raise_past


@pytest.mark.parametrize("model, params", [("SASRec", {**TINY_SASREC, "eval_batch_size": 256}),
                                           ("BPR", {**TINY_BPR, "eval_batch_size": 200000}),
                                           ("BPR", {**TINY_BPR, "eval_args": {"mode": "uni100"}})],
                         ids=["full-sort-sequential", "full-sort", "sampled"])
def test_an_evaluation_batch_that_runs_out_of_memory_is_split_with_the_same_metrics(model, params, workspace):
    trainer, train, valid, test = trainer_and_data(workspace, model, {**params, "epochs": 1})
    trainer.fit(train, valid, saved=True, verbose=False)
    before = rng.capture({})  # sampled ranking draws its candidates while batches are built
    expected = trainer.test(test)
    per_user = {k: v.copy() for k, v in trainer.test_per_user.items()}
    rng.restore(before, {})

    scoring = trainer.model.full_sort_predict if "mode" not in params else trainer.model.predict
    check = _oom_when_more_than(40 if "mode" not in params else 40 * 101)
    trainer.model.__dict__["full_sort_predict" if "mode" not in params else "predict"] = \
        lambda interaction: check(len(interaction)) or scoring(interaction)
    collect = trainer.eval_collector.eval_batch_collect.collect
    trainer.eval_collector.eval_batch_collect.collect = lambda scores, *rest: check(len(scores) * 2) or collect(scores, *rest)

    assert trainer.test(test) == expected
    assert all(np.array_equal(per_user[k], trainer.test_per_user[k]) for k in per_user)


def test_the_evaluation_batch_size_does_not_change_the_metrics(workspace):
    results = []
    for size in (4096, 64):
        trainer, train, valid, test = trainer_and_data(workspace, "SASRec", {**TINY_SASREC, "epochs": 1,
                                                                              "eval_batch_size": size})
        trainer.fit(train, valid, saved=True, verbose=False)
        results.append((trainer.test(test), trainer.test_per_user, len(test)))
    (first, users, batches), (second, users_small, batches_small) = results
    assert batches == 1 and batches_small > 1
    assert first == second and all(np.array_equal(users[k], users_small[k]) for k in users)


def test_running_out_of_memory_in_training_is_one_line_and_keeps_the_last_checkpoint(base_args, capsys, monkeypatch,
                                                                                      tmp_path):
    from recbole.model.general_recommender.bpr import BPR

    from recrunner import CustomTrainer

    real, epoch = BPR.calculate_loss, []
    monkeypatch.setattr(CustomTrainer, "epoch_start", lambda self, epoch_idx: epoch.append(epoch_idx))

    def calculate_loss(self, interaction):
        if epoch[-1] >= 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, interaction)

    monkeypatch.setattr(BPR, "calculate_loss", calculate_loss)
    code, out, err = run_cli(capsys, [*base_args, "--model", "BPR", "--set", "embedding_size=8", "epochs=3"])

    assert code == 2 and "Traceback" not in out + err
    assert "ran out of memory training BPR at train_batch_size 2048" in out and "lower train_batch_size" in out
    run_dir = next((tmp_path / "runs").rglob("metrics.json")).parent
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "failed"
    assert checkpoint.load(run_dir / "checkpoints" / "last.pth")["epoch"] == 0  # kept: the same command resumes
