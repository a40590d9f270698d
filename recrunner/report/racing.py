"""Racing the best configurations over seeds before choosing one (pure).

One seed's best validation score is partly luck: on ml-100k the single-seed winner of a 27-cell
grid ranked 16th of 27 on its 3-seed mean (BENCHMARKS.md). So, after the trials of a (model,
dataset), the `top` configurations by their first seed's validation score race:

    round r (r = 1 .. len(seeds) - 1): every contender still in runs seed r; then the leader is the
    contender with the best mean validation score over its seeds, and a contender is dropped when a
    paired test over validation users shows it worse than the leader: Wilcoxon signed-rank on each
    user's difference averaged over the seeds both ran (a user is one unit, however many seeds),
    Holm-corrected over the round's contenders.

The race ends after the last seed or when one contender is left; the pick is the best mean over
seeds of those still in (F-race, Birattari et al. 2002, with a paired test in place of Friedman's).
Only validation goes in: the test split is never read (sweep/selection.py reads valid_per_user.npz
and the runs' best validation scores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.files import atomic_file
from ..core.layout import SweepPaths
from .stats import holm, paired_users, user_test

ALPHA = 0.05


@dataclass(frozen=True)
class Run:
    """One finished run of a contender: its best validation score, and its per-user validation values
    ({metric: array, "users": ids}; empty when the run kept none)."""

    score: float | None                  # None: the run failed (the contender is dropped)
    users: dict = field(default_factory=dict)


@dataclass
class Standing:
    key: str                             # the configuration (a run id without the seed)
    first: float                         # its first seed's validation score
    scores: list = field(default_factory=list)  # its validation score per seed, in seed order
    state: str = "out"                   # out (not in the top) | racing | dropped | kept (to the end) | picked
    reason: str = ""

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores else self.first


@dataclass
class Race:
    standings: list                      # every configuration, the contenders first
    wanted: list                         # (key, seed) runs the race needs before its next decision
    pick: str | None = None              # set once the race is over

    @property
    def over(self) -> bool:
        return self.pick is not None or (not self.wanted and not any(s.state == "racing" for s in self.standings))


def race(first: dict, runs: dict, seeds: tuple, top: int, metric: str, bigger: bool = True,
         alpha: float = ALPHA, labels: dict | None = None) -> Race:
    """The race as far as `runs` take it.

    first: {key: first seed's validation score} of every configuration that finished (not pruned);
    runs: {(key, seed): Run} of every finished run, the first seed's included; seeds: the seeds in
    the order contenders run them (seeds[0] is the trials' seed); metric: the validation metric
    (`mrr@10`), the per-user values compared; labels: {key: words} for the reasons (default: the key).
    """
    ordered = sorted(first, key=lambda k: first[k], reverse=bigger)  # stable: ties keep the trials' order
    standings = {key: Standing(key, first[key]) for key in ordered}
    alive = ordered[:top]
    for key in alive:
        standings[key].state = "racing"
    for r, seed in enumerate(seeds):
        missing = [(key, seed) for key in alive if (key, seed) not in runs]
        if missing:
            return Race(list(standings.values()), missing)
        for key in list(alive):
            run = runs[(key, seed)]
            if run.score is None:
                _drop(standings[key], f"its seed {seed} run failed", alive)
            else:
                standings[key].scores.append(run.score)
        if not alive:
            return Race(list(standings.values()), [])
        if r > 0:
            _round(standings, alive, runs, seeds[:r + 1], metric, bigger, alpha, labels or {})
        if len(alive) == 1:
            break
    leader = _leader(standings, alive, bigger)
    standings[leader].state = "picked"
    standings[leader].reason = f"best mean over {len(standings[leader].scores)} seeds"
    for key in alive:
        if key != leader:
            standings[key].state = "kept"
            standings[key].reason = (f"lower mean over {len(standings[key].scores)} seeds; not significantly "
                                     "worse than the pick")
    return Race(list(standings.values()), [], leader)


def _round(standings, alive, runs, seeds, metric, bigger, alpha, labels) -> None:
    """One round's decisions: every contender tested against the leader, Holm-corrected; the
    significantly worse dropped."""
    leader = _leader(standings, alive, bigger)
    p_values, means = {}, {}
    for key in alive:
        if key == leader:
            continue
        pooled = [paired_users(runs[(key, s)].users, runs[(leader, s)].users, metric) for s in seeds
                  if metric in runs[(key, s)].users and metric in runs[(leader, s)].users]
        if len(pooled) == len(seeds):  # each user one pair: its mean difference over the seeds
            p_values[key] = user_test(*zip(*pooled))
        means[key] = standings[key].mean
    adjusted = holm(p_values)
    best = standings[leader].mean
    for key, p in adjusted.items():
        worse = means[key] < best if bigger else means[key] > best
        if worse and p < alpha:
            _drop(standings[key], f"worse than {labels.get(leader, leader)} after {len(seeds)} seeds: mean {means[key]:.4f} vs "
                                  f"{best:.4f}, paired p = {p:.3g} (Holm)", alive)


def _leader(standings, alive, bigger) -> str:
    pick = max if bigger else min
    return pick(alive, key=lambda k: standings[k].mean)


def _drop(standing: Standing, reason: str, alive: list) -> None:
    standing.state, standing.reason = "dropped", reason
    alive.remove(standing.key)


# ---------------------------------------------------------------- selection.json
def save_races(sweep_dir: Path, races: dict) -> None:
    """runs/<sweep>/selection.json: {"<dataset>/<model>": race} as sweep/selection.py keeps it (derived
    from the runs; any process may rewrite it)."""
    path = SweepPaths(Path(sweep_dir)).selection
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "w") as handle:
        json.dump(races, handle, indent=1)


def load_races(sweep_dir: Path) -> dict:
    """The races of a sweep folder ({} when none ran)."""
    path = SweepPaths(Path(sweep_dir)).selection
    return json.loads(path.read_text()) if path.is_file() else {}


def picked_runs(races: dict) -> dict:
    """{(model, dataset): cell ids (run folders under the sweep) of each decided race's pick, one per
    final seed}: the runs whose test numbers the tables show."""
    return {(race["model"], race["dataset"]): set(race["pick_runs"]) for race in races.values() if race.get("pick")}


def race_lines(races: dict) -> list[str]:
    """The races in Markdown: per model and dataset, each contender's seed scores, mean, and why it
    was dropped or picked (the report's "selection by racing" section)."""
    if not races:
        return []
    lines = ["## selection by racing", "",
             "The best configurations on their first seed's validation score re-ran with more seeds; a paired test "
             "over validation users (Wilcoxon, Holm-corrected) dropped those worse than the leader. Test was never read.",
             ""]
    for name, race in races.items():
        picked = next((s for s in race["standings"] if s["key"] == race.get("pick")), None)
        decided = (f"pick: {picked['label']}, its test numbers over seeds {race['final_seeds']}" if picked
                   else "still racing")
        lines += [f"**{race['model']} on {race['dataset']}** (top {race['top']}, seeds {race['seeds']}, {race['metric']}; "
                  f"{decided})", "", "| configuration | validation per seed | mean | state | why |", "|---|---|---|---|---|"]
        for s in race["standings"]:
            if s["state"] == "out":
                continue
            scores = ", ".join(f"{v:.4f}" for v in s["scores"])
            lines.append(f"| {s['label']} | {scores} | {s['mean']:.4f} | {s['state']} | {s['reason'] or '–'} |")
        lines.append("")
    return lines
