"""Reading the tables researchers have (CSV, TSV, Parquet, JSON Lines, MovieLens `::` files) in chunks.

A `.csv` is read with the separator its header line uses: a comma, or a semicolon, tab or `|` where
the header holds more of those than of commas (a spreadsheet saved in a locale whose decimal mark is
a comma writes `;`), so such a file imports as it is instead of as one column named `uid;movie;stars`.

`read_chunks(table, rows)` yields `Chunk`s: a DataFrame of at most `rows` rows and the line (or
row) number of its first row, so every later complaint can name the file and the line. Delimited
text arrives as text exactly as written (an id `00501` keeps its zeros, a rating `4` stays `4`);
Parquet and JSON Lines arrive with their own types (numbers, lists), turned into text by
`data.atomic`. Nothing here holds more than one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ..core.errors import ConfigError, DataError

SEPARATORS = (",", ";", "\t", "|")  # a .csv's, in the order a tie in its header line is settled
KINDS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet",
         ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")


@dataclass(frozen=True)
class Table:
    """One source file and how to read it; `names` for files without a header (MovieLens .dat)."""

    path: Path
    kind: str                                    # csv | tsv | parquet | jsonl | delimited
    separator: str | None = None                 # delimited: the separator (a regex when longer than 1)
    names: Sequence[str] | None = None           # delimited: column names, the file has no header
    usecols: Sequence[int] | None = None         # delimited: which positions hold `names`
    encoding: str = "utf-8"
    keep: Sequence[str] | None = None            # only these columns (the rest is never kept)

    @property
    def position(self) -> str:
        return "row" if self.kind == "parquet" else "line"

    @property
    def first_line(self) -> int:
        """The line of the first data row: after the header, if the file has one."""
        return 0 if self.kind == "parquet" else 1 if self.kind == "jsonl" or self.names else 2


@dataclass
class Chunk:
    frame: object          # pandas.DataFrame
    first: int             # line (or row) number of its first row
    table: Table = field(repr=False)

    def where(self, offset: int) -> str:
        """`file: line N` of the chunk's row at `offset` (0-based)."""
        return f"{self.table.path}: {self.table.position} {self.first + offset}"


def table_for(path: Path, kind: str | None = None, keep: Sequence[str] | None = None) -> Table:
    """The Table of a file, its kind from `kind` or the suffix (compression suffixes skipped)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file" + (" (it is a folder)" if path.is_dir() else ""))
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in COMPRESSED]
    kind = kind or (KINDS.get(suffixes[-1]) if suffixes else None)
    if kind not in {"csv", "tsv", "parquet", "jsonl"}:
        raise ConfigError(f"{path}: cannot tell its format from its name; recrunner reads "
                          f"{', '.join(sorted(KINDS))} (optionally compressed): rename it or give --input-format")
    return Table(path, kind, separator=_header_separator(path) if kind == "csv" else None, keep=keep)


def header_separator(header: str) -> str:
    """The separator of a delimited file from its header line (pure): of `SEPARATORS`, the one it holds
    most of, the earliest listed on a tie; a comma when it holds none (one column)."""
    best = max(SEPARATORS, key=header.count)
    return best if header.count(best) else ","


def _header_separator(path: Path) -> str:
    import pandas as pd

    try:  # compressed files too; an undecodable byte is the reader's to name, with its line
        with pd.io.common.get_handle(path, "r", encoding="utf-8", errors="replace", compression="infer") as handles:
            return header_separator(handles.handle.readline())
    except (OSError, EOFError, ValueError):  # not the compression its name says: the reader says so
        return ","


def read_chunks(table: Table, rows: int = 1_000_000) -> Iterator[Chunk]:
    """The table in chunks of at most `rows` rows; an empty file is a DataError."""
    reader = {"parquet": _parquet, "jsonl": _jsonl}.get(table.kind, _delimited)
    first, empty = table.first_line, True
    for frame in reader(table, rows):
        if table.keep is not None:
            missing = [c for c in table.keep if c not in frame.columns]
            if missing:
                raise DataError(f"{table.path}: no column {missing[0]!r}; its columns: {', '.join(map(str, frame.columns))}")
            frame = frame[list(table.keep)]
        if len(frame):
            empty = False
            yield Chunk(frame, first, table)
        first += len(frame)
    if empty:
        raise DataError(f"{table.path}: holds no rows; give a file with a header and at least one row")


def columns_of(table: Table) -> list[str]:
    """The table's column names (its first chunk's), without reading the whole file."""
    for chunk in read_chunks(table, rows=100):
        return [str(c) for c in chunk.frame.columns]
    return []


def _delimited(table: Table, rows: int):
    import pandas as pd

    separator = table.separator or {"csv": ",", "tsv": "\t"}[table.kind]
    options = dict(sep=separator, dtype=str, keep_default_na=False, na_filter=False, chunksize=rows,
                   encoding=table.encoding, engine="python" if len(separator) > 1 else "c")
    if table.names:
        options.update(header=None, names=list(table.names), usecols=table.usecols)
    try:
        yield from pd.read_csv(table.path, **options)
    except pd.errors.EmptyDataError:
        return
    except pd.errors.ParserError as exc:
        raise DataError(f"{table.path}: {_parser_problem(exc)}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{table.path}: not {table.encoding} text (byte {exc.start} of a block: "
                        f"{exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8 or give --encoding latin-1") from None


def _parser_problem(exc) -> str:
    text = str(exc).strip().splitlines()[-1]
    return text.replace("Error tokenizing data. C error: ", "").rstrip(".") + "; every line needs the header's number of columns"


def _parquet(table: Table, rows: int):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("reading Parquet needs pyarrow: pip install 'recrunner[data]'") from None
    try:
        source = pq.ParquetFile(table.path)
    except Exception as exc:  # pyarrow's ArrowInvalid and friends
        raise DataError(f"{table.path}: not a Parquet file pyarrow can read ({str(exc).splitlines()[0]})") from None
    for batch in source.iter_batches(batch_size=rows, columns=list(table.keep) if table.keep else None):
        yield batch.to_pandas(integer_object_nulls=True)


def _jsonl(table: Table, rows: int):
    import pandas as pd

    done = 0
    try:
        with pd.read_json(table.path, lines=True, chunksize=rows, dtype=False, convert_dates=False,
                          keep_default_dates=False, encoding=table.encoding) as reader:
            for frame in reader:
                done += len(frame)
                yield frame
    except ValueError as exc:
        line = _bad_json_line(table, after=done)
        raise DataError(f"{table.path}: line {line} is not a JSON object ({str(exc).splitlines()[0]}); "
                        "JSON Lines holds one object per line") from None


def _bad_json_line(table: Table, after: int) -> int | str:
    """The first line past the `after` rows read that json cannot parse (blank lines skipped)."""
    import json

    import pandas as pd

    with pd.io.common.get_handle(table.path, "r", encoding=table.encoding, compression="infer") as handles:
        for number, line in enumerate(handles.handle, start=1):
            if number > after and line.strip():
                try:
                    if not isinstance(json.loads(line), dict):
                        return number
                except ValueError:
                    return number
    return "?"
