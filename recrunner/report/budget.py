"""Equal budgets: what each model's tuning cost, and a warning where the comparison is unfair.

New models "win" against baselines nobody tuned (Dacrema et al. 2019; Rendle et al. 2019). For
each (model, dataset) of a sweep folder: the trials it got (0 for runs outside a search: its
defaults or a hand-made grid), pruned trials, racing's selection runs (sweep/selection.py), the
epoch cap, epochs trained and wall time in all (selection runs included). A model compared with
one that got fewer trials, a smaller epoch cap, or no race where the other raced is named.

A trial whose sampler drew a configuration already run is told that run's score and adds no run, so
the trials are counted from the search's own file, search/trials.json (`save_asked`, written by
search/driver.py), where one exists. All but that file's two functions are pure.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ..config.one_pass import nothing_to_tune, one_pass_models
from ..core.files import write_text_atomic
from ..core.layout import SweepPaths


def budgets(rows: list[dict], asked: dict | None = None) -> dict:
    """{(model, dataset): {"trials", "pruned", "selection", "runs", "first", "max_epochs", "epochs", "seconds",
    "one_pass", "untunable"}} over every run; `first`: the runs of a grid's own cells (not a search's, nor
    racing's or final seeds'); `one_pass`: fitted in one pass, whatever the epoch cap; `untunable`: nothing
    to tune either (config/one_pass.py). `asked` (load_asked): a search's trials, which then count as
    asked, with "configurations", the distinct ones they drew."""
    found: dict = defaultdict(lambda: {"trials": 0, "pruned": 0, "selection": 0, "runs": 0, "first": 0,
                                       "max_epochs": None, "epochs": 0, "seconds": 0.0})
    for row in rows:
        if row.get("status") not in ("ok", "pruned", "failed"):
            continue
        entry = found[(row["model"], row["dataset"])]
        entry["one_pass"], entry["untunable"] = row["model"] in one_pass_models(), nothing_to_tune(row["model"])
        entry["runs"] += 1
        entry["first"] += row.get("role") is None
        entry["trials"] += row.get("role") == "trial"
        entry["selection"] += row.get("role") == "select"
        entry["pruned"] += row.get("status") == "pruned"
        entry["epochs"] += row.get("epochs_trained") or 0
        entry["seconds"] += row.get("seconds") or 0.0
        cap = row.get("max_epochs")
        if cap is not None:
            entry["max_epochs"] = max(entry["max_epochs"] or 0, cap)
    for key, study in (asked or {}).items():
        if key in found:  # a study with a run so far
            found[key]["trials"] = max(found[key]["trials"], study["asked"])
            found[key]["configurations"] = study["configurations"]
    return dict(found)


def unequal(found: dict) -> list[str]:
    """One warning per model that got less tuning than another on the same dataset."""
    warnings = []
    for dataset in dict.fromkeys(d for _, d in found):
        models = {m: b for (m, d), b in found.items() if d == dataset}
        most = max(b["trials"] for b in models.values())
        cap = max((b["max_epochs"] or 0) for b in models.values())
        raced = next((m for m, b in models.items() if b["selection"]), None)
        for model, b in models.items():
            if raced and not b["selection"] and b.get("first", 2) > 1:  # one configuration: nothing to pick
                warnings.append(f"{model} on {dataset} was picked on one seed while {raced}'s pick raced over seeds "
                                f"({models[raced]['selection']} selection runs): give every model the same "
                                "--select-top and --select-seeds")
        if most == 0:
            continue  # no search on this dataset: nothing was tuned, equally
        leader = next(m for m, b in models.items() if b["trials"] == most)
        for model, b in models.items():
            if b["trials"] < most and not b.get("untunable"):
                what = "its defaults or a hand-made grid (no search)" if b["trials"] == 0 else f"{b['trials']} trials"
                warnings.append(f"{model} on {dataset} got {what} while {leader} got {most} trials: the comparison "
                                f"favours the better-tuned model; give every model the same --trials")
            elif b["max_epochs"] is not None and b["max_epochs"] < cap and not b.get("one_pass"):
                warnings.append(f"{model} on {dataset} trained at most {b['max_epochs']} epochs, others up to {cap}: "
                                "give every model the same epochs")
    return warnings


def budget_lines(found: dict, chosen: dict | None = None) -> list[str]:
    """The budget table (Markdown) with each chosen configuration's mean validation score, then the warnings."""
    if not any(b["trials"] or b["selection"] for b in found.values()):
        return []
    lines = ["## tuning budget", "",
             "| model | dataset | trials | pruned | selection runs | epoch cap | epochs trained | wall time | "
             "best validation |", "|---|---|---|---|---|---|---|---|---|"]
    for (model, dataset), b in found.items():
        runs = (chosen or {}).get((model, dataset), [])
        scores = [r["best_valid_score"] for r in runs if r.get("best_valid_score") is not None]
        score = f"{sum(scores) / len(scores):.4f} ({runs[0].get('valid_metric')})" if scores else "–"
        trials = f"{b['trials']}" + (f" ({b['configurations']} distinct)" if b.get("configurations", b["trials"]) < b["trials"]
                                     else "")
        lines.append(f"| {model} | {dataset} | {trials} | {b['pruned']} | {b['selection']} | {b['max_epochs'] or '–'} | "
                     f"{b['epochs']} | {b['seconds']:.0f}s | {score} |")
    warnings = [f"- **warning:** {warning}" for warning in unequal(found)]
    return lines + [""] + (warnings + [""] if warnings else [])


# ---------------------------------------------------------------- search/trials.json
def save_asked(sweep_dir: Path, studies: dict) -> None:
    """runs/<sweep>/search/trials.json: {"<dataset>/<model>": {"model", "dataset", "asked", "configurations"}},
    each study's trials asked so far and the distinct configurations they drew (derived from the study;
    any sweep process on it may rewrite it)."""
    path = SweepPaths(Path(sweep_dir)).asked
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(studies, indent=1) + "\n")


def load_asked(sweep_dir: Path) -> dict:
    """{(model, dataset): {"asked", "configurations"}} of a sweep folder's search ({} where none ran)."""
    try:
        studies = json.loads(SweepPaths(Path(sweep_dir)).asked.read_text())
        return {(s["model"], s["dataset"]): s for s in studies.values()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # none, or not this format: runs count
        return {}
