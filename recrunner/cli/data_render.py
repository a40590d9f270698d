"""The text `recrunner data import|describe|check` prints."""

from __future__ import annotations

from pathlib import Path

from ..data.describe import span_dates
from ..data.files import CONTEXT_SECTION, SETTINGS_FILE


def render_import(imported, name: str, source: Path, seconds: float, separators=()) -> str:
    """What an import wrote; `separators`: (file name, separator) of each .csv whose header line said it
    is not a comma."""
    lines = [f"imported {Path(source).name} as {name} into {imported.folder} in {seconds:.1f} s"]
    for suffix, (rows, types) in imported.files.items():
        columns = " ".join(f"{column}:{kind}" for column, kind in types.items())
        lines.append(f"  {name}.{suffix:<6} {rows:>12,} rows   {columns}")
    lines.append(f"  {SETTINGS_FILE:<{len(name) + 7}} {'':>12}        " + _settings(imported.settings))
    for file, separator in separators:
        lines.append(f"  {file} read as {separator!r}-separated: its header line has more of them than commas")
    policy = imported.settings.get("rm_dup_inter")
    kept = (f"runs keep the {policy} of each (rm_dup_inter: {policy})" if policy
            else "all kept, as RecBole keeps them (--duplicates first|last keeps one)")
    lines.append(f"  left out {imported.left_out:,} rows without a user or an item; "
                 f"{imported.duplicates:,} repeated (user, item) pairs: {kept}")
    if imported.time_span:
        low, high = imported.time_span
        lines.append(f"  timestamp {_number(low)} .. {_number(high)}{_dates(low, high)}")
    lines.append(f"next: recrunner data describe {name}   then   recrunner --dataset {name} --model BPR")
    return "\n".join(lines)


def render_description(description, config) -> str:
    loaded = description.loaded
    lines = [f"{description.dataset} ({config['data_path']})",
             f"  as loaded: {loaded['interactions']:,} interactions, {loaded['users']:,} users, "
             f"{loaded['items']:,} items, density {loaded['density']:.4%}"]
    for who in ("user", "item"):
        q = loaded[f"per_{who}"]
        if q:
            lines.append(f"  interactions per {who}: min {q['min']}, 25% {q['25%']:g}, median {q['median']:g}, "
                         f"75% {q['75%']:g}, 90% {q['90%']:g}, max {q['max']}, mean {q['mean']:.1f}")
    if loaded["time"]:
        t = loaded["time"]
        lines.append(f"  {t['field']}: {_number(t['min'])} .. {_number(t['max'])}{_dates(t['min'], t['max'])}")
    lines.append(f"  repeated (user, item) pairs: {loaded['repeated_pairs']:,}")
    lines.append(f"filters, in RecBole's order ({description.model}):")
    lines.append(f"  {'removed':>10} {'interactions':>13} {'users':>9} {'items':>9}   step (settings)")
    previous = loaded
    for step in description.steps:
        settings = ", ".join(f"{k}: {v}" for k, v in step["settings"].items())
        removed = previous["interactions"] - step["interactions"]
        lines.append(f"  {removed:>10,} {step['interactions']:>13,} {step['users']:>9,} {step['items']:>9,}   "
                     f"{step['what']}{f' ({settings})' if settings else ''}")
        previous = step
    f = description.filtered
    lines.append(f"  left for training: {f['interactions']:,} interactions, {f['users']:,} users, {f['items']:,} items")
    settings = description.split["settings"]
    lines.append(f"split ({', '.join(f'{k}: {v}' for k, v in settings.items())}):")
    for part in ("train", "valid", "test"):
        counts = description.split[part]
        lines.append(f"  {part:<6} {counts['interactions']:>12,} rows, {counts['users']:,} users")
    return "\n".join(lines)


def render_check(checked, description, config) -> str:
    lines = [f"{path}: {rows:,} rows, ok" for path, rows, _ in checked]
    f = description.filtered
    lines.append(f"{description.dataset}: RecBole builds it for {description.model}: {f['interactions']:,} "
                 f"interactions, {f['users']:,} users, {f['items']:,} items after its filters; the split leaves "
                 + ", ".join(f"{part} {description.split[part]['interactions']:,}" for part in ("train", "valid", "test")))
    return "\n".join(lines)


def _settings(settings: dict) -> str:
    """The settings file's content in a line: what each kind of model loads."""
    loads = [f"every model loads {', '.join(settings['load_col'])}"]
    if CONTEXT_SECTION in settings:
        loads.append(f"context-aware models {', '.join(settings[CONTEXT_SECTION]['load_col'])}")
    policy = f"; rm_dup_inter: {settings['rm_dup_inter']}" if "rm_dup_inter" in settings else ""
    return "; ".join(loads) + policy


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


def _dates(low: float, high: float) -> str:
    span = span_dates(low, high)
    return f" ({span[0]} .. {span[1]}, UTC)" if span else ""
