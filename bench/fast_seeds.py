"""Does fast mode reach the numbers exact mode reaches? Test metrics over seeds, exact against fast.

    python bench/fast_seeds.py [--seeds 2020 2021 2022] [--threads N] [--only exact|fast] [--precision bf16]
                               [--set fast_negatives=torch ...] [--params epochs=100 ...] [--dataset ml-100k] [MODEL ...]

For each model (default: SASRec, GRU4Rec, BERT4Rec, SASRecF, FDSA, GCSAN, BPR, LightGCN and the context-aware DeepFM)
at the moderate sizes below on ml-100k, one full run per seed (validation, early stopping, the
test with the best weights) through `run_experiment`, exact and with `fast: true`. Prints, per
model, the test value of its `valid_metric` (the metric runs are selected on) over the seeds:
exact mean, std and range; fast mean, std and range; whether the fast mean lies within the
exact seeds' range; and Welch's t-test p-value for the two means (scipy). A model whose fast mean lies outside it is a candidate for
recrunner.training.fast.facts.FACTS.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ = {"MAX_ITEM_LIST_LENGTH": 20, "train_neg_sample_args": None, "epochs": 10, "stopping_step": 3}
PARAMS = {
    "SASRec": {**SEQ, "hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1},
    "GRU4Rec": {**SEQ, "embedding_size": 32, "hidden_size": 32},
    "BERT4Rec": {**SEQ, "hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1, "train_neg_sample_args": None},
    "SASRecF": {**SEQ, "hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1},
    "FDSA": {**SEQ, "hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1},
    "GCSAN": {**SEQ, "hidden_size": 32, "inner_size": 64, "n_layers": 1, "n_heads": 1},
    "BPR": {"epochs": 20, "stopping_step": 3},
    "LightGCN": {"epochs": 10, "stopping_step": 3},
    "DeepFM": {"epochs": 5, "stopping_step": 2},
}


def run(model: str, seed: int, fast: bool, workspace, precision: str | None = None, settings: dict | None = None,
        dataset: str = "ml-100k", both: dict | None = None) -> tuple[str, float]:
    from recrunner import Experiment, run_experiment

    params = {**PARAMS[model], **(both or {}), "seed": seed, **({"fast": True, **(settings or {})} if fast else {})}
    if fast and precision:
        params["fast_precision"] = precision
    result = run_experiment(Experiment(model, dataset, params), workspace, console=False)
    if result.status != "ok":
        raise SystemExit(f"{model} seed {seed} fast={fast}: {result.error}")
    record = json.loads((result.run_dir / "metrics.json").read_text())
    metric = record["valid_metric"]
    return metric, record["test"][metric]


def spread(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {std:.4f} [{min(values):.4f}, {max(values):.4f}]"


def welch_p(a: list[float], b: list[float]) -> float:
    """Two-sided Welch t-test p-value: could the two modes' means be the same? (1.0 where both are constant)"""
    from scipy.stats import ttest_ind

    if statistics.pstdev(a) == statistics.pstdev(b) == 0:
        return 1.0 if statistics.mean(a) == statistics.mean(b) else 0.0
    return float(ttest_ind(a, b, equal_var=False).pvalue)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(PARAMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[2020, 2021, 2022])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--precision", default=None, help="fast_precision for the fast runs (default: auto)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="settings of the fast runs, e.g. fast_negatives=torch (values read as YAML)")
    parser.add_argument("--params", nargs="+", default=[], metavar="KEY=VALUE",
                        help="settings of every run, over the model's sizes below (values read as YAML)")
    parser.add_argument("--dataset", default="ml-100k", help="a dataset in --data-path (ml-100k ships with RecBole)")
    parser.add_argument("--data-path", default=None, help="where --dataset's folder is (default: none needed for ml-100k)")
    parser.add_argument("--only", choices=["exact", "fast"], default=None,
                        help="run one mode only and print its column (e.g. fast mode's again after a change to it)")
    args = parser.parse_args(argv)
    import torch
    import yaml

    settings, both = ({key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in items)}
                      for items in (args.set, args.params))

    if args.threads:
        torch.set_num_threads(args.threads)
    from recrunner import Workspace

    root = Path(tempfile.mkdtemp(prefix="fast-seeds-"))
    (root / "datasets").mkdir()
    workspace = Workspace(root / "runs", Path(args.data_path) if args.data_path else root / "datasets", REPO / "configs")
    if args.only:
        print(f"| model | test metric | {args.only}: mean ± std [min, max] | per seed |")
        print("|---|---|---|---|")
    else:
        print("| model | test metric | exact: mean ± std [min, max] | fast: mean ± std [min, max] | fast mean within exact range | Welch p |")
        print("|---|---|---|---|---|---|")
    for model in args.models:
        values = {mode: [] for mode in ("exact", "fast") if args.only in (None, mode)}
        for seed in args.seeds:
            for mode, found in values.items():
                metric, value = run(model, seed, mode == "fast", workspace, args.precision, settings, args.dataset, both)
                found.append(value)
        if args.only:
            found = values[args.only]
            print(f"| {model} | {metric} | {spread(found)} | {', '.join(f'{v:.4f}' for v in found)} |", flush=True)
            continue
        exact, fast = values["exact"], values["fast"]
        inside = min(exact) <= statistics.mean(fast) <= max(exact)
        print(f"| {model} | {metric} | {spread(exact)} | {spread(fast)} | {'yes' if inside else 'NO'} | "
              f"{welch_p(exact, fast):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
