"""The full grid against a TPE search with ASHA pruning, on the same space, in one run.

    python bench/bench_search.py [--workers 2] [--trials 12] [--prune asha] [--prune-after 3] [--epochs 20]
                                 [--batch-size 256] [--stopping-step 3] [--replays 200] [--replay-only]
                                 [--grid-seeds 1] [--reseed 3] [--select-top 3] [--select-seeds 3] [--frontier 8,16,27]
                                 [--output DIR]

SASRec and GRU4Rec on ml-100k (tiny: users with 10-60 interactions), learning rate x dropout x
hidden size, and BPR, learning rate x embedding size x weight decay, 3 values each: 27 cells per
model in the grid. Batch 256 and up to 20 epochs with
early stopping, so that runs converge (at batch 2048 and 10 epochs most were cut off while still
improving, and early scores then say little). The search asks `--trials` per model from the same
27 configurations (TPE over the three choices) and prunes with ASHA after `--prune-after` epochs.
Prints, per model and in all, the best validation score each reaches and the epochs each trained, and the
ratios the target is stated in (issue: within 2% of the grid's best validation score with at most
a third of its epochs). Every run is a real recrunner run (`recrunner` CLI in a subprocess).

One search is one draw: which cells TPE samples depends on its seed. So the grid's recorded
learning curves are then replayed through the same sampler and pruner (recrunner.search's
`make_sampler` and `make_pruner`) for `--replays` sampler seeds, one trial at a time: a trial's
curve is its cell's curve in the grid, cut where the pruner stops it. That is exact because a run
is deterministic (the same configuration and seed give the same scores, epoch by epoch); the script
checks it on every trial of the real search. It prints how often the target is met.

Every sweep runs with `--threads 1`, whatever `--workers`: CPU sums differ with torch's thread count,
and SASRec at learning rate 0.008 then drifts apart (best 0.0528 with 1 thread, 0.0464 with 2), so a
grid and a search run with different `--workers` would not be comparable epoch by epoch.

A single seed's best validation score is also a draw. `--grid-seeds K` runs every grid cell with K
seeds (the search and the replay still see seed 2020 only, as a single-seed grid would); the replay
then also compares the mean over the K seeds of the configuration each search picks with that of the
grid's pick ("seed means"), and with the best mean of any configuration ("vs best mean"). `--reseed K`
runs the configuration each side of the real search picked with K seeds. `--replay-only` skips the
real search: the grid (resumed from `--output`), then the replay.

Racing (with `--grid-seeds` >= `--select-seeds`): after each replayed search, its `--select-top`
best trials race over seeds through recrunner.report.racing.race, the runs taken from the grid
(bench/search_replay.py). It prints, per model, the single-seed pick, the same pick with final
seeds and the racing pick: how often each is within 2% of the best seed mean of any configuration,
and the epochs each used in all (the grid's single-seed epochs = 1). `--frontier 8,16,27` replays
searches of those trial counts too: how often any pick could be within 2% (a trial within 2% ended
unpruned), against the epochs it costs (bench/search_racing.py).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import statistics
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.search_racing import met as _met, report_frontier, report_racing  # noqa: E402
from bench.search_replay import (FIXED, SPACE, curves, final_score, pick, race_runs, replay, runs_of,  # noqa: E402
                                 seed_means)
from recrunner.run import per_user  # noqa: E402

def run(grid: dict, out: Path, workers: int, extra=()) -> float:
    path = out / f"{grid['name']}.yaml"
    path.write_text(yaml.safe_dump(grid))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "run_experiments.py"), "--grid", str(path), "--output", str(out),
                    "--data-path", str(out / "data"), "--config-dir", str(REPO / "configs"),
                    "--workers", str(workers), "--threads", "1", "--quiet", *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def collect(sweep: Path, seed: int = 2020) -> dict:
    """{model: (best validation score, epochs trained, runs, pruned)} over every run of the sweep with
    that seed; the best is over the runs that were not pruned."""
    found = {}
    for _, record in runs_of(sweep, seed):
        best, epochs, runs, pruned = found.get(record.model, (None, 0, 0, 0))
        score = final_score(record)
        if score is not None and (best is None or score > best):
            best = score
        found[record.model] = (best, epochs + (record.epochs_trained or 0), runs + 1,
                               pruned + (record.status == "pruned"))
    return found


def noise(sweep: Path, seed: int = 2020) -> dict:
    """{model: (users, standard error / mean)} of the test MRR@10 (the validation metric) of the best
    run: how finely one run's score can tell configurations apart (validation has the same users)."""
    import numpy as np

    best = {}
    for run_dir, record in runs_of(sweep, seed):
        score = record.best_valid_score
        if score is not None and score > best.get(record.model, (-1, None))[0]:
            best[record.model] = (score, run_dir / "test_per_user.npz")
    found = {}
    for model, (_, path) in best.items():
        values = per_user.load(path)["mrr@10"]
        found[model] = (len(values), values.std(ddof=1) / np.sqrt(len(values)) / values.mean())
    return found


def replayable(grid: dict, search: dict) -> tuple[int, int]:
    """(trials of the real search whose scores equal their cell's in the grid, epoch by epoch; trials)."""
    same = total = 0
    for model, cells in search.items():
        for key, (scores, _) in cells.items():
            total += 1
            same += grid[model][key][0][:len(scores)] == scores
    return same, total


def fixed(args) -> dict:
    return {**FIXED, "epochs": args.epochs, "train_batch_size": args.batch_size, "stopping_step": args.stopping_step}


def reseed(pick: dict, name: str, out: Path, args) -> dict:
    """{model: (mean, std, scores)} of the best validation score of each model's picked configuration
    over `--reseed` seeds."""
    seeds = [2020 + i for i in range(args.reseed)]
    params = {model: {n: [v] for n, v in key} for model, key in pick.items()}
    run({"name": name, "models": list(pick), "datasets": ["ml-100k"], "model_params": params,
         "fixed": fixed(args), "seeds": seeds}, out, args.workers)
    found = {}
    for model in pick:
        scores = [curves(out / name, seed)[model][pick[model]][1] for seed in seeds]
        found[model] = (statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0, scores)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--prune-after", type=int, default=3)
    parser.add_argument("--prune", default="asha", choices=("none", "median", "asha", "hyperband"))
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256, help="train_batch_size")
    parser.add_argument("--stopping-step", type=int, default=3, help="validations without a gain before a stop")
    parser.add_argument("--replays", type=int, default=200, help="sampler seeds replayed over the grid's curves")
    parser.add_argument("--replay-only", action="store_true", help="no real search, no re-seeding: the replay")
    parser.add_argument("--grid-seeds", type=int, default=1,
                        help="run the grid with K seeds; the replay then also compares seed means of the picks")
    parser.add_argument("--reseed", type=int, default=3, help="seeds for each side's pick (1: off)")
    parser.add_argument("--select-top", type=int, default=3, help="racing: contenders (0: no racing figures)")
    parser.add_argument("--select-seeds", type=int, default=3, help="racing: the most seeds a contender gets")
    parser.add_argument("--frontier", default=None, metavar="N,N,...",
                        help="with racing: replay searches of these trial counts too (trials against epochs)")
    parser.add_argument("--output", type=Path, default=None,
                        help="keep the runs here (default: a temporary folder); a second run reuses its grid")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = args.output or Path(folder)
        (out / "data").mkdir(parents=True, exist_ok=True)
        base = {"models": list(SPACE), "datasets": ["ml-100k"], "model_params": SPACE, "fixed": fixed(args)}
        grid_seconds = run({**base, "name": "grid", "seeds": [2020 + i for i in range(args.grid_seeds)]},
                           out, args.workers)
        cells = curves(out / "grid")
        searched = {}
        if not args.replay_only:
            name = f"search-tpe{args.trials}-{args.prune}{args.prune_after}"  # each setting its own sweep
            search_seconds = run({**base, "name": name, "search": "tpe", "trials": args.trials, "prune": args.prune,
                                  "prune_after": args.prune_after}, out, args.workers)
            report_search(collect(out / "grid"), collect(out / name), grid_seconds, search_seconds)
            searched = curves(out / name)
            same, total = replayable(cells, searched)
            print(f"\nreplay: {same} of {total} trials of the search above scored as their cell in the grid, "
                  f"epoch by epoch")
        means = seed_means(out / "grid", args.grid_seeds) if args.grid_seeds > 1 else None
        replays = {model: [replay(cells[model], model, seed, args) for seed in range(args.replays)] for model in SPACE}
        report_replay(cells, means, replays, out, args)
        if means and args.select_top and args.grid_seeds >= args.select_seeds:
            races = race_runs(out / "grid", args.grid_seeds)
            report_racing(cells, means, replays, races, args)
            if args.frontier:
                report_frontier(cells, means, races, args, [int(n) for n in args.frontier.split(",")])
        if not args.replay_only and args.reseed > 1:
            report_picks(cells, searched, out, args)


def report_search(grid: dict, search: dict, grid_seconds: float, search_seconds: float) -> None:
    print(f"{'model':<8} {'grid best':>10} {'search best':>12} {'ratio':>6} {'grid epochs':>12} "
          f"{'search epochs':>14} {'ratio':>6}   (runs: grid / search, pruned)")
    for model in SPACE:
        (gb, ge, gr, _), (sb, se, sr, sp) = grid[model], search[model]
        print(f"{model:<8} {gb:>10.4f} {sb:>12.4f} {sb / gb:>6.3f} {ge:>12} {se:>14} {se / ge:>6.3f}   "
              f"({gr} / {sr}, {sp} pruned)")
    ge, se = sum(v[1] for v in grid.values()), sum(v[1] for v in search.values())
    print(f"all epochs: grid {ge}, search {se}, ratio {se / ge:.3f}; wall time: grid {grid_seconds:.0f}s, "
          f"search {search_seconds:.0f}s, ratio {search_seconds / grid_seconds:.3f} "
          f"(a grid already in --output is not run again)")


def report_replay(cells: dict, means: dict | None, replays: dict, out: Path, args) -> None:
    """Per model, over `--replays` sampler seeds: the search's best against the grid's, its epochs against
    the grid's, how often both targets are met; with seed means, the same for the means of the picks."""
    print(f"\n{args.replays} searches replayed per model: tpe, {args.trials} trials, {args.prune} after "
          f"{args.prune_after}")
    print(f"{'model':<8} {'ratio: median':>14} {'10th pct':>9} {'within 2%':>10} {'epochs: median':>15} "
          f"{'max':>6} {'target met':>11}" + (f" {'seed means: median':>19} {'target met':>11}"
                                              f" {'vs best mean: median':>21} {'target met':>11}" if means else ""))
    ceilings = []
    for model in SPACE:
        best = max(final for _, final in cells[model].values() if final is not None)
        good = sum(final is not None and final >= 0.98 * best for _, final in cells[model].values())
        ceilings.append(f"{model} {good} of {len(cells[model])} "
                        f"({hit_chance(len(cells[model]), good, args.trials):.0%})")
        grid_pick = pick(cells[model])
        total_epochs = sum(len(scores) for scores, _ in cells[model].values())
        runs = replays[model]
        ratios = [(b or 0.0) / best for b, _, _, _ in runs]
        shares = [e / total_epochs for _, e, _, _ in runs]
        met = _met(ratios, shares)
        deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios
        line = (f"{model:<8} {statistics.median(ratios):>14.3f} {deciles[0]:>9.3f} "
                f"{sum(r >= 0.98 for r in ratios) / len(runs):>10.0%} {statistics.median(shares):>15.3f} "
                f"{max(shares):>6.3f} {met:>11.0%}")
        if means:
            mean = means[model]
            by_mean = [mean[chosen] / mean[grid_pick] if chosen else 0.0 for _, _, chosen, _ in runs]
            met_mean = _met(by_mean, shares)
            by_best = [mean[chosen] / max(mean.values()) if chosen else 0.0 for _, _, chosen, _ in runs]
            met_best = _met(by_best, shares)
            line += (f" {statistics.median(by_mean):>19.3f} {met_mean:>11.0%}"
                     f" {statistics.median(by_best):>21.3f} {met_best:>11.0%}")
        print(line)
    print(f"cells within 2% of the grid's best (in brackets, the chance that {args.trials} distinct cells drawn "
          f"at random include one): {', '.join(ceilings)}")
    errors = noise(out / "grid")
    print("standard error of the grid best's test mrr@10 over its users: " + ", ".join(
        f"{model} {error:.1%} of the mean ({users} users)" for model, (users, error) in errors.items()))


def hit_chance(cells: int, good: int, draws: int) -> float:
    """The chance that `draws` distinct cells drawn at random from `cells` include one of `good` (pure)."""
    draws = min(draws, cells)
    return 1 - math.comb(cells - good, draws) / math.comb(cells, draws)


def report_picks(cells: dict, searched: dict, out: Path, args) -> None:
    """The configuration each side picked on validation, run with `--reseed` seeds."""
    picks = {}
    for model in SPACE:
        picks[model] = (pick(cells[model]), pick(searched[model]))
    print(f"\neach side's pick, {args.reseed} seeds (mean +- std of the best validation score)")
    grid_side = reseed({m: g for m, (g, _) in picks.items()}, "grid-pick", out, args)
    search_side = reseed({m: s for m, (_, s) in picks.items() if s is not None}, "search-pick", out, args)
    for model, (grid_pick, search_pick) in picks.items():
        gm, gs, _ = grid_side[model]
        line = f"{model:<8} grid {_show(grid_pick)}: {gm:.4f} +- {gs:.4f}"
        if model in search_side:
            sm, ss, _ = search_side[model]
            line += f"; search {_show(search_pick)}: {sm:.4f} +- {ss:.4f}; ratio {sm / gm:.3f}"
        print(line)


def _show(key: tuple) -> str:
    return ",".join(f"{name}={value}" for name, value in key)


if __name__ == "__main__":
    main()
