"""`recrunner data import`: a table researchers have, as a RecBole dataset runs pick up by name.

    import_dataset(spec, name, data_path) -> Imported

writes `<data_path>/<name>/<name>.inter` (and `.user`, `.item` from their own tables) under
RecBole's standard field names (user_id, item_id, rating, timestamp), so its defaults apply, and
the dataset's settings in `<name>/dataset.yaml` (data.files.SETTINGS_FILE), the layer every run
on it reads (run.preparation). The source is read in chunks (data.tables) and written as it is
read (data.atomic), so a file larger than memory imports; everything is written into a temporary
folder beside the target and moved into place at the end, so a failure leaves nothing half written.

Rows keep their order. Timestamps that are numbers stay as written; dates become seconds since
1970 (UTC where the date names no zone). A row without a user or an item is left out and counted.
Duplicated (user, item) pairs are counted; the policy `keep` keeps them (RecBole's default),
`first` / `last` keeps one per pair when a run loads the data (RecBole's `rm_dup_inter`, which
orders by time first).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import yaml

from ..config.checks import plain_name
from ..core.errors import ConfigError, DataError
from ..core.files import process_exists
from .atomic import AtomicWriter, as_text, field_name
from .files import CONTEXT_SECTION, SETTINGS_FILE
from .tables import Chunk, Table, read_chunks

USER, ITEM, RATING, TIME = "user_id", "item_id", "rating", "timestamp"
DUPLICATE_POLICIES = ("keep", "first", "last")
_DECIMAL_COMMA = r"[+-]?\d*,\d+"  # a number written with a decimal comma: 4,5  -0,25  ,5


@dataclass(frozen=True)
class ImportSpec:
    """Where the interactions are and which columns are what; every other column is a feature."""

    source: Table
    user: str
    item: str
    time: str | None = None
    rating: str | None = None
    time_format: str | None = None                             # strptime format; None: numbers or ISO 8601
    duplicates: str = "keep"                                   # keep | first | last
    types: Mapping[str, str] = field(default_factory=dict)     # column -> forced RecBole type
    seq: Mapping[str, str] = field(default_factory=dict)       # column -> separator of its elements
    drop: Sequence[str] = ()                                   # columns never kept
    users: Table | None = None                                 # a table of user features
    items: Table | None = None                                 # a table of item features
    decimal_comma: bool = False                                # `4,5` is 4.5 (not in the user and item ids)
    chunk_rows: int = 100_000


@dataclass
class Imported:
    """What an import wrote, for its report."""

    folder: Path
    files: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)  # suffix -> (rows, types)
    left_out: int = 0          # interactions without a user or an item
    duplicates: int = 0        # interactions repeating an earlier (user, item) pair
    time_span: tuple[float, float] | None = None
    settings: dict = field(default_factory=dict)


def import_dataset(spec: ImportSpec, name: str, data_path: Path, force: bool = False) -> Imported:
    """Write the dataset `name` under `data_path` from `spec`; see the module docstring."""
    if spec.duplicates not in DUPLICATE_POLICIES:
        raise ConfigError(f"--duplicates {spec.duplicates!r}: choose one of {', '.join(DUPLICATE_POLICIES)}")
    plain_name("--name", name)
    target = Path(data_path) / name
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists; add --force to replace it, or choose another --name")
    Path(data_path).mkdir(parents=True, exist_ok=True)
    _remove_abandoned(Path(data_path), name)
    staging = Path(data_path) / f".{name}.importing-{os.getpid()}"
    staging.mkdir()
    try:
        imported = Imported(target)
        _write_interactions(spec, staging / f"{name}.inter", imported)
        for suffix, table, key in (("user", spec.users, (spec.user, USER)), ("item", spec.items, (spec.item, ITEM))):
            if table is not None:
                rows, types = _write_features(table, spec, key, staging / f"{name}.{suffix}")
                imported.files[suffix] = (rows, types)
        imported.settings = dataset_settings(imported.files, spec.duplicates)
        (staging / SETTINGS_FILE).write_text(_settings_text(imported.settings, spec))
        _move_into_place(staging, target)
        return imported
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def dataset_settings(files: Mapping[str, tuple[int, dict]], duplicates: str = "keep") -> dict:
    """The settings runs need for what was written, as RecBole's own ml-100k preset has them: every
    interaction column for every model; the user and item features too for context-aware models
    (data.files.CONTEXT_SECTION); the duplicate policy."""
    load = {suffix: list(types) for suffix, (_, types) in files.items()}
    settings: dict = {"load_col": {"inter": list(load["inter"])}}  # a copy: YAML writes it out, not as an alias
    if duplicates != "keep":
        settings["rm_dup_inter"] = duplicates
    if len(load) > 1:
        settings[CONTEXT_SECTION] = {"load_col": load}
    return settings


def _settings_text(settings: dict, spec: ImportSpec) -> str:
    header = (f"# Written by `recrunner data import` from {spec.source.path.name}. Every run on this dataset\n"
              "# reads it (above recrunner's base.yaml, below its datasets/<name>.yaml and --set);\n"
              f"# {CONTEXT_SECTION}: applies on top for context-aware models (FM, DeepFM, ...) only.\n")
    return header + yaml.safe_dump(settings, sort_keys=False, default_flow_style=None)


def _remove_abandoned(data_path: Path, name: str) -> None:
    """The temporary folders of imports of `name` whose process is gone (killed mid-import)."""
    for folder in data_path.glob(f".{name}.importing-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not process_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _move_into_place(staging: Path, target: Path) -> None:
    """Replace `target` by `staging` with two renames; the old folder goes only once the new is there."""
    old = target.with_name(f".{target.name}.replaced-{os.getpid()}")
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _write_interactions(spec: ImportSpec, path: Path, imported: Imported) -> None:
    mapped = {spec.user: USER, spec.item: ITEM, spec.rating: RATING, spec.time: TIME}
    mapped.pop(None, None)
    pairs, low, high = [], np.inf, -np.inf
    with AtomicWriter(path, forced={USER: "token", ITEM: "token", RATING: "float", TIME: "float",
                                    **_forced(spec)}) as writer:
        for chunk in read_chunks(spec.source, spec.chunk_rows):
            frame, lists = _fields(chunk, mapped, spec, role={spec.user: "--user", spec.item: "--item",
                                                              spec.rating: "--rating", spec.time: "--time"})
            if spec.rating is not None:
                _check_numbers(chunk, frame[RATING], spec.rating, "rating")
            if spec.time is not None:
                frame[TIME] = seconds(chunk, frame[TIME], spec.time, spec.time_format)
                times = frame[TIME].astype(float)
                low, high = min(low, times.min()), max(high, times.max())
            complete = (frame[USER] != "") & (frame[ITEM] != "")
            imported.left_out += int((~complete).sum())
            frame = frame[complete]
            pairs.append(_hashes(frame[[USER, ITEM]]))
            writer.write(frame, lists)
        types = writer.close()
    if writer.rows == 0:
        raise DataError(f"{spec.source.path}: no row has both a user ({spec.user}) and an item ({spec.item})")
    imported.duplicates = repeats(pairs)
    imported.time_span = (float(low), float(high)) if spec.time is not None else None
    imported.files["inter"] = (writer.rows, types)


def _write_features(table: Table, spec: ImportSpec, keys: tuple[str, str], path: Path) -> tuple[int, dict]:
    """A side table (.user or .item): its key column is the interactions' column (or its field name)."""
    column, key = keys
    hashes = []
    with AtomicWriter(path, forced={key: "token", **_forced(spec)}) as writer:
        for chunk in read_chunks(table, spec.chunk_rows):
            source_key = column if column in chunk.frame.columns else key
            frame, lists = _fields(chunk, {source_key: key}, spec, role={source_key: f"the key ({column})"})
            frame = frame[frame[key] != ""]
            hashes.append(_hashes(frame[[key]]))
            writer.write(frame, lists)
        types = writer.close()
    repeated = repeats(hashes)
    if repeated:
        raise DataError(f"{table.path}: {repeated} rows repeat a {key} of an earlier row; "
                        "a feature table holds one row per id")
    return writer.rows, types


def _forced(spec: ImportSpec) -> dict[str, str]:
    return {field_name(column): kind for column, kind in spec.types.items()}


def _fields(chunk: Chunk, mapped: Mapping[str, str], spec: ImportSpec, role: Mapping[str, str]):
    """(the chunk under field names, as text; the list-valued fields)."""
    import pandas as pd

    frame = chunk.frame
    columns = [str(c) for c in frame.columns]
    for column, field_ in mapped.items():
        if column not in columns:
            one = (" (one column: if another character separates them, give --separator, e.g. ' ')"
                   if len(columns) == 1 and column in columns[0] else "")
            raise DataError(f"{chunk.table.path}: no column {column!r} ({role.get(column, field_)}); "
                            f"its columns: {', '.join(columns)}{one}")
    out, lists, names = {}, set(), {}
    for column in frame.columns:
        if str(column) in spec.drop:
            continue
        name = mapped.get(str(column)) or field_name(column)
        if name in names:
            raise DataError(f"{chunk.table.path}: columns {names[name]!r} and {str(column)!r} would both be "
                            f"field {name!r}; rename one or leave one out with --drop")
        names[name] = str(column)
        if str(column) in spec.seq:
            values, is_list = _split(frame[column], spec.seq[str(column)]), True
        else:
            values, is_list = as_text(frame[column])
        if spec.decimal_comma and not is_list and name not in (USER, ITEM):
            values = decimal_points(values)
        out[name] = values
        if is_list:
            lists.add(name)
    return pd.DataFrame(out, index=frame.index), lists


def _split(values, separator: str):
    """A text column that lists values (`Drama|Comedy`) as lists; empty or missing: no value."""
    return values.map(lambda v: str(v).split(separator) if isinstance(v, str) and v else [])


def decimal_points(text):
    """Numbers written with a decimal comma (`4,5`, `-0,25`) with a decimal point; any other text as it is."""
    comma = text.str.fullmatch(_DECIMAL_COMMA, na=False)
    return text.where(~comma, text.str.replace(",", ".", regex=False))


def _check_filled(chunk: Chunk, text, column: str, what: str) -> None:
    empty = (text == "").to_numpy() | text.isna().to_numpy()
    if empty.any():
        raise DataError(f"{chunk.where(int(np.argmax(empty)))}: {what} column {column!r} is empty; every row needs "
                        f"a {what} (or leave out --{what})")


def _check_numbers(chunk: Chunk, text, column: str, what: str) -> None:
    import pandas as pd

    _check_filled(chunk, text, column, what)
    bad = pd.to_numeric(text, errors="coerce").isna()
    if bad.any():
        at = int(np.argmax(bad.to_numpy()))
        hint = "; for a decimal comma add --decimal-comma" if re.fullmatch(_DECIMAL_COMMA, str(text.iloc[at])) else ""
        raise DataError(f"{chunk.where(at)}: {what} column {column!r} holds {text.iloc[at]!r}, not a number{hint}")


def seconds(chunk: Chunk, text, column: str, time_format: str | None):
    """Timestamps as text: numbers as written; dates (ISO 8601 or `time_format`) as seconds since
    1970 UTC, whole seconds without a decimal point. An unreadable one is a DataError with its line."""
    import pandas as pd

    _check_filled(chunk, text, column, "time")
    if time_format is None and pd.to_numeric(text, errors="coerce").notna().all():
        return text
    try:
        parsed = pd.to_datetime(text, format=time_format or "ISO8601", utc=True, errors="coerce")
    except ValueError as exc:
        raise ConfigError(f"--time-format {time_format!r}: {exc}; give a strptime format such as '%d/%m/%Y %H:%M'") from None
    if parsed.isna().any():
        at = int(np.argmax(parsed.isna().to_numpy()))
        how = f"with --time-format {time_format!r}" if time_format else "as a number or an ISO 8601 date"
        raise DataError(f"{chunk.where(at)}: time column {column!r} holds {text.iloc[at]!r}, which cannot be read "
                        f"{how}; give --time-format (e.g. '%d/%m/%Y %H:%M')")
    value = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    whole = (value == np.floor(value)).all()
    return value.astype("int64").astype(str) if whole else value.map(repr)


def repeats(hashes: list[np.ndarray]) -> int:
    """How many rows repeat an earlier row's hash (sorted in place: no copy beyond the one array)."""
    every = np.concatenate(hashes) if hashes else np.empty(0, np.uint64)
    hashes.clear()
    every.sort()
    return int((every[1:] == every[:-1]).sum())


def _hashes(frame) -> np.ndarray:
    """One 64-bit hash per row (for counting repeats without keeping the values)."""
    import pandas as pd

    return pd.util.hash_pandas_object(frame, index=False).to_numpy()
