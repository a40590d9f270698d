"""`recrunner reproduce RUN_DIR`: run a finished run's recorded configuration again, and compare.

    recrunner reproduce runs/default/ml-100k/BPR/seed=2020
        -> runs/reproduce-20261123T080102/ml-100k/BPR/seed=2020/ (a new run; the original is untouched)

The new run has the original's model, dataset, parameters and seed, the same dataset folder and
the same config folder (its provenance names both). Then every recorded number is printed side by
side (best epoch, epochs trained, validation metrics at the best epoch, test metrics), and every
recorded difference of provenance and configuration is explained in one line each: a package
version, a data file (size and SHA-256), the machine (CPU or GPU model), recrunner's git commit,
a configuration value. The new run uses the original's CPU thread count where it was recorded
(CPU sums depend on it: SASRec at learning rate 0.008 ends at validation MRR@10 0.0565 with 1
thread and 0.0418 with 2). On the same machine type with the same versions, data and threads the
numbers are identical: recrunner runs RecBole with `reproducibility: True` and seeds every RNG. On
a GPU that holds with `deterministic: true`; without it GPU kernels sum in varying order, and
metrics are compared within one unit of their last recorded decimal (`tolerance_for`), said so.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from ..core.errors import ConfigError
from .preparation import Experiment, Workspace
from .record import RunRecord, Status
from ..core.layout import OutputPaths, RunPaths
from ..core.docs import page
from ..training.fast.plan import FastPlan

# A GPU run without `deterministic: true` repeats to within its kernels' summation order: two runs of
# configs/quick.yaml on an H200 differed in the 9th significant digit of a loss and not in any
# recorded metric (metrics are rounded to metric_decimal_place; docs/runs.md: Exactness on each device).
# Such runs are compared within one unit of that last recorded place.
def tolerance_for(record: RunRecord, config: dict) -> float | None:
    """The tolerance `compare` allows between a run and its reproduction, None: exact (pure)."""
    device = str((record.device or {}).get("device") or "")
    if not device.startswith("cuda") or (record.provenance or {}).get("deterministic"):
        return None
    return 10.0 ** -int(config.get("metric_decimal_place") or 4)


# configuration keys that name where a run lives, not what it computes
PLACE_KEYS = {"checkpoint_dir", "data_path", "config_files", "gpu_id", "device"}


@dataclass(frozen=True)
class Comparison:
    rows: list          # (name, original, reproduced, same)
    explanations: list  # one line per recorded difference
    tolerance: float | None = None  # metrics compared within it (a GPU run without deterministic); None: exactly

    @property
    def identical(self) -> bool:
        return all(same for *_, same in self.rows)


def plan(run_dir: Path, output: Path | None = None, data_path: Path | None = None,
         config_dir: Path | None = None, command: str | None = None) -> tuple[Experiment, Workspace, RunRecord]:
    """The experiment and workspace that run `run_dir` again; ConfigError when it cannot be."""
    run_dir = Path(run_dir)
    record = RunRecord.read(run_dir)
    if record is None or not RunPaths(run_dir).config.is_file():
        raise ConfigError(f"{run_dir} holds no run (no readable metrics.json and config.yaml); give a run folder "
                          "like runs/<sweep>/<dataset>/<model>/<run id>")
    if record.status is not Status.OK:
        raise ConfigError(f"{run_dir} is {record.status.value}: only a run that finished and was tested (ok) has "
                          "numbers to reproduce" + ("" if record.status.finished else "; run its command again to finish it"))
    config = _config(run_dir)
    recorded_dir = (record.provenance or {}).get("config_dir")
    workspace = Workspace(
        output_dir=Path(output or OutputPaths.of_run(run_dir).root).resolve(),
        data_path=Path(data_path or Path(config["data_path"]).parent).resolve(),
        config_dir=config_dir or (Path(recorded_dir) if recorded_dir and Path(recorded_dir).is_dir() else None))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    sweep = next(name for n in range(1, 1000) if not (workspace.output_dir / (
        name := f"reproduce-{stamp}" + (f"-{n}" if n > 1 else ""))).exists())
    experiment = Experiment(record.model, record.dataset, {**record.params, "seed": record.seed},
                            sweep=sweep, command=command)
    return experiment, workspace, record


def compare(original: RunRecord, reproduced: RunRecord, original_config: dict, reproduced_config: dict,
            per_user: tuple[dict, dict] | None = None) -> Comparison:
    """Every recorded number side by side, and a line per recorded difference (pure).

    RecBole rounds metrics to `metric_decimal_place`; `per_user` (both runs' test_per_user.npz)
    adds a row that compares every user's unrounded test values exactly, or, within `tolerance_for`
    the original, their means.
    """
    tolerance = tolerance_for(original, original_config)
    rows = [(name, getattr(original, name), getattr(reproduced, name)) for name in ("best_epoch", "epochs_trained")]
    for part in ("best_valid", "test"):
        theirs, ours = getattr(original, part) or {}, getattr(reproduced, part) or {}
        rows += [(f"{'valid' if part == 'best_valid' else 'test'}/{k}", theirs.get(k), ours.get(k))
                 for k in dict.fromkeys([*theirs, *ours])]
    rows = [(name, a, b, _same(a, b, tolerance if "/" in name else None)) for name, a, b in rows]
    if per_user is not None:
        then, now = per_user
        same = set(then) == set(now) and all(
            np.array_equal(then[k], now[k]) if tolerance is None or k == "users"
            else abs(float(np.mean(then[k])) - float(np.mean(now[k]))) <= tolerance for k in then)
        rows.append(("test per user, unrounded" + (", means" if tolerance else ""), f"{_users(then)} users",
                     f"{_users(now)} users", same))
    return Comparison(rows, explain(original.provenance or {}, reproduced.provenance or {},
                                    original_config, reproduced_config), tolerance)


def explain(original: dict, reproduced: dict, original_config: dict, reproduced_config: dict) -> list[str]:
    """One line per difference between two runs' provenance and configuration (pure)."""
    lines = []
    old_versions, new_versions = original.get("versions") or {}, reproduced.get("versions") or {}
    for package in dict.fromkeys([*old_versions, *new_versions]):
        if old_versions.get(package) != new_versions.get(package):
            lines.append(f"{package} differs: {old_versions.get(package)} then, {new_versions.get(package)} now")
    old_files = {f["file"]: f for f in original.get("data") or []}
    new_files = {f["file"]: f for f in reproduced.get("data") or []}
    for name in dict.fromkeys([*old_files, *new_files]):
        then, now = old_files.get(name), new_files.get(name)
        if then is None or now is None:
            lines.append(f"data file {name} {'was added' if then is None else 'is gone'} since the original run")
        elif then["sha256"] != now["sha256"]:
            lines.append(f"data file {name} changed: {then['bytes']} bytes (sha256 {then['sha256'][:12]}) then, "
                         f"{now['bytes']} bytes (sha256 {now['sha256'][:12]}) now")
    old_machine, new_machine = original.get("machine") or {}, reproduced.get("machine") or {}
    for key, what in (("cpu", "CPU"), ("gpus", "GPUs"), ("cpus", "CPU count")):
        if old_machine.get(key) != new_machine.get(key):
            lines.append(f"the machine differs: {what} {old_machine.get(key)} then, {new_machine.get(key)} now")
    if original.get("threads") != reproduced.get("threads"):
        then = original.get("threads") or "not recorded (recrunner before 2026-11-25)"
        lines.append(f"CPU threads differ: {then} then, {reproduced.get('threads')} now (CPU sums depend on them)")
    then_fast, now_fast = _fast_text(original.get("fast")), _fast_text(reproduced.get("fast"))
    if then_fast != now_fast:
        lines.append(f"fast mode differs: {then_fast} then, {now_fast} now ({page('fast')})")
    elif now_fast != "exact":
        lines.append(f"both ran in fast mode ({now_fast}): its numbers repeat on one machine and torch version, not across them")
    for side in ("recrunner", "configs"):
        then = ((original.get("git") or {}).get(side) or {})
        now = ((reproduced.get("git") or {}).get(side) or {})
        if then and now and (then.get("commit"), then.get("dirty")) != (now.get("commit"), now.get("dirty")):
            lines.append(f"{side} code differs: git {_commit(then)} then, {_commit(now)} now")
    for key in sorted(set(original_config) | set(reproduced_config)):
        if key in PLACE_KEYS:
            continue
        then, now = original_config.get(key), reproduced_config.get(key)
        if then != now:
            lines.append(f"configuration differs: {key} was {then!r}, is {now!r} (a layer in the config folder "
                         "or RecBole's defaults changed)")
    return lines


def render(run_dir: Path, new_dir: Path, comparison: Comparison) -> str:
    """The side-by-side table and the verdict, as `recrunner reproduce` prints them."""
    width = max([len(name) for name, *_ in comparison.rows] + [6])
    lines = [f"original:   {run_dir}", f"reproduced: {new_dir}", "",
             f"{'':{width}}  {'original':>12}  {'reproduced':>12}"]
    for name, then, now, same in comparison.rows:
        lines.append(f"{name:{width}}  {_text(then):>12}  {_text(now):>12}  {'same' if same else 'DIFFERS'}")
    differing = sum(not same for *_, same in comparison.rows)
    lines.append("")
    if not differing and comparison.tolerance:
        unequal = sum(then != now for _, then, now, _ in comparison.rows)
        lines.append(f"equal within the GPU's run-to-run tolerance: every metric within {comparison.tolerance:g} "
                     f"({unequal} of {len(comparison.rows)} values not identical); the original ran on a GPU without "
                     f"deterministic: true ({page('runs', 'Exactness on each device')})")
    elif not differing:
        lines.append(f"identical: all {len(comparison.rows)} values are equal")
    else:
        lines.append(f"{differing} of {len(comparison.rows)} values differ")
    if comparison.explanations:
        lines += ["recorded differences:"] + [f"  - {line}" for line in comparison.explanations]
    elif differing:
        lines.append("no recorded difference explains it: same versions, data files, machine type, code and "
                     "configuration (is `reproducibility` off, or a GPU kernel non-deterministic?)")
    return "\n".join(lines)


def reproduce(run_dir: Path, *, output: Path | None = None, data_path: Path | None = None,
              config_dir: Path | None = None, command: str | None = None, console: bool = True) -> tuple[Path, Comparison]:
    """Run `run_dir` again into a new folder; (the new run's folder, the comparison)."""
    from .experiment import run_experiment

    experiment, workspace, original = plan(run_dir, output, data_path, config_dir, command)
    with _threads((original.provenance or {}).get("threads")):
        result = run_experiment(experiment, workspace, console=console)
    if RunRecord.read(result.run_dir) is None:
        raise ConfigError(f"the new run at {result.run_dir} wrote no metrics.json")
    return result.run_dir, compare_runs(Path(run_dir), result.run_dir)


def compare_runs(original_dir: Path, reproduced_dir: Path) -> Comparison:
    """`compare` on two finished run folders: their records, configurations and per-user test values."""
    from .per_user import load as load_per_user

    original, reproduced = RunRecord.read(original_dir), RunRecord.read(reproduced_dir)
    per_user = [RunPaths(Path(folder)).test_per_user for folder in (original_dir, reproduced_dir)]
    pairs = tuple(load_per_user(path) for path in per_user) if all(p.is_file() for p in per_user) else None
    return compare(original, reproduced, _config(original_dir), _config(reproduced_dir), pairs)


@contextlib.contextmanager
def _threads(count: int | None):
    """torch's CPU threads set to the original run's `count` for the new run (unchanged when None)."""
    import torch

    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(int(count))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _config(run_dir: Path) -> dict:
    path = RunPaths(Path(run_dir)).config
    try:
        return yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def _fast_text(plan: dict | None) -> str:
    return FastPlan.stored(plan).settings() if plan else "exact"


def _same(a, b, tolerance: float | None = None) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if tolerance is not None and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= tolerance * (1 + 1e-9)
    return a == b


def _text(value) -> str:
    return "–" if value is None else f"{value:.8g}" if isinstance(value, float) else str(value)


def _users(per_user: dict) -> int:
    return len(next(iter(per_user.values()), ()))


def _commit(state: dict) -> str:
    return f"{str(state.get('commit'))[:10]}" + (" (uncommitted changes)" if state.get("dirty") else "")
