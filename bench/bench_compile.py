"""What fast mode's compile costs: the main job's first training step and first validation, with an empty
compiler cache and from a filled one, with a model's float attributes compiled as constants (fast mode's
setting, recrunner.training.fast.apply) and as symbols (torch's default under dynamic shapes, before).

    python bench/bench_compile.py [--case SASRec:ml-100k] [--rounds 2] [--data-path ../shared/datasets]
                                  [--set n_heads=1 ...]

Each measurement is a fresh process that builds the run as bench_fast.py does (`build`) and then trains one
batch (the first step: compiling the loss, forward and backward), two more (a warm step), validates once
(compiling the scoring) and once more. The two variants alternate, each round into an empty cache folder of
its own: `empty` compiles into it, `cached` is the next process on the same folder, what the next cell of a
sweep pays; `forgotten` (constants only) is one more process there after deleting the compiler failures the
first remembered (recrunner.training.fast.failures: SASRec with `--set n_heads=1` fails inductor's attention
rewrite), what each run paid before they were remembered. Reported per variant and cache, one figure per round:

    compile s   torch's count of compiling seconds (recrunner's CompileClock): training, then validation
    captures    how many times dynamo captured the training loss (a capture started again wastes one)
    first s     the first step's and the first validation's wall time, compiling included
    warm s      a later step's and validation's wall time

On a CPU `--probe` also times, in an empty cache, inductor's probe of the CPU's vector instructions (it
compiles test programs with the C++ compiler), which an empty cache's first compile includes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_fast import REPO, _FirstBatches, build

from recrunner.config.params import parse_set_options
from recrunner.training.fast.failures import FILE

VARIANTS = ("constants", "symbols")
FORMATS = {"captures": "d", "step": ".2f", "valid": ".2f"}


def one(variant: str, case: str, data_path: str | None, cache: str, settings: dict) -> dict:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    import torch._dynamo.config as dynamo
    from torch._dynamo.utils import compilation_time_metrics

    from recrunner.training.fast.compile_clock import CompileClock

    model, dataset = case.split(":")
    with tempfile.TemporaryDirectory() as work:
        trainer, train, valid = build(True, model, dataset, data_path, Path(work), settings=settings)
        if variant == "symbols":  # torch's default under dynamic=True, fast mode's until 2026-11-27
            dynamo.specialize_float = False
        attempts = len(compilation_time_metrics.get("compile_attempt_0", ()))
        retries = len(compilation_time_metrics.get("compile_attempt_1", ()))
        trainer.epoch, clock, start = 0, CompileClock(), time.perf_counter()
        trainer._train_epoch(_FirstBatches(train, 1), 0)
        first_step, loss_compile = time.perf_counter() - start, clock.seconds()
        captures = (len(compilation_time_metrics.get("compile_attempt_0", ())) - attempts
                    + len(compilation_time_metrics.get("compile_attempt_1", ())) - retries)
        trainer.epoch, start = 1, time.perf_counter()
        trainer._train_epoch(_FirstBatches(train, 3), 1)
        step = (time.perf_counter() - start) / 3
        clock, start = CompileClock(), time.perf_counter()
        trainer._valid_epoch(valid)
        first_valid, scoring_compile = time.perf_counter() - start, clock.seconds()
        start = time.perf_counter()
        trainer._valid_epoch(valid)
        warm_valid = time.perf_counter() - start
    return {"loss_compile": loss_compile, "captures": captures, "first_step": first_step, "step": step,
            "scoring_compile": scoring_compile, "first_valid": first_valid, "valid": warm_valid,
            "device": str(trainer.device), "plan": trainer.fast.settings()}


def probe(cache: str) -> float:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    from torch._inductor import cpu_vec_isa

    start = time.perf_counter()
    cpu_vec_isa.pick_vec_isa()
    return time.perf_counter() - start


def child(args, *extra) -> dict:
    command = [sys.executable, __file__, "--case", args.case, *extra, "--set", *args.settings]
    command += ["--data-path", str(args.data_path)] if args.data_path else []
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="SASRec:ml-100k", metavar="MODEL:DATASET")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-path", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--probe", action="store_true", help="also time inductor's CPU probe in an empty cache")
    parser.add_argument("--set", dest="settings", nargs="*", default=[], metavar="KEY=VALUE",
                        help="RecBole settings over the bench's sizes (YAML values), e.g. n_heads=1")
    parser.add_argument("--one", nargs=2, metavar=("VARIANT", "CACHE"), help=argparse.SUPPRESS)
    parser.add_argument("--probe-one", metavar="CACHE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    data_path = str(args.data_path) if not args.case.endswith(":ml-100k") else None
    settings = parse_set_options(args.settings)
    if args.one:
        print(json.dumps(one(args.one[0], args.case, data_path, args.one[1], settings)))
        return 0
    if args.probe_one:
        print(json.dumps(probe(args.probe_one)))
        return 0
    results = {(variant, cache): [] for variant in VARIANTS for cache in ("empty", "cached")}
    results["constants", "forgotten"] = []
    for _ in range(args.rounds):
        for variant in VARIANTS:
            with tempfile.TemporaryDirectory() as cache:
                results[variant, "empty"].append(child(args, "--one", variant, cache))
                results[variant, "cached"].append(child(args, "--one", variant, cache))
                if variant == "constants":  # what the cached run spared by remembering
                    remembered = Path(cache) / FILE
                    had = remembered.exists()
                    remembered.unlink(missing_ok=True)
                    results[variant, "forgotten"].append({**child(args, "--one", variant, cache), "remembered": had})
    first = results["constants", "empty"][0]
    print(f"{args.case} {' '.join(args.settings)}, {first['plan']}, on {first['device']}; one figure per round\n")
    print("| floats | cache | loss compile s | captures | first step s | warm step s | scoring compile s "
          "| first validation s | warm validation s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (variant, cache), runs in results.items():
        cells = [", ".join(format(run[key], FORMATS.get(key, ".1f")) for run in runs)
                 for key in ("loss_compile", "captures", "first_step", "step", "scoring_compile", "first_valid", "valid")]
        print(f"| {variant} | {cache} | " + " | ".join(cells) + " |")
    remembered = ["yes" if run["remembered"] else "no" for run in results["constants", "forgotten"]]
    print(f"\ncompiler failures remembered by the empty cache's run (constants): {', '.join(remembered)}")
    if args.probe:
        with tempfile.TemporaryDirectory() as cache:
            print(f"\ninductor's probe of this CPU's vector instructions, empty cache: {child(args, '--probe-one', cache):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
