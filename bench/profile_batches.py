"""Where a training batch's time goes: torch.profiler over a window of batches in a run's epoch 1.

    python bench/profile_batches.py [--model SASRec] [--dataset ml-1m] [--data-path DIR] [--output DIR]
                                    [--batches 30] [--set KEY=VALUE ...] [--trace FILE.json.gz]

One run through the library (epoch 0 trains, compiles in fast mode and warms every cache; the window
starts a third into epoch 1), then one JSON line, per batch of the window:

  wall_ms       the host's time per batch, the device synchronized at both ends of the window
  device_ms     the time the GPU ran kernels (their union: overlaps counted once); busy = device / wall
  kernels       kernel launches (cudaLaunchKernel and its kin) and CUDA graph replays
  syncs         the host waiting for the device (cudaStreamSynchronize, cudaDeviceSynchronize,
                cudaEventSynchronize): a loss read, a `.item()`, a blocking copy
  top_kernels   the GPU's kernels with the most device time, by name (a C++ kernel's up to its template
                arguments; CUTLASS's KernelN with its first), with calls per batch and the host event that
                launches them (`by`: aten::bmm, a Triton kernel): where a step bound by its kernels spends them
  top_host_ops  the operators with the most host time of their own (self CPU), with calls per batch;
                host_ops_ms all operators' own host time, cuda_runtime_ms the CUDA runtime's (launches,
                copies, waits); what wall_ms has beyond the two is Python (the model's modules, the loop)

A GPU whose busy share is low and whose wall time is near the host operators' sum is waiting for the
host: fewer launches (compiling, CUDA graphs) help there, a faster kernel does not. On a CPU only the
operators are known (no kernels, no syncs). `--trace` writes the window for chrome://tracing or
Perfetto. bench/gpu_check.py's `profile` step runs this in exact and in fast mode.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def window(batches_per_epoch: int, wanted: int) -> tuple[int, int]:
    """The first batch after which profiling starts and how many batches it covers (pure): a third
    into the epoch, away from its first batches (caches, a compile's last steps) and its last."""
    start = max(1, batches_per_epoch // 3)
    return start, max(1, min(wanted, batches_per_epoch - start - 1))


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Microseconds covered by `intervals` (start, end), overlaps counted once (pure)."""
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        covered += stop - max(start, end)
        end = stop
    return covered


def summary(events, batches: int, wall_s: float, gpu: bool, top: int = 8) -> dict:
    """The window's figures per batch from the profiler's events (pure over `events`)."""
    from collections import Counter, defaultdict

    kernels, launches, syncs, runtime_us = [], 0, 0, 0.0
    own, device = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0])
    launcher = defaultdict(Counter)  # a kernel's name -> the host events that launched it (torch links them)
    for event in events:
        for kernel in getattr(event, "kernels", ()):
            launcher[kernel_name(kernel.name)][event.name] += 1
        if getattr(event.device_type, "name", str(event.device_type)) == "CUDA":
            if not getattr(event, "is_user_annotation", False):  # a named range on the GPU's timeline is no work:
                kernels.append((event.time_range.start, event.time_range.end))  # counted, it added 1.4 ms a batch
                device[kernel_name(event.name)][0] += event.time_range.end - event.time_range.start
                device[kernel_name(event.name)][1] += 1
            continue
        launches += event.name in LAUNCHES
        syncs += event.name in SYNCS
        if event.name.startswith("cu"):  # the CUDA runtime's calls: launches, copies, waits
            runtime_us += event.self_cpu_time_total
        elif event.name.startswith("aten::"):
            own[event.name][0] += event.self_cpu_time_total
            own[event.name][1] += 1
    ranked = sorted(own.items(), key=lambda item: -item[1][0])[:top]
    result = {"batches": batches, "wall_ms": round(wall_s * 1000 / batches, 3),
              "top_host_ops": [{"op": name, "ms": round(us / 1000 / batches, 3), "calls": round(calls / batches, 1)}
                               for name, (us, calls) in ranked],
              "host_ops_ms": round(sum(us for us, _ in own.values()) / 1000 / batches, 3)}
    if gpu:
        device_ms = union_us(kernels) / 1000 / batches
        result.update(device_ms=round(device_ms, 3), busy=round(device_ms / result["wall_ms"], 3),
                      cuda_runtime_ms=round(runtime_us / 1000 / batches, 3),
                      kernels=round(launches / batches, 1), syncs=round(syncs / batches, 2),
                      top_kernels=[{"kernel": name, "ms": round(us / 1000 / batches, 3), "calls": round(calls / batches, 1),
                                    "by": launcher[name].most_common(1)[0][0] if launcher[name] else "?"}
                                   for name, (us, calls) in sorted(device.items(), key=lambda item: -item[1][0])[:top]])
    return result


def kernel_name(name: str, width: int = 48) -> str:
    """A GPU kernel's name, short (pure): a C++ kernel's up to its template or argument list, without
    `void` and namespaces ('at::native::vectorized_elementwise_kernel<4, ...>' -> 'vectorized_elementwise_kernel');
    Triton's and cuBLAS's as they are; at most `width` characters."""
    short = name.removeprefix("void ").split("<")[0].split("(")[0].rsplit("::", 1)[-1].strip()
    if re.fullmatch(r"[Kk]ernel\d*", short) and "<" in name:  # CUTLASS's Kernel2<cutlass_80_wmma_...>: its argument says which
        short = f"{short}<{name.split('<', 1)[1].split(',')[0].split('>')[0].strip()}>"
    return (short or name)[:width]


def profiled_run(model: str, dataset: str, params: dict, data_path: Path, output: Path, batches: int,
                 trace: Path | None, sweep: str = "profile") -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from recrunner import Callback, Experiment, Workspace, run_experiment

    gpu = torch.cuda.is_available() and params.get("use_gpu", True)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    found = {}

    class Window(Callback):
        def on_epoch_start(self, loop, control):
            self.range = window(loop.batches_per_epoch, batches) if loop.epoch == 1 else None

        def on_train_batch(self, loop, control, batch):
            if self.range is None:
                return
            first, count = self.range
            if batch == first:
                sync()
                activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
                self.profiler = profile(activities=activities)
                self.profiler.__enter__()
                self.began = time.perf_counter()
            elif batch == first + count:
                sync()
                wall = time.perf_counter() - self.began
                self.profiler.__exit__(None, None, None)
                found.update(summary(self.profiler.events(), count, wall, gpu))
                if trace is not None:
                    raw = trace.with_suffix("")  # x.json.gz -> x.json, then gzipped
                    self.profiler.export_chrome_trace(str(raw))
                    trace.write_bytes(gzip.compress(raw.read_bytes()))
                    raw.unlink()
                self.range = None

    params = {"epochs": 2, "stopping_step": 100, **params}
    workspace = Workspace(output, data_path, REPO / "configs")
    result = run_experiment(Experiment(model, dataset, params, sweep=sweep), workspace, console=False,
                            callbacks=[Window()])
    record = json.loads((result.run_dir / "metrics.json").read_text()) if result.run_dir else {}
    return {"status": str(result.status), "error": result.error, "device": "cuda" if gpu else "cpu",
            "compile_seconds": record.get("compile_seconds"), **found}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SASRec")
    parser.add_argument("--dataset", default="ml-1m")
    parser.add_argument("--data-path", default=str(REPO / "datasets"))
    parser.add_argument("--output", default=str(REPO / "runs" / "profile"), help="runs folder (its compile cache is reused)")
    parser.add_argument("--name", default="profile", help="the sweep its run is filed under (a run done there is not run again)")
    parser.add_argument("--batches", type=int, default=30, help="batches in the window (default 30)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="run parameters (values as YAML)")
    parser.add_argument("--trace", default=None, help="write the window's trace here (.json.gz)")
    args = parser.parse_args(argv)
    if args.batches < 1:
        parser.error("--batches takes a whole number >= 1")
    from recrunner.config.params import parse_set_options
    from recrunner.core.errors import RecrunnerError

    try:
        found = profiled_run(args.model, args.dataset, parse_set_options(args.set), Path(args.data_path),
                             Path(args.output), args.batches, Path(args.trace) if args.trace else None, args.name)
    except RecrunnerError as exc:  # a malformed --set, an unknown model or dataset, a bad parameter: one line
        print(f"profile_batches: error: {exc}", file=sys.stderr)
        return 2
    if found["status"] == "ok" and "wall_ms" not in found:
        found.update(status="no window", error="epoch 1 trained no window of batches (epochs, stopping, or too few batches)")
    print(json.dumps(found))
    return 0 if found["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
