"""Every RecBole model, one tiny run under recrunner and one under plain RecBole: docs/models.md's table.

    python bench/model_matrix.py [--out docs/model-matrix.md] [MODEL ...]

For each model: one epoch at the tiny settings of tests/tiny_models.py on ml-100k (users with
10-60 interactions, with generated knowledge-graph embeddings for KSR and GRU4RecKG), through
`run_experiment`, then through RecBole's own trainer on the config recrunner resolved
(tests/plain_recbole.py). A model is

    equal     both ran and every best-validation and test metric is the same
    differs   both ran, some metric differs (none should)
    runs      recrunner runs it, plain RecBole fails (the reason is shown)
    both fail neither runs it (the reason recrunner gives is shown)

Plain RecBole runs on the config recrunner resolved and in this process, so it gets recrunner's
fixes too (the tree models' defaults, KSR's cast, the torch_scatter fallback once KGIN was
built): docs/models.md marks those models "equal*".

Prints a Markdown table (model, category, RecBole trainer, recrunner trainer, check, seconds)
and the counts per category. Each model runs in this process; plain RecBole writes into a
temporary working directory.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CATEGORIES = {"GENERAL": "general", "SEQUENTIAL": "sequential", "CONTEXT": "context-aware",
              "KNOWLEDGE": "knowledge-aware", "TRADITIONAL": "general", "DECISIONTREE": "exlib (trees)"}


def describe(model: str) -> tuple[str, str, str]:
    """(category, RecBole's trainer, recrunner's trainer) for `model`."""
    from recbole.utils import get_trainer

    from recrunner.run.models import exlib_models, trainer_class_for
    from recrunner.training.loop.trainer import CustomTrainer

    if model in exlib_models():
        return "exlib (trees)", f"{model}Trainer", f"TreeTrainer + {model}Trainer"
    from recbole.utils import get_model

    model_type = get_model(model).type
    base = get_trainer(model_type, model).__name__
    ours = trainer_class_for(model, model_type, CustomTrainer)
    return CATEGORIES[model_type.name], base, " + ".join(cls.__name__ for cls in ours.__bases__ or (ours,)) \
        if ours is not CustomTrainer else "CustomTrainer"


def check(model: str, workspace, scratch: Path) -> tuple[str, str, float]:
    from recrunner import Experiment, prepare, run_experiment
    from recrunner.core.errors import RecrunnerError, one_line
    from tests.plain_recbole import run_plain_recbole
    from tests.tiny_models import model_keys, tiny_params

    params = tiny_params(model, model_keys(model))
    started = time.perf_counter()
    try:
        ours = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)
        ours_error = ours.error if ours.status != "ok" else None
    except RecrunnerError as exc:
        ours, ours_error = None, one_line(exc)
    seconds = time.perf_counter() - started
    try:
        prepared = prepare(Experiment(model, "ml-100k", params), workspace)
        prepared.config["checkpoint_dir"] = str(scratch / model)
        plain, plain_error = run_plain_recbole(prepared.config), None
    except Exception as exc:  # plain RecBole's own failure, whatever it is
        plain, plain_error = None, one_line(exc)
    if ours_error and plain_error:
        return "both fail", ours_error, seconds
    if ours_error:
        return "recrunner fails", ours_error, seconds
    if plain_error:
        return "runs", f"plain RecBole: {plain_error}", seconds
    same = ours.best_valid == plain["best_valid"] and ours.test == plain["test"]
    return ("equal" if same else "differs"), "", seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)

    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # plain RecBole's own torch.load calls
    from recrunner import Workspace
    from recrunner.run.models import available_models
    from tests.tiny_models import write_ml100k_with_kg_embeddings

    root = Path(tempfile.mkdtemp(prefix="model-matrix-"))
    write_ml100k_with_kg_embeddings(root / "datasets")
    workspace = Workspace(root / "runs", root / "datasets", REPO / "configs")
    os.chdir(root)  # RecBole's trainers write log_tensorboard/ into the working directory
    rows, counts = [], collections.defaultdict(collections.Counter)
    for model in args.models or available_models():
        category, base, ours = describe(model)
        verdict, note, seconds = check(model, workspace, root / "plain")
        counts[category][verdict] += 1
        rows.append(f"| {model} | {category} | {base} | {ours} | {verdict} | {seconds:.1f} | {note[:160]} |")
        print(rows[-1], flush=True)
    table = ["| model | category | RecBole trainer | recrunner trainer | check | s | note |",
             "|---|---|---|---|---|---|---|", *rows]
    summary = ["", "| category | " + " | ".join(VERDICTS) + " | total |", "|---" * (len(VERDICTS) + 2) + "|"]
    for category, counter in sorted(counts.items()):
        summary.append(f"| {category} | " + " | ".join(str(counter[v]) for v in VERDICTS)
                       + f" | {sum(counter.values())} |")
    text = "\n".join(table + summary) + "\n"
    print("\n".join(summary))
    if args.out:
        args.out.write_text(text)
    return 0


VERDICTS = ("equal", "runs", "both fail", "recrunner fails", "differs")

if __name__ == "__main__":
    raise SystemExit(main())
