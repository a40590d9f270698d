"""The grid's recorded runs replayed through recrunner's own sampler, pruner and race (bench_search.py).

A run is deterministic: the same configuration and seed give the same validation scores, epoch by
epoch (bench_search.py checks it on every trial of a real search). So a search over the grid's space
can be replayed without training: a trial's curve is its cell's curve in the grid, cut where the
pruner stops it; a race's seed run is the grid's run of that configuration with that seed, its
per-user validation scores (valid_per_user.npz) included.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from recrunner.run.record import RunRecord
from recrunner.training.callbacks.history import read_history

SPACE = {
    "SASRec": {"learning_rate": [0.0005, 0.002, 0.008], "hidden_dropout_prob": [0.1, 0.3, 0.5],
               "hidden_size": [16, 32, 64]},
    "GRU4Rec": {"learning_rate": [0.0005, 0.002, 0.008], "dropout_prob": [0.1, 0.3, 0.5],
                "hidden_size": [16, 32, 64]},
    "BPR": {"learning_rate": [0.0005, 0.002, 0.008], "embedding_size": [16, 32, 64],
            "weight_decay": [0.0, 0.0001, 0.001]},
}
FIXED = {"user_inter_num_interval": "[10,60]", "MAX_ITEM_LIST_LENGTH": 10}


def runs_of(sweep: Path, seed: int):
    """(run directory, RunRecord) of every run of the sweep with that seed."""
    for path in sweep.rglob("metrics.json"):
        record = RunRecord.read(path)
        if record is not None and record.seed == seed:
            yield path.parent, record


def final_score(record: RunRecord) -> float | None:
    """The run's best validation score, or None when it was pruned (its score is from before its end)."""
    return record.best_valid_score if record.status == "ok" else None


def curves(sweep: Path, seed: int = 2020) -> dict:
    """{model: {configuration: (validation scores epoch by epoch, best score or None)}} for one seed."""
    found = {}
    for run_dir, record in runs_of(sweep, seed):
        history = read_history(run_dir / "history.jsonl")
        scores = [row["score"] for row in history if row.get("epoch", -1) >= 0 and "score" in row]
        found.setdefault(record.model, {})[_key(record.params, record.model)] = (scores, final_score(record))
    return found


def _key(params: dict, model: str) -> tuple:
    return tuple((name, params[name]) for name in sorted(SPACE[model]))


def replay(cells: dict, model: str, seed: int, args) -> tuple[float | None, int, tuple | None, dict]:
    """One search over recorded curves: (best score of a trial not pruned, epochs trained, its cell,
    {cell: its best score, None when pruned} of every cell a trial ran)."""
    import optuna

    from recrunner.search.studies import make_sampler
    from recrunner.training.callbacks.pruning import make_pruner
    from recrunner.sweep.space import parse

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {name: parse(name, values).to_optuna() for name, values in sorted(SPACE[model].items())}
    study = optuna.create_study(study_name=f"ml-100k/{model}",  # as the search names it: Hyperband's brackets
                                direction="maximize", sampler=make_sampler("tpe", seed, args.trials),  # hash it
                                pruner=make_pruner(args.prune, max_epochs=args.epochs, trials=args.trials,
                                                   after=args.prune_after))
    ended, epochs, best, pick = {}, 0, None, None
    for _ in range(args.trials):
        trial = study.ask(space)
        key = _key(trial.params, model)
        if key not in ended:  # a cell sampled again is not trained again: its run directory exists
            scores, final = cells[key]
            for step, score in enumerate(scores, start=1):
                epochs += 1
                trial.report(score, step)
                if trial.should_prune():
                    final = None
                    break
            ended[key] = final
            if final is not None and (best is None or final > best):
                best, pick = final, key
        state = optuna.trial.TrialState.PRUNED if ended[key] is None else optuna.trial.TrialState.COMPLETE
        study.tell(trial, ended[key], state=state)
    return best, epochs, pick, ended


def pick(cells: dict):
    """The configuration with the best validation score of a run that was not pruned (None if none)."""
    return max((k for k, (_, best) in cells.items() if best is not None), key=lambda k: cells[k][1], default=None)


def seed_means(sweep: Path, seeds: int) -> dict:
    """{model: {configuration: mean over the seeds of its best validation score}}."""
    per_seed = [curves(sweep, 2020 + i) for i in range(seeds)]
    return {model: {key: statistics.mean(found[model][key][1] or 0.0 for found in per_seed) for key in cells}
            for model, cells in per_seed[0].items()}




def race_runs(sweep: Path, seeds: int, metric: str = "mrr@10") -> dict:
    """{model: {(configuration, seed): (racing.Run, epochs trained)}} of every run of the grid with
    a seed of 2020 .. 2020 + seeds - 1: what a race's runs would give (validation only)."""
    from recrunner.sweep.selection import validation_run

    found = {}
    for seed in range(2020, 2020 + seeds):
        for run_dir, record in runs_of(sweep, seed):  # as the sweep's race reads each run
            found.setdefault(record.model, {})[(_key(record.params, record.model), seed)] = (
                validation_run(run_dir, metric), record.epochs_trained or 0)
    return found


def race_replay(ended: dict, runs: dict, top: int, seeds: int, final_seeds: int | None = None,
                metric: str = "mrr@10") -> tuple:
    """The race recrunner runs after these trials ({configuration: first seed's score or None}), its
    runs taken from the grid: (pick, epochs of the race's runs, epochs of the pick's missing final
    seeds), with recrunner.report.racing.race deciding (the same function the sweep calls)."""
    from recrunner.report.racing import race

    first = {key: score for key, score in ended.items() if score is not None}
    order = tuple(range(2020, 2020 + seeds))
    known = {(key, 2020): runs[(key, 2020)][0] for key in first}
    epochs = 0
    while True:
        result = race(first, known, order, top, metric)
        if not result.wanted:
            break
        for key, seed in result.wanted:
            known[(key, seed)] = runs[(key, seed)][0]
            epochs += runs[(key, seed)][1]
    if result.pick is None:
        return None, epochs, 0
    ran = len(next(s for s in result.standings if s.key == result.pick).scores)
    final = sum(runs[(result.pick, seed)][1] for seed in range(2020 + ran, 2020 + (final_seeds or seeds)))
    return result.pick, epochs, final
