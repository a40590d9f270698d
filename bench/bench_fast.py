"""Fast mode against exact mode: training and evaluation time per epoch, and the compile time paid once.

    python bench/bench_fast.py [--cases SASRec:ml-100k BPR:ml-1m ...] [--epochs 3] [--max-batches N]
                               [--data-path ../shared/datasets] [--threads N] [--precision bf16|fp32]
                               [--no-limits] [--warm-cache] [--dropout auto torch numpy] [--last-layer auto false]

Each measurement is a fresh process that builds RecBole's config, data and model as a run does
(recrunner's array-built batches and negatives included, in both modes) and drives CustomTrainer's own epoch (`_train_epoch`, `_valid_epoch`) for `--epochs` epochs, with
`fast: true` or without; the two modes alternate, exact first. Reported per case and mode:

    first     the first epoch's training and validation seconds (fast: includes compiling)
    epoch     the median of the later epochs' training seconds (warm)
    eval      the median of the later validations' seconds (full-sort or sampled, as configured)
    speed-up  exact epoch / fast epoch, exact eval / fast eval
    compile   fast first - fast epoch (training) + fast first eval - fast eval: paid once per process
              (less when the compiler's cache under <output>/.cache/compile is warm)

`--max-batches N` times only the first N batches of each training epoch and scales the warm time to
the whole epoch (batches per epoch / N; the compile time is not scaled): for the main job's SASRec an exact epoch is minutes on a CPU.
The settings are the models' RecBole defaults with recrunner's config layers (configs/): SASRec is the main job.
`--precision` sets `fast_precision` (default auto); `--dropout` sets `fast_dropout` and `--last-layer` sets
`fast_last_layer`, one fast row per pair of their values against the same exact measurement (default auto); `--no-limits` sets aside fast mode's per-model tables
(recrunner/training/fast/facts.py's `FACTS`) in the measuring process, to measure what `auto` leaves out.
Each fast process compiles into an empty cache, the compile time of a first run; `--warm-cache` runs the
fast process once before the measured one, into the same cache: what the later cells of a sweep pay.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARAMS = {
    "SASRec": {"train_neg_sample_args": None},  # the main job: RecBole's defaults with CE loss
    "GRU4Rec": {"train_neg_sample_args": None},
    "BERT4Rec": {"train_neg_sample_args": None},
    "BPR": {},
    "LightGCN": {},
}
CASES = ["SASRec:ml-100k", "GRU4Rec:ml-100k", "BERT4Rec:ml-100k", "BPR:ml-100k", "LightGCN:ml-100k",
         "SASRec:ml-1m", "BPR:ml-1m"]


class _FirstBatches:
    """The first `n` batches of a RecBole loader, as RecBole's epoch iterates it."""

    def __init__(self, loader, n):
        self.loader, self.n = loader, n
        self.shuffle = getattr(loader, "shuffle", False)

    def __iter__(self):
        return itertools.islice(iter(self.loader), self.n)

    def __len__(self):
        return min(self.n, len(self.loader))

    def __getattr__(self, name):  # the rest of the loader's interface (a knowledge loader's set_mode)
        if name == "loader":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)


def build(fast: bool, model: str, dataset: str, data_path: str | None, workdir: Path, precision: str = "auto",
          limits: bool = True, dropout: str = "auto", settings: dict | None = None):
    """RecBole's config, data and model as a run builds them, in `workdir`, and CustomTrainer over them:
    (trainer, train loader, validation loader); `settings` over the bench's sizes (`--set`). Set
    TORCHINDUCTOR_CACHE_DIR before calling."""
    import os

    os.chdir(workdir)
    import torch
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    from recrunner.seams.models import model_class, ready_model  # as runs build it: anomaly detection off, ...
    from recrunner.seams.config import recbole_argv_cleared
    from recrunner.seams.environment import quiet_known_warnings
    from recrunner.data.placement import place_tables
    from recrunner.seams.loaders import vectorise_loaders
    from recrunner.training.fast import facts
    from recrunner.training.loop.trainer import CustomTrainer

    if not limits:  # as if the model had been measured faster and nothing limited it
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        facts.FACTS[model] = (facts.Fact("speed", "accelerate", device_type, "this machine", "--no-limits"),)
    quiet_known_warnings()
    from recrunner.config.layers import layered_params

    layers = layered_params(REPO / "configs", model, dataset, {})  # configs/datasets/ml-1m.yaml: its columns
    params = {**layers, **PARAMS.get(model, {}), "show_progress": False, "progress_bar": False, "checkpoint_dir": str(workdir / "ckpt"), "fast": fast,
              "fast_precision": precision, "fast_dropout": dropout,
              **({"data_path": data_path} if data_path else {}), **(settings or {})}
    with recbole_argv_cleared():
        config = Config(model=model, dataset=dataset, config_dict=params)
    init_seed(config["seed"], config["reproducibility"])
    loaders = data_preparation(config, create_dataset(config))
    vectorise_loaders(loaders, place_tables(config, loaders))  # what every run's loaders do (seams/loaders.py)
    train, valid, _ = loaders
    init_seed(config["seed"], config["reproducibility"])
    trainer = CustomTrainer(config, ready_model(model_class(model)(config, train._dataset).to(config["device"])))
    trainer.eval_collector.data_collect(train)
    assert not torch.is_anomaly_enabled(), "anomaly detection on: the model was not built as runs build it"
    return trainer, train, valid


def one_run(fast: bool, model: str, dataset: str, epochs: int, max_batches: int | None, data_path: str | None,
            workdir: Path, precision: str = "auto", limits: bool = True, cache: str | None = None,
            dropout: str = "auto", last_layer="auto") -> dict:
    import os

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache or str(workdir / "compile-cache")  # cold unless --warm-cache
    trainer, train, valid = build(fast, model, dataset, data_path, workdir, precision, limits, dropout,
                                  {"fast_last_layer": last_layer})
    batches = len(train)
    loader = _FirstBatches(train, max_batches) if max_batches and max_batches < batches else train
    scale = batches / len(loader)
    train_times, eval_times = [], []
    for epoch in range(epochs):
        trainer.epoch = epoch
        start = time.perf_counter()
        trainer._train_epoch(loader, epoch)
        train_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        trainer._valid_epoch(valid)
        eval_times.append(time.perf_counter() - start)
    return {"train": train_times, "eval": eval_times, "batches": batches, "timed_batches": len(loader), "scale": scale,
            "plan": trainer.fast.settings() if trainer.fast else "exact"}


def measure(fast: bool, case: str, args, cache: str | None = None, dropout: str = "auto", last_layer: str = "auto") -> dict:
    model, dataset = case.split(":")
    command = [sys.executable, __file__, "--one", "fast" if fast else "exact", "--cases", case,
               "--epochs", str(args.epochs)]
    if args.max_batches:
        command += ["--max-batches", str(args.max_batches)]
    if args.data_path:
        command += ["--data-path", str(args.data_path)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    command += ["--precision", args.precision, "--dropout", dropout, "--last-layer", last_layer]
    command += ["--no-limits"] if args.no_limits else []
    command += ["--cache", cache] if cache else []
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def fast_measure(case: str, args, dropout: str, last_layer: str) -> dict:
    if not args.warm_cache:
        return measure(True, case, args, dropout=dropout, last_layer=last_layer)
    with tempfile.TemporaryDirectory() as cache:
        measure(True, case, args, cache, dropout, last_layer)  # fills the cache
        result = measure(True, case, args, cache, dropout, last_layer)
    result["plan"] += "; warm cache"
    return result


def summary(exact: dict, fast: dict) -> dict:
    """The figures of one case (pure): see the module docstring."""
    def warm(times):
        return statistics.median(times[1:]) if len(times) > 1 else times[0]

    f_timed = warm(fast["train"])  # the timed batches only: what the first epoch paid on top is compiling
    e_epoch, f_epoch = warm(exact["train"]) * exact["scale"], f_timed * fast["scale"]
    e_eval, f_eval = warm(exact["eval"]), warm(fast["eval"])
    compile_once = max(0.0, fast["train"][0] - f_timed) + max(0.0, fast["eval"][0] - f_eval)
    gain = e_epoch + e_eval - f_epoch - f_eval
    return {"exact_epoch": e_epoch, "fast_epoch": f_epoch, "epoch_speedup": e_epoch / f_epoch,
            "exact_eval": e_eval, "fast_eval": f_eval, "eval_speedup": e_eval / f_eval,
            "compile": compile_once, "repaid_after": compile_once / gain if gain > 0 else float("inf")}


def _epochs(value: float) -> str:
    return "never" if value == float("inf") else f"{value:.1f}"


def _once(figure: str, fast: dict) -> str:
    """A compile figure, or '-' for a plan that compiles nothing (its first epoch's excess is warm-up)."""
    return figure if "compiled" in fast["plan"].partition(" (")[0] else "-"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=CASES, metavar="MODEL:DATASET")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per process: 1 cold, the rest warm (default 3)")
    parser.add_argument("--max-batches", type=int, default=None, help="time only the first N batches of an epoch")
    parser.add_argument("--data-path", type=lambda path: Path(path).resolve(),  # each run works in its own folder
                        default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp16", "fp32"), default="auto", help="fast_precision")
    parser.add_argument("--no-limits", action="store_true", help="ignore fast mode's per-model tables for the measured models")
    parser.add_argument("--dropout", nargs="+", choices=("auto", "torch", "numpy"), default=["auto"], help="fast_dropout")
    parser.add_argument("--last-layer", nargs="+", choices=("auto", "true", "false"), default=["auto"],
                        help="fast_last_layer")
    parser.add_argument("--warm-cache", action="store_true", help="measure fast mode with the compiler's cache filled")
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--one", choices=["exact", "fast"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.one:
        model, dataset = args.cases[0].split(":")
        data_path = str(args.data_path) if dataset != "ml-100k" else None
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(one_run(args.one == "fast", model, dataset, args.epochs, args.max_batches, data_path,
                                     Path(tmp), args.precision, not args.no_limits, args.cache, args.dropout[0],
                                     _last_layer(args.last_layer[0]))))
        return 0
    print("| model | dataset | batches (timed) | exact epoch s | fast epoch s | speed-up | exact eval s | fast eval s "
          "| speed-up | compile s | repaid after epochs | fast plan |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        for exact, fast in _measured(case, args):
            s = summary(exact, fast)
            model, dataset = case.split(":")
            once = _once(format(s['compile'], '.1f'), fast), _once(_epochs(s['repaid_after']), fast)
            print(f"| {model} | {dataset} | {exact['batches']} ({exact['timed_batches']}) | {s['exact_epoch']:.2f} | "
                  f"{s['fast_epoch']:.2f} | {s['epoch_speedup']:.2f}x | {s['exact_eval']:.2f} | {s['fast_eval']:.2f} | "
                  f"{s['eval_speedup']:.2f}x | {once[0]} | {once[1]} | {fast['plan']} |", flush=True)
    return 0


def _measured(case: str, args):
    """(exact, fast) for each `--dropout` and `--last-layer`, against one exact measurement; a failure is a row, not
    the end of the table."""
    try:
        exact = measure(False, case, args)
        for dropout, last_layer in itertools.product(args.dropout, args.last_layer):
            yield exact, fast_measure(case, args, dropout, last_layer)
    except subprocess.CalledProcessError as error:
        last = (error.stderr or "").strip().splitlines()[-1:] or ["no message"]
        print(f"| {case.replace(':', ' | ')} | failed: {last[0][:200]} |", flush=True)


def _last_layer(value: str):
    """`--last-layer`'s value as a run's `--set` reads it (auto, True or False)."""
    from recrunner.config.params import parse_set_options

    return parse_set_options([f"fast_last_layer={value}"])["fast_last_layer"]


if __name__ == "__main__":
    raise SystemExit(main())
