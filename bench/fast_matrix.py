"""Every RecBole model in fast mode: what runs compiled, what runs eagerly, what stays exact, and why.

    python bench/fast_matrix.py [--out docs/fast-matrix.md] [--threads N] [MODEL ...]

For each model: one epoch at the tiny settings of tests/tiny_models.py on ml-100k, through
`run_experiment`, once exact and once with `fast: true` and `fast_compile: true` (on a CPU, `auto`
compiles only the models measured faster on a CPU, recrunner/training/fast/facts.py; this matrix asks whether compiling works). A model is

    compiled  the fast run finished with every accelerated method compiled
    eager     it finished, but the compiler failed on a method, which ran eagerly (the reason is shown)
    exact     fast mode does nothing for it (fitted in one pass, or recrunner.training.fast.facts.FACTS)
    fails     the fast run failed where the exact run did not: a model for FACTS (kind cannot)
    both fail neither run finished (as in bench/model_matrix.py)

Also shown: the largest relative difference of a test metric between the two runs (at one
tiny epoch this shows that fast mode computes the same thing, not how good it is; bench/fast_seeds.py
compares quality) and both runs' seconds (the fast one pays the compile time: tiny models do not
show speed; bench/bench_fast.py does).
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VERDICTS = ("compiled", "eager", "exact", "fails", "both fail")


class _Caught(logging.Handler):
    """Keeps the fast-mode lines a run logs (its plan, a method that fell back to eager)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("fast mode"):
            self.lines.append(message)


def one(model: str, workspace, fast: bool):
    from recrunner import Experiment, run_experiment
    from recrunner.core.errors import RecrunnerError, one_line
    from tests.tiny_models import model_keys, tiny_params

    params = {**tiny_params(model, model_keys(model)), **({"fast": True, "fast_compile": True} if fast else {})}
    caught = _Caught()
    logging.getLogger().addHandler(caught)
    started = time.perf_counter()
    try:
        result = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)
        error = result.error if result.status != "ok" else None
    except RecrunnerError as exc:
        result, error = None, one_line(exc)
    finally:
        logging.getLogger().removeHandler(caught)
    return result, error, time.perf_counter() - started, caught.lines


def verdict(exact_error, fast_error, lines: list[str]) -> tuple[str, str, str]:
    """(verdict, plan, note) from the two runs' errors and the fast run's fast-mode log lines (pure)."""
    if exact_error and fast_error:
        return "both fail", "", exact_error
    if fast_error:
        return "fails", "", fast_error
    line = next((line for line in lines if re.match(r"fast mode: (exact|fp32|bf16|fp16)\b", line)), "")  # the plan's
    plan, _, reason = line.removeprefix("fast mode: ").partition(" (")
    reason = reason.removesuffix(")")
    fallbacks = [line for line in lines if "runs eagerly" in line]
    if fallbacks:
        return "eager", plan.replace("compiled", "eager"), "; ".join(fallbacks)
    if "compiled" in plan.split(", "):
        return "compiled", plan, reason if ";" in reason or reason.startswith("fp32") else ""
    if plan in ("exact", "fp32, eager") or not plan:
        return "exact", "exact", reason or "not trained by a torch loop"
    return "eager", plan, reason


def largest_difference(exact: dict, fast: dict) -> float | None:
    """The largest relative difference between two runs' test metrics (pure)."""
    diffs = [abs(fast[k] - v) / abs(v) for k, v in exact.items() if k in fast and v]
    return max(diffs) if diffs else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from recrunner import Workspace
    from recrunner.run.models import available_models
    from tests.tiny_models import write_ml100k_with_kg_embeddings

    root = Path(tempfile.mkdtemp(prefix="fast-matrix-"))
    write_ml100k_with_kg_embeddings(root / "datasets")
    workspace = Workspace(root / "runs", root / "datasets", REPO / "configs")
    os.chdir(root)
    rows, counts = [], collections.Counter()
    for model in args.models or available_models():
        exact, exact_error, exact_seconds, _ = one(model, workspace, fast=False)
        fast, fast_error, fast_seconds, lines = one(model, workspace, fast=True)
        kind, plan, note = verdict(exact_error, fast_error, lines)
        counts[kind] += 1
        diff = largest_difference(exact.test, fast.test) if exact and fast and not (exact_error or fast_error) else None
        shown = "" if diff is None else f"{diff:.3f}"
        rows.append(f"| {model} | {kind} | {plan} | {shown} | {exact_seconds:.1f} | {fast_seconds:.1f} | {note[:160]} |")
        print(rows[-1], flush=True)
    table = ["| model | fast mode | plan | largest test difference | exact s | fast s | note |",
             "|---|---|---|---|---|---|---|", *rows]
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
    text = "\n".join(table) + f"\n\n{sum(counts.values())} models: {summary}\n"
    print(summary)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
