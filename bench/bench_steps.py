"""Step schedules (recrunner.training.loop.steps): what a step checkpoint costs, what the step boundaries cost
when no key is set, and what a kill late in a long epoch loses with and without step checkpoints.

    python bench/bench_steps.py [--dataset ml-1m] [--data-path ../shared/datasets] [--parts cost unset kill]
    python bench/bench_steps.py --parts kill --synthetic 5000000 --kill-every-minutes 2 --no-reference

cost:  SASRec and BPR (their configs/models defaults) train --cost-batches batches with
       checkpoint_every_steps: --cost-every; each step checkpoint (last.pth, written whole) is timed,
       and set against the batch time and the epoch's length.
unset: BPR epochs with the step boundaries in place (every run: Ctrl-C saves at a step) against the
       training loader handed to RecBole as it is (the code before step schedules), alternating.
kill:  a small SASRec; an uninterrupted epoch, then the same epoch SIGKILLed at a random batch late in
       it (--kill-from to --kill-to of the epoch) with a step checkpoint every --kill-every-steps,
       (or --kill-every-minutes) resumed by the same call: the time the kill lost with step
       checkpoints (since the last one) and without (the epoch so far), the resume's own overhead,
       and whether the resumed run ends with the uninterrupted run's metrics (--no-reference skips
       that run: tests/test_steps.py checks the equality). --synthetic N runs it on
       bench/make_synthetic.py's N interactions with bench_scale's small SASRec (batch 4096).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SMALL_SASREC = {"hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1, "MAX_ITEM_LIST_LENGTH": 50,
                "train_batch_size": 512}

# A child process: one run with a callback that times batches and checkpoints, and stops as asked.
CHILD = r"""
import json, os, signal, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from recrunner import Callback, Experiment, Workspace, run_experiment
from recrunner.training.checkpoints.checkpointer import Checkpointer
from recrunner.training.loop import steps

spec = json.loads(sys.argv[1])
events = {"start": time.time(), "batches": [], "step_checkpoints": [], "epoch_starts": [], "epoch_ends": []}
real_save = Checkpointer.save_last
def timed_save(self, epoch, epoch_rng=None):
    started = time.perf_counter()
    real_save(self, epoch, epoch_rng)
    if epoch_rng is not None:
        events["step_checkpoints"].append([time.time(), time.perf_counter() - started])
Checkpointer.save_last = timed_save
if spec.get("no_boundaries"):  # the loader as RecBole gets it without step schedules
    real_batches = steps.StepBoundaries.batches
    steps.StepBoundaries.batches = lambda self, data, epoch: (real_batches(self, data, epoch), data)[1]

def dump():
    Path(spec["events"]).write_text(json.dumps(events))

class Probe(Callback):
    seen = 0
    def on_epoch_start(self, loop, control):
        events["epoch_starts"].append(time.time())
        events["batches_per_epoch"] = loop.batches_per_epoch
        if spec.get("kill_fraction") and "kill_at" not in spec:  # a batch late in the first epoch
            spec["kill_at"] = events["kill_at"] = max(1, int(spec["kill_fraction"] * loop.batches_per_epoch))
    def on_train_epoch_end(self, loop, control, losses):
        events["epoch_ends"].append(time.time())
    def on_train_batch(self, loop, control, batch):
        Probe.seen += 1
        events["batches"].append(time.time())
        if Probe.seen == spec.get("kill_at"):
            dump(); os.kill(os.getpid(), signal.SIGKILL)
        if Probe.seen == spec.get("stop_at"):
            control.failure = "bench: enough batches"

ws = Workspace(Path(spec["output"]), Path(spec["data"]), Path(sys.argv[2]) / "configs")
result = run_experiment(Experiment(spec["model"], spec["dataset"], spec["params"]), ws, console=False,
                        callbacks=[Probe()])
events.update(status=result.status, test=result.test, end=time.time())
dump()
"""


def child(spec: dict, tmp: Path) -> tuple[dict, int]:
    spec = {**spec, "events": str(tmp / f"events-{time.time_ns()}.json")}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec), str(REPO)], capture_output=True, text=True)
    events = json.loads(Path(spec["events"]).read_text()) if Path(spec["events"]).exists() else {}
    if not events:
        sys.exit(f"the child run left no events:\n{proc.stderr[-3000:]}")
    return events, proc.returncode


def batch_seconds(events: dict) -> float:
    """The median gap between batches, step checkpoints left out."""
    stamps = events["batches"]
    saves = [at for at, _ in events["step_checkpoints"]]
    gaps = [b - a for a, b in zip(stamps, stamps[1:]) if not any(a <= s <= b for s in saves)]
    return statistics.median(gaps)


def cost(args, tmp: Path) -> None:
    print(f"\n## A step checkpoint's cost ({args.dataset}, configs/models defaults, {args.cost_batches} batches, "
          f"checkpoint_every_steps: {args.cost_every})\n")
    print("| model | last.pth | one checkpoint | one batch | batches per epoch | epoch | checkpoint every 10 minutes "
          "| checkpoint every 100 steps |")
    print("|---|---|---|---|---|---|---|---|")
    for model in args.cost_models:
        spec = {"model": model, "dataset": args.dataset, "data": str(args.data_path), "output": str(tmp / f"cost-{model}"),
                "params": {"epochs": 1, "checkpoint_every_steps": args.cost_every}, "stop_at": args.cost_batches}
        events, _ = child(spec, tmp)
        saves = [seconds for _, seconds in events["step_checkpoints"]]
        size = max(p.stat().st_size for p in (tmp / f"cost-{model}").rglob("last.pth"))
        per_batch, batches = batch_seconds(events), events["batches_per_epoch"]
        save = statistics.median(saves)
        print(f"| {model} | {size / 2**20:.1f} MiB | {1000 * save:.0f} ms (median of {len(saves)}) | {1000 * per_batch:.0f} ms "
              f"| {batches} | {per_batch * batches:.0f} s | {100 * save / 600:.3f}% of the time "
              f"| {100 * save / (100 * per_batch):.2f}% of the time |")


def unset(args, tmp: Path) -> None:
    print(f"\n## No step key set: the step boundaries against the loader as it was (BPR, {args.dataset}, "
          f"{args.unset_epochs} epochs each, alternating)\n")
    times = {True: [], False: []}
    for round_ in range(args.unset_rounds):
        for boundaries in (True, False):
            spec = {"model": "BPR", "dataset": args.dataset, "data": str(args.data_path),
                    "output": str(tmp / f"unset-{round_}-{boundaries}"), "params": {"epochs": args.unset_epochs},
                    "no_boundaries": not boundaries}
            events, _ = child(spec, tmp)
            times[boundaries] += [end - start for start, end in zip(events["epoch_starts"], events["epoch_ends"])]
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    print("| training epoch (median) | with step boundaries | loader as it was | ratio |")
    print("|---|---|---|---|")
    print(f"| BPR | {with_:.3f} s (n={len(times[True])}) | {without:.3f} s (n={len(times[False])}) "
          f"| {with_ / without:.3f} |")


def kill(args, tmp: Path) -> None:
    small, dataset, data_path = SMALL_SASREC, args.dataset, args.data_path
    if args.synthetic:
        from bench.make_synthetic import name_for, synthesize, write

        dataset, data_path = name_for(args.synthetic), tmp / "data"
        write(synthesize(args.synthetic), data_path, dataset)
        small = {**SMALL_SASREC, "train_batch_size": 4096, "eval_batch_size": 8192,
                 "load_col": {"inter": ["user_id", "item_id", "timestamp"]}}
    every = ({"checkpoint_every_minutes": args.kill_every_minutes} if args.kill_every_minutes
             else {"checkpoint_every_steps": args.kill_every_steps})
    params = {**small, "epochs": 1, "progress_every": 60, **every}
    base = {"model": "SASRec", "dataset": dataset, "data": str(data_path), "params": params}
    reference = child({**base, "output": str(tmp / "kill-reference")}, tmp)[0] if args.reference else None
    fraction = random.Random(args.seed).uniform(args.kill_from, args.kill_to)
    killed, code = child({**base, "output": str(tmp / "kill-run"), "kill_fraction": fraction}, tmp)
    assert code == -signal.SIGKILL, code
    batches, kill_at = killed["batches_per_epoch"], killed["kill_at"]
    died = killed["batches"][-1]
    last_save = max((at for at, _ in killed["step_checkpoints"]), default=killed["epoch_starts"][0])
    cut = {"stop_at": args.resume_batches} if args.resume_batches else {}  # the resume's start is what is measured
    resumed, _ = child({**base, "output": str(tmp / "kill-run"), **cut}, tmp)
    overhead = resumed["batches"][0] - resumed["start"]
    fresh = reference or killed
    fresh_overhead = fresh["batches"][0] - fresh["start"]
    per_batch = (died - killed["epoch_starts"][0]) / kill_at
    epoch = (f"epoch {reference['epoch_ends'][0] - reference['epoch_starts'][0]:.0f} s" if reference
             else f"epoch about {per_batch * batches:.0f} s at the killed run's pace")
    print(f"\n## SIGKILL late in an epoch (small SASRec {small}, {dataset}: {batches} batches, {epoch})\n")
    print(f"killed at batch {kill_at} of {batches} ({100 * kill_at / batches:.0f}% of the epoch), {every}\n")
    print("| | training lost |")
    print("|---|---|")
    print(f"| with step checkpoints (since the last one) | {died - last_save:.1f} s |")
    print(f"| without (the epoch so far) | {died - killed['epoch_starts'][0]:.1f} s |")
    same = ("" if reference is None else ", test metrics " +
            ("identical to" if resumed["test"] == reference["test"] else "DIFFERENT from") + " the uninterrupted run's")
    ended = (f"it was stopped after {args.resume_batches} batches (--resume-batches)" if args.resume_batches
             else f"it ended {resumed['status']}{same}")
    print(f"\nthe resumed process trained its first batch {overhead:.1f} s after it started "
          f"(a fresh run: {fresh_overhead:.1f} s); {ended}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml-1m")
    parser.add_argument("--data-path", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--parts", nargs="+", default=["cost", "unset", "kill"], choices=["cost", "unset", "kill"])
    parser.add_argument("--cost-models", nargs="+", default=["SASRec", "BPR"])
    parser.add_argument("--cost-batches", type=int, default=30)
    parser.add_argument("--cost-every", type=int, default=5)
    parser.add_argument("--unset-epochs", type=int, default=3)
    parser.add_argument("--unset-rounds", type=int, default=2)
    parser.add_argument("--kill-every-steps", type=int, default=20)
    parser.add_argument("--kill-every-minutes", type=float, default=None)
    parser.add_argument("--no-reference", dest="reference", action="store_false")
    parser.add_argument("--resume-batches", type=int, default=None, help="stop the resumed run after this many batches")
    parser.add_argument("--synthetic", type=int, default=None, help="interactions of a synthetic dataset")
    parser.add_argument("--kill-from", type=float, default=0.75)
    parser.add_argument("--kill-to", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"# bench_steps on {os.cpu_count()} cores, torch threads as a run sets them")
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
        for part in args.parts:
            {"cost": cost, "unset": unset, "kill": kill}[part](args, Path(tmp))


if __name__ == "__main__":
    main()
