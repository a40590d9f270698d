"""bench/gpu_check.py, the project's GPU check, in the mode CI can run: a CPU at tiny sizes. On a GPU
the same script measures the main job at full size (BENCHMARKS.md: GPU check)."""

import importlib.util
import json
import re
import subprocess
import sys

import pytest

from .conftest import REPO


def test_the_gpu_check_runs_on_a_cpu_at_tiny_sizes_and_every_promise_holds(tmp_path):
    # `tests` is the suite's own business here; steps joined by + run at once, as `resume+tests` does on a GPU
    steps = "resume+main,profile+fast+models+loops+windows+optimizer+eval,attention,whole,static,cells,seeds"
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--out", str(tmp_path), "--steps", steps],
                          cwd=REPO, capture_output=True, text=True, timeout=900)

    assert done.returncode == 0, done.stderr[-2000:]
    table = json.loads((tmp_path / "gpu_check.json").read_text())
    assert table["device"] == "CPU" and table["tiny"] is True
    resumes = {k: v for k, v in table.items() if k.startswith(("default:", "deterministic:"))}
    assert list(resumes) == ["default: again", "default: killed and resumed",
                             "deterministic: again", "deterministic: killed and resumed"]
    assert all(v.startswith("bit-identical") for v in resumes.values()), resumes
    assert table["exact, test metrics"] == "equal to plain RecBole's"
    assert table["exact, batches built on the host, test metrics"] == "equal to batches built on the device"
    assert table["exact, each loss read, test metrics"] == "equal to losses read in groups"
    assert "FAILED" not in json.dumps(table), table
    assert len(table["--fast, s/epoch"].split(", ")) == 3
    assert table["--fast, compiled again, graph breaks"] == "compiled again: 0, graph breaks: 0"  # tiny: not compiled
    assert [k for k in table if k.startswith(("GRU4Rec", "BPR", "LightGCN"))] == [
        f"{model}, batches built on the device, s/epoch{what}" for model in ("GRU4Rec", "BPR", "LightGCN")
        for what in ("", " training")]
    for key in ("plain RecBole", "exact", "BPR, batches built on the device"):  # training within the whole epoch
        whole, training = (table[f"{key}, s/epoch{what}"].split(", ") for what in ("", " training"))
        assert len(whole) == len(training) and all(0 < float(t) <= float(w) for t, w in zip(training, whole))
    assert re.fullmatch(r"a batch's [\d.]+ / [\d.]+ s \([\d.]+x\); exact epoch [\d.]+ / [\d.]+ s \([\d.]+x\); "
                        r"validation [\d.]+ / [\d.]+ s \([\d.]+x\)", table["loops HRM `inverse_seq_item`, RecBole / arrays"])
    assert re.fullmatch(r"[\d.]+ s with the lists made per batch, [\d.]+ s made once \([\d.]+x; \d+ batches, the same\)",
                        table["windows, training loader's epoch"])
    assert re.fullmatch(r"[\d.]+ / [\d.]+ ms \([\d.]+x; 36 tensors, weights \S+ apart\)",
                        table["optimizer step SASRec:ml-100k, RecBole's / fused"])
    assert "attention in one kernel" in table["--fast, attention in one kernel, plan"]
    assert re.fullmatch(r"0\.\d{4} \(the fast step's: 0\.\d{4}\)", table["--fast, attention in one kernel, test ndcg@10"])
    assert table["--fast, static shapes, plan"].endswith("last batch dropped")
    assert table["--fast, whole step, its step"] == \
        "cuda_graph_optimizer: CUDA graphs need a CUDA device; SASRec trains eagerly on cpu"
    assert re.fullmatch(r"[\d.]+ / [\d.]+ s \([\d.]+x; \d+ batches, the same top-k hits; refused on this device\)",
                        table["validation BPR:ml-100k, batch by batch / graphed"])
    assert (tmp_path / "gpu_check.md").read_text().startswith("# GPU check on CPU")
    assert re.fullmatch(r"[\d.]+ s one at a time, [\d.]+ s at once \([\d.]+x\)", table["4 cells, first start to last end"])
    assert re.fullmatch(r"exact (0\.\d{4}, ){2}0\.\d{4} \(seeds 1, 2, 3\); --fast (0\.\d{4}, ){2}0\.\d{4}: [0-3] of 3 within .*",
                        table["seeds, test ndcg@10"]), table["seeds, test ndcg@10"]
    for mode in ("exact", "--fast"):  # bench/profile_batches.py: on a CPU, wall time and the operators
        assert re.fullmatch(r"[\d.]+ ms wall; host: operators [\d.]+ ms", table[f"profile {mode}, per batch"])
        ops = r"\w+ [\d.]+ ms \([\d.]+x\)"  # which six lead depends on the machine's load: their form only
        assert re.fullmatch(rf"{ops}(, {ops}){{5}}", table[f"profile {mode}, top host ops"]), table[f"profile {mode}, top host ops"]
        assert (tmp_path / "traces" / f"profile-{mode.strip('-')}.json.gz").stat().st_size > 0


def _module(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loops_rows_are_bench_host_loops_rows_without_its_header():
    text = ("| model | dataset | batches (timed) | method | a batch's s: RecBole / arrays | speed-up "
            "| exact epoch s: RecBole / arrays | speed-up | validation s: RecBole / arrays | speed-up |\n|---|---|\n"
            "| SRGNN | ml-100k | 48 (6) | `_get_slice` | 0.765 / 0.0320 | 24x | 78.3 / 34.6 | 2.27x | 0.54 / 0.14 | 4.00x |\n"
            "a warning\n")

    assert _module("gpu_check").loop_rows(text) == {"loops SRGNN `_get_slice`, RecBole / arrays": (
        "a batch's 0.765 / 0.0320 s (24x); exact epoch 78.3 / 34.6 s (2.27x); validation 0.54 / 0.14 s (4.00x)")}


def test_a_run_the_budget_stopped_is_named_so_and_not_a_failure():
    check = _module("gpu_check")
    stopped, not_run, done = {"stopped": 41.6}, {"stopped": 0.0}, {"epoch_seconds": [1.0, 2.0], "test": {"ndcg@10": 0.1}}
    assert check._seconds(stopped) == "STOPPED by the check's --budget after 42 s"
    assert check._seconds(not_run) == "NOT RUN: the check's --budget ran out"
    assert check._seconds(done) == "1.00, 2.00" and check._seconds({}) == "FAILED (see logs/)"
    assert check._agree(done, stopped, "equal") == check._seconds(stopped)
    assert check._agree(done, dict(done), "equal") == "equal"
    assert check._agree(done, {"test": {"ndcg@10": 0.2}}, "equal").startswith("DIFFER")
    assert check._compile(stopped) == check._seconds(stopped)
    assert check._compile({"status": "ok", "compile_seconds": 89.6}, "cold: the cache was empty") == \
        "90 s (cold: the cache was empty)"
    assert check._compile({"status": "ok", "compile_seconds": None}, "cold: the cache was empty") == "not compiled"
    phases = {"capture": 5.14, "forward": 10.2, "backward": 11.0}  # the run's compile_phases
    assert check._compile({"status": "ok", "compile_seconds": 40.2, "compile_phases": phases}, "cold: the cache was empty") == \
        "40 s (cold: the cache was empty) (capture 5.1, forward 10.2, backward 11.0)"
    held = {"graphs found": 0, "graphs compiled": 4, "autograd graphs compiled": 2}  # the run's compile_cache
    assert check._compile({"status": "ok", "compile_seconds": 35.9, "compile_cache": held}, "from the cache of earlier runs") == \
        "36 s (from the cache of earlier runs) (the compiler's cache held 0 of 4 graphs, 0 of 2 autograd graphs)"


def test_cells_the_budget_stopped_are_named_so_not_failed(tmp_path):
    """On the H200 (2026-11-30) the budget stopped the cells' second sweep: the table said FAILED."""
    check = _module("gpu_check")

    class Stub:
        out, tiny, gpu, stopped = tmp_path, True, True, {}

        def recrunner(self, args, timeout, log):
            if log == "cells-at once":
                self.stopped[log] = 5.0
                return -9
            return 0

        cut = check.Check.cut

    rows = check.cells(Stub())
    assert rows["4 cells, at once"] == "STOPPED by the check's --budget after 5 s"
    assert rows["4 cells, one at a time"].endswith(" s") and "FAILED" not in str(rows)


def test_the_fast_steps_recorded_and_eager_are_compared_deterministic():
    check = _module("gpu_check")
    asked = []

    class Stub:
        def job(self, epochs):
            return {"epochs": epochs}

        def timed_run(self, name, params, *flags, timeout=300):
            asked.append((name, params, flags))
            return {"losses": [3.5, 2.5], "train_seconds": [1.0, 1.1], "test": {"ndcg@10": 0.08}}, None

    row = check.fast_steps_deterministic(Stub())["--fast, deterministic, recorded step against eager"]
    assert row == "every epoch's loss equal; test metrics equal; s/epoch training 1.00, 1.10 against 1.00, 1.10"
    assert [(params["deterministic"], params.get("cuda_graph_step"), flags) for _, params, flags in asked] == \
        [(True, None, ("--fast",)), (True, False, ("--fast",))]


def test_a_step_says_how_busy_it_found_the_host(tmp_path):
    check = _module("gpu_check")
    for pid, cmdline in ((11, b"python\0-m\0recrunner\0--grid\0x"), (12, b"python\0-m\0pytest\0-q"), (13, b"bash"),
                         (14, None)):  # 14: gone between the listing and the read
        (tmp_path / str(pid)).mkdir()
        if cmdline is not None:
            (tmp_path / str(pid) / "cmdline").write_bytes(cmdline)
    (tmp_path / "self").mkdir()
    assert re.fullmatch(r"load \d+\.\d, 2 other recrunner or pytest processes at its start", check.host_at_start(tmp_path))
    assert re.fullmatch(r"load \d+\.\d, \d+ other recrunner or pytest processes at its start", check.host_at_start())


def test_a_step_that_raises_is_a_failed_row_and_the_steps_after_it_still_run(monkeypatch, tmp_path, capsys):
    """On an H200 a run that failed before its first validation (no history.jsonl) raised in the `models`
    step and ended the check: `loops` and `cells` never ran in that lease's call."""
    import argparse

    check = _module("gpu_check")

    def broken(_):
        raise FileNotFoundError("no history.jsonl")

    monkeypatch.setitem(check.STEPS, "models", broken)
    monkeypatch.setitem(check.STEPS, "cells", lambda _: {"4 cells at once": "17 s"})
    run = check.Check(argparse.Namespace(out=tmp_path, tiny=True, data_path=None, budget=None))
    table = {**check.run_group(run, "models"), **check.run_group(run, "cells")}
    assert table["models"] == "FAILED: the check itself raised FileNotFoundError: no history.jsonl (see gpu_check.txt)"
    assert table["4 cells at once"] == "17 s" and "models: step time" in table
    assert "Traceback" in capsys.readouterr().err


def test_tiny_fast_mode_is_bf16_only_where_the_cpu_computes_bf16(monkeypatch, tmp_path):
    """Emulated bf16 (a CPU without avx512_bf16 or amx_bf16) made the CPU check's fast epochs 5x as long."""
    import argparse

    check = _module("gpu_check")
    args = argparse.Namespace(out=tmp_path, tiny=True, data_path=None, budget=None)
    for native, precision in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(check, "_native_bf16", lambda: native)
        assert check.Check(args).tiny_fast == {"fast_compile": False, "fast_precision": precision}


def test_the_cells_span_from_the_first_start_to_the_last_end_of_a_sweep_record():
    check = _module("gpu_check")
    lines = [json.dumps(record) for record in (
        {"t": 10.0, "cell": "a", "state": "pending"}, {"t": 10.5, "cell": "a", "state": "running"},
        {"t": 18.0, "cell": "b", "state": "running"}, {"t": 23.0, "cell": "a", "state": "ok", "seconds": 5.0},
        {"t": 24.5, "cell": "b", "state": "failed"})] + [""]
    assert check.cells_span(lines) == 14.0  # 10.5 to 24.5: the pending line is not a start
    assert check.cells_span(lines[:3]) is None  # nothing finished


def test_the_gpu_is_busy_within_the_training_of_the_epochs_after_the_first():
    check = _module("gpu_check")
    history = [{"epoch": -1, "time": "2026-11-28T01:00:00.000+00:00"},
               {"epoch": 0, "seconds": 40.0, "train_seconds": 39.0, "time": "2026-11-28T01:00:40.000+00:00"},
               {"epoch": 1, "seconds": 2.0, "train_seconds": 1.5, "time": "2026-11-28T01:00:42.000+00:00"},
               {"epoch": 2, "seconds": 2.0, "train_seconds": 1.5, "time": "2026-11-28T01:00:44.500+00:00"}]
    t0 = 1795827600.0  # 2026-11-28T01:00:00 UTC
    windows = check.train_windows(history)  # epoch 0 compiles: left out
    assert windows == [(t0 + 40.0, t0 + 41.5), (t0 + 42.5, t0 + 44.0)]
    samples = [(0, 900, t0 + 20.0), (90, 1400, t0 + 40.5), (80, 1400, t0 + 41.0), (0, 1400, t0 + 41.8),
               (95, 1400, t0 + 43.0), (0, 1400, t0 + 43.9)]
    assert check.busy_within(samples, windows) == (0.75, 4)  # the sample between the epochs' training is out
    assert check.busy_within(samples, []) is None
    busy = check.Busy(gpu=False)
    busy.samples, busy.training = samples, windows
    assert busy.text() == "50% of 6 samples, 1400 MiB peak (nvidia-smi); training after epoch 0: 75% of 4 samples"


def test_fast_modes_seeds_against_exact_modes_range():
    check = _module("gpu_check")
    exact, fast = {1: 0.0780, 2: 0.0771, 3: 0.0790}, {1: 0.0785, 2: 0.0795, 3: 0.0772}
    assert check.seed_spread(exact, fast) == ("exact 0.0780, 0.0771, 0.0790 (seeds 1, 2, 3); --fast 0.0785, 0.0795, "
                                              "0.0772: 2 of 3 within exact's range [0.0771, 0.0790], mean 0.0784 against 0.0780")


class _Event:
    def __init__(self, name, start, end, cuda=False, own=0.0, annotation=False, launched=()):
        self.name, self.self_cpu_time_total, self.is_user_annotation = name, own, annotation
        self.kernels = [type("Kernel", (), {"name": kernel})() for kernel in launched]  # torch links them by correlation
        self.device_type = type("Kind", (), {"name": "CUDA" if cuda else "CPU"})()
        self.time_range = type("Range", (), {"start": start, "end": end})()


def test_the_profile_window_and_its_figures_per_batch():
    profile = _module("profile_batches")
    assert profile.window(480, 30) == (160, 30) and profile.window(45, 30) == (15, 29) and profile.window(2, 30) == (1, 1)
    assert profile.union_us([(0, 10), (5, 20), (30, 40), (32, 35)]) == 30  # overlaps once
    events = [_Event("aten::mm", 0, 9, own=900.0, launched=["gemm"]), _Event("aten::mm", 10, 19, own=700.0, launched=["gemm"]),
              _Event("aten::add", 20, 21, own=100.0), _Event("cudaLaunchKernel", 0, 1, own=50.0),
              _Event("cudaLaunchKernel", 1, 2, own=50.0), _Event("cudaStreamSynchronize", 2, 3, own=400.0),
              _Event("gemm", 100, 600, cuda=True), _Event("gemm", 500, 1100, cuda=True),
              _Event("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T1)", 0, 40, cuda=True),
              _Event("Optimizer.step#Adam.step", 1100, 2000, cuda=True, annotation=True)]  # a range, not work
    found = profile.summary(events, batches=2, wall_s=0.004, gpu=True)
    assert found["wall_ms"] == 2.0 and found["device_ms"] == 0.52 and found["busy"] == 0.26  # (40 + 1100-100) us / 2
    assert found["top_kernels"] == [{"kernel": "gemm", "ms": 0.55, "calls": 1.0, "by": "aten::mm"},  # by device time, each whole
                                    {"kernel": "vectorized_elementwise_kernel", "ms": 0.02, "calls": 0.5, "by": "?"}]
    assert profile.kernel_name("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8>"
                               "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8::Params)") == \
        "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gem"  # the H200's bf16 bmm in fast mode: which Kernel2 it is
    assert (found["kernels"], found["syncs"], found["cuda_runtime_ms"]) == (1.0, 0.5, 0.25)
    assert found["top_host_ops"][0] == {"op": "aten::mm", "ms": 0.8, "calls": 1.0} and found["host_ops_ms"] == 0.85
    assert set(profile.summary(events, batches=2, wall_s=0.004, gpu=False)) == {
        "batches", "wall_ms", "top_host_ops", "host_ops_ms"}  # a CPU: no kernels, no waits


def test_the_profile_script_refuses_bad_input_in_one_line(capsys, tmp_path):
    profile = _module("profile_batches")
    with pytest.raises(SystemExit) as stopped:
        profile.main(["--batches", "0"])
    assert stopped.value.code == 2
    assert profile.main(["--model", "NoSuch", "--dataset", "ml-100k", "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "profile_batches: error: unknown model 'NoSuch'. Available: ")


def test_torch_s_recompile_and_graph_break_logs_are_one_row():
    prefix = "V1201 00:14:57.795000 2779 torch/_dynamo/guards.py:5396] [0/1] "
    text = "\n".join(prefix + line for line in (
        "[__graph_breaks] Graph break in user code at /tmp/tl.py:4",
        "[__graph_breaks] Graph Break Reason: Encountered graph break when attempting to trace CALL",
        "[__graph_breaks]   Explanation: Dynamo does not know how to trace builtin operator `print`",
        "[__recompiles] Recompiling function calculate_loss in /m/sasrec.py:120",
        "[__recompiles]     triggered by the following guard failure(s):",
        "[__recompiles]     - 0/0: tensor 'x' size mismatch at index 0. expected 2048, actual 499   # y = x * k",
        "[__recompiles]     - User stack trace:")) + "\nhi\n"

    assert _module("gpu_check").compile_notes(text) == (
        "compiled again: 1 (calculate_loss: 0/0: tensor 'x' size mismatch at index 0. expected 2048, actual 499), "
        "graph breaks: 1 (/tmp/tl.py:4: Dynamo does not know how to trace builtin operator `print`)")
    assert _module("gpu_check").compile_notes("") == "compiled again: 0, graph breaks: 0"
