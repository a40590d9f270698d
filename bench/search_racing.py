"""bench_search.py's racing figures: each replayed search's best trials raced over the grid's seed
runs (bench/search_replay.py), and the frontier of trials against epochs that bounds any pick.

A pick is judged on its seed-mean validation score against the best seed mean of any of the 27
configurations ("within 2%"), with every epoch its side trained, race runs and final seeds included,
as a share of the single-seed grid's epochs (the issue's target: within 2% in 90% of searches, at
most a third of the epochs).
"""

from __future__ import annotations

import argparse
import statistics

from bench.search_replay import SPACE, pick, race_replay, replay


def met(ratios: list[float], shares: list[float]) -> float:
    """The share of searches that meet the target: within 2% of the reference, at most a third of the epochs."""
    return sum(r >= 0.98 and s <= 1 / 3 for r, s in zip(ratios, shares)) / len(ratios)


def reachable(replays: list, mean: dict) -> float:
    """The share of searches with a trial within 2% of the best seed mean that ended unpruned: no pick
    made from the search's trials, by any rule, is within 2% more often."""
    best = max(mean.values())
    return sum(any(score is not None and mean[key] >= 0.98 * best for key, score in ended.items())
               for _, _, _, ended in replays) / len(replays)


def picks(cells: dict, replays: list, runs: dict, top: int, seeds: int) -> dict:
    """{side: [(configuration picked, epochs in all)]} over the replayed searches: the single-seed pick,
    that pick with `seeds` final seeds, and the racing pick with its missing final seeds."""
    extra = {key: sum(runs[(key, s)][1] for s in range(2021, 2020 + seeds)) for key in cells}
    sides = {"single seed": [], f"final seeds ({seeds})": [], f"racing (top {top})": []}
    for _, epochs, chosen, ended in replays:
        sides["single seed"].append((chosen, epochs))
        sides[f"final seeds ({seeds})"].append((chosen, epochs + (extra[chosen] if chosen else 0)))
        raced, selection, final = race_replay(ended, runs, top, seeds)
        sides[f"racing (top {top})"].append((raced, epochs + selection + final))
    return sides


def judged(chosen: list, mean: dict, total: int) -> tuple[list, list]:
    """(pick's seed mean / best seed mean, epochs / the grid's single-seed epochs) of each search."""
    best = max(mean.values())
    return [mean[key] / best if key else 0.0 for key, _ in chosen], [epochs / total for _, epochs in chosen]


def report_racing(cells: dict, means: dict, replays: dict, races: dict, args) -> None:
    """Per model, over the same replayed searches: the single-seed pick, the same pick with final seeds,
    and the racing pick, each judged on its seed-mean validation score against the best seed mean of
    any configuration, with every epoch each one trained (the grid's single-seed epochs = 1)."""
    seeds = args.select_seeds
    print(f"\nracing after the same {args.replays} searches: the {args.select_top} best trials on validation "
          f"re-run with up to {seeds} seeds (paired test over validation users, Holm), the pick's test numbers "
          f"over {seeds} seeds; 'within 2%': the pick's {args.grid_seeds}-seed mean validation score against the "
          f"best of any configuration; epochs: share of the grid's single-seed epochs, all runs counted")
    print(f"{'model':<8} {'pick':<24} {'within 2%':>10} {'seed mean: median':>18} {'10th pct':>9} "
          f"{'epochs: median':>15} {'max':>6} {'target met':>11}   (reachable: a trial within 2% ended unpruned)")
    for model in SPACE:
        mean = means[model]
        total = sum(len(scores) for scores, _ in cells[model].values())
        rows = picks(cells[model], replays[model], races[model], args.select_top, seeds)
        everything = {key: best for key, (_, best) in cells[model].items()}  # the grid: every cell a trial
        rows["grid, single seed"] = [(pick(cells[model]), total)]
        raced, selection, final = race_replay(everything, races[model], args.select_top, seeds)
        rows[f"grid + racing (top {args.select_top})"] = [(raced, total + selection + final)]
        for i, (name, chosen) in enumerate(rows.items()):
            ratios, shares = judged(chosen, mean, total)
            deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios
            print(f"{model if i == 0 else '':<8} {name:<24} {sum(r >= 0.98 for r in ratios) / len(ratios):>10.0%} "
                  f"{statistics.median(ratios):>18.3f} {deciles[0]:>9.3f} {statistics.median(shares):>15.3f} "
                  f"{max(shares):>6.3f} {met(ratios, shares):>11.0%}"
                  + (f"   (reachable {reachable(replays[model], mean):.0%})" if i == 0 else ""))


def report_frontier(cells: dict, means: dict, races: dict, args, counts: list[int]) -> None:
    """Per model and trial count, over `--replays` searches: how often a trial within 2% ended unpruned
    (the ceiling of every pick), how often the single-seed and racing picks are within 2%, the median
    epochs each used, and how often racing meets the whole target."""
    top, seeds = args.select_top, args.select_seeds
    print(f"\nthe frontier: {args.replays} searches per trial count, tpe, {args.prune} after {args.prune_after}, "
          f"racing top {top} over {seeds} seeds; epochs as a share of the grid's single-seed epochs (median)")
    print(f"{'model':<8} {'trials':>6} {'reachable':>10} {'single: within 2%':>18} {'epochs':>7} "
          f"{'racing: within 2%':>18} {'epochs':>7} {'target met':>11}")
    for model in SPACE:
        total = sum(len(scores) for scores, _ in cells[model].values())
        for count in counts:
            setting = argparse.Namespace(**{**vars(args), "trials": count})
            replays = [replay(cells[model], model, seed, setting) for seed in range(args.replays)]
            sides = picks(cells[model], replays, races[model], top, seeds)
            single = judged(sides["single seed"], means[model], total)
            raced = judged(sides[f"racing (top {top})"], means[model], total)
            print(f"{model:<8} {count:>6} {reachable(replays, means[model]):>10.0%} "
                  f"{sum(r >= 0.98 for r in single[0]) / len(replays):>18.0%} {statistics.median(single[1]):>7.3f} "
                  f"{sum(r >= 0.98 for r in raced[0]) / len(replays):>18.0%} {statistics.median(raced[1]):>7.3f} "
                  f"{met(*raced):>11.0%}")
