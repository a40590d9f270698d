"""RecBole's atomic files, written: a typed header, then tab-separated text, streamed in chunks.

`AtomicWriter` owns the format on the writing side (`data.files.atomic_file_problem` reads it
back). A column's RecBole type (token, float, token_seq, float_seq) is decided from every value it
held, so the body is written first and the header joined in front of it when the file closes.
The decision is `field_type`, a pure function of what `ColumnKind` saw:
- lists (Parquet, JSON arrays, or a `--seq` column split at its separator): float_seq when every
  element is a number, else token_seq;
- numbers: float, unless a value is zero-padded (`00501`) or the name says it is an id
  (`id`, `*_id`, `userId`, `*ID`, `*code`, `zip*`): those are tokens;
- anything else: token.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .files import FIELD_TYPES

_ID_NAME = re.compile(r"^(id|ID)$|(_id|_ID|[a-z]Id|[a-z]ID|code|Code|CODE)$|^(zip|Zip|ZIP)")
_PADDED = r"^0\d"
_SPACE = re.compile(r"\s+")


def field_name(column) -> str:
    """A RecBole field name for a source column: letters, digits and `_` (RecBole splits on `:`)."""
    name = re.sub(r"\W+", "_", str(column).strip()).strip("_")
    return name or "column"


@dataclass
class ColumnKind:
    """What a column's values have been so far, over every chunk."""

    numbers: bool = True        # every non-empty value a number
    padded: bool = False        # some number written with a leading zero
    lists: bool = False         # its values are lists
    list_numbers: bool = True   # every list element a number

    def update(self, values, lists: bool) -> None:
        import pandas as pd

        if lists:
            self.lists = True
            elements = values.explode().dropna().astype(str)
            self.list_numbers = self.list_numbers and pd.to_numeric(elements, errors="coerce").notna().all()
            return
        filled = values[values != ""]
        if self.numbers and len(filled):
            self.numbers = bool(pd.to_numeric(filled, errors="coerce").notna().all())
            self.padded = self.padded or bool(filled.str.match(_PADDED).any())


def field_type(name: str, kind: ColumnKind, forced: str | None = None) -> str:
    """The RecBole type of a column (see the module docstring); `forced` wins."""
    if forced:
        return forced
    if kind.lists:
        return "float_seq" if kind.list_numbers else "token_seq"
    if kind.numbers and not kind.padded and not _ID_NAME.search(name):
        return "float"
    return "token"


def as_text(series):
    """(the column as text, whether its values are lists): missing values empty; list values are
    kept as lists (AtomicWriter writes them; it also replaces tabs and line breaks in values)."""
    import pandas as pd

    if series.dtype.kind in "iu":
        return series.astype(str), False
    if series.dtype.kind == "b":
        return series.astype(int).astype(str), False
    if series.dtype.kind == "f":
        return series.map(_scalar_text), False
    sample = series.dropna().head(1)
    if len(sample) and _is_list(sample.iloc[0]):
        return series, True
    if pd.api.types.infer_dtype(series, skipna=False) != "string":
        series = series.map(_scalar_text)
    return series, False


def list_text(series):
    """A list column as RecBole's sequence text: elements joined by spaces, spaces inside one as `_`."""
    return series.map(lambda values: " ".join(_SPACE.sub("_", str(v).strip()) for v in _elements(values)))


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple)) or hasattr(value, "tolist") and not isinstance(value, (str, bytes))


def _elements(values) -> list:
    if values is None or isinstance(values, float) and values != values:
        return []
    return list(values)


def _scalar_text(value) -> str:
    if value is None or value != value:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _joined(columns) -> str:
    """The rows as atomic-file lines: values joined by tabs, each row ending in a line break."""
    lines = columns[0].str.cat(columns[1:], sep="\t") if len(columns) > 1 else columns[0]
    return "\n".join(lines.tolist()) + "\n"


class AtomicWriter:
    """One atomic file, written a chunk at a time; `close()` puts the typed header in front."""

    def __init__(self, path: Path, forced: dict[str, str] | None = None):
        self.path = Path(path)
        self.forced = dict(forced or {})
        self.columns: list[str] | None = None
        self.kinds: dict[str, ColumnKind] = {}
        self.rows = 0
        self._body = open(self.path.with_name(self.path.name + ".body"), "w", encoding="utf-8", newline="\n")

    def write(self, frame, lists: set[str] = frozenset()) -> None:
        """Append the rows of `frame` (text columns named as fields; `lists` columns hold lists)."""
        if self.columns is None:
            self.columns = list(frame.columns)
            self.kinds = {c: ColumnKind() for c in self.columns}
        for column in self.columns:
            if column not in self.forced or self.forced[column].endswith("_seq"):
                self.kinds[column].update(frame[column], column in lists)
        text = [list_text(frame[c]) if c in lists else frame[c] for c in self.columns]
        body = _joined(text)
        if body.count("\n") != len(frame) or body.count("\t") != len(frame) * (len(text) - 1) or "\r" in body:
            body = _joined([column.str.replace(r"[\t\r\n]+", " ", regex=True) for column in text])
        self._body.write(body)
        self.rows += len(frame)

    def types(self) -> dict[str, str]:
        return {c: field_type(c, self.kinds[c], self.forced.get(c)) for c in self.columns or []}

    def close(self) -> dict[str, str]:
        """Write `path` (header, then the body) and remove the body; the fields and their types."""
        self._body.close()
        body = Path(self._body.name)
        types = self.types()
        assert set(types.values()) <= set(FIELD_TYPES)
        with open(self.path, "w", encoding="utf-8", newline="\n") as out, open(body, encoding="utf-8") as rows:
            out.write("\t".join(f"{c}:{t}" for c, t in types.items()) + "\n")
            shutil.copyfileobj(rows, out, 16 << 20)
        body.unlink()
        return types

    def abandon(self) -> None:
        self._body.close()
        Path(self._body.name).unlink(missing_ok=True)

    def __enter__(self) -> "AtomicWriter":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:  # a failure or a stop before close(): no body file left behind
            self.abandon()
