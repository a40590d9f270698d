"""`recrunner data import|describe|check`: a dataset from the files researchers have, and what it holds."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ..core.errors import ConfigError
from .arguments import data_path_of

COMMANDS = ("import", "describe", "check")


def build_parser(parser_class) -> argparse.ArgumentParser:
    parser = parser_class(prog="recrunner data",
                          description="Import a CSV, TSV, Parquet or JSON Lines file (or a public raw format) as a "
                                      "RecBole dataset; describe a dataset and what the filters and split leave; "
                                      "check its files.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=parser_class,
                                     metavar="{import,describe,check}")
    _import_arguments(commands.add_parser("import", help="write <data-path>/<name>/ from a table"))
    for name, about in (("describe", "counts, distributions, and what the filters and split leave"),
                        ("check", "read every file of the dataset, then build it as a run would")):
        command = commands.add_parser(name, help=about)
        command.add_argument("dataset", help="the dataset's name")
        command.add_argument("--model", default="BPR", help="the model whose split to count (default BPR)")
        command.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                             help="settings, as for a run (e.g. user_inter_num_interval='[5,inf)')")
        command.add_argument("--config-dir", type=Path, default=None, help="recrunner's YAML layers")
        if name == "describe":
            command.add_argument("--json", action="store_true", help="print the description as JSON")
    for command in commands.choices.values():
        command.add_argument("--data-path", type=Path, default=None,
                             help="folder holding <dataset>/ folders (default: $RECRUNNER_DATA_PATH or ./datasets)")
        command.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _import_arguments(imported) -> None:
    imported.add_argument("file", type=Path, help="the interactions: .csv .tsv .parquet .jsonl (or --format's files)")
    imported.add_argument("--name", required=True, help="the dataset's name (runs use --dataset NAME)")
    imported.add_argument("--format", default=None, help="a public raw format: movielens, amazon, yelp")
    imported.add_argument("--input-format", choices=("csv", "tsv", "parquet", "jsonl"), default=None,
                          help="the file's format when its name does not tell")
    for role in ("user", "item"):
        imported.add_argument(f"--{role}", default=None, metavar="COL", help=f"the {role} id column")
    imported.add_argument("--time", default=None, metavar="COL", help="the time column: numbers, or dates")
    imported.add_argument("--rating", default=None, metavar="COL", help="the rating column (numbers)")
    imported.add_argument("--time-format", default=None, metavar="FMT",
                          help="strptime format of the dates (default: numbers as they are, else ISO 8601)")
    imported.add_argument("--duplicates", choices=("keep", "first", "last"), default=None,
                          help="repeated (user, item) pairs: keep all (default, as RecBole), or keep the first/last "
                               "in time when runs load the data (rm_dup_inter)")
    imported.add_argument("--users", type=Path, default=None, metavar="FILE", help="a table of user features (.user)")
    imported.add_argument("--items", type=Path, default=None, metavar="FILE", help="a table of item features (.item)")
    imported.add_argument("--column-type", action="append", default=[], metavar="COL=TYPE",
                          help="a feature's RecBole type instead of the inferred one: token, float, token_seq, float_seq")
    imported.add_argument("--seq", action="append", default=[], metavar="COL=SEP",
                          help="a text column that lists values separated by SEP (a token_seq feature)")
    imported.add_argument("--drop", action="append", default=[], metavar="COL", help="a column not to keep")
    imported.add_argument("--separator", default=None, metavar="SEP",
                          help="the columns' separator of CSV/TSV text, e.g. ' ' or '\\t' (default: a .csv's from its "
                               "header line: , ; tab or |)")
    imported.add_argument("--decimal-comma", action="store_true",
                          help="numbers written with a decimal comma (4,5) are 4.5: ratings, times and features, not the ids")
    imported.add_argument("--encoding", default="utf-8", help="text encoding of CSV/TSV/JSON files (default utf-8)")
    imported.add_argument("--force", action="store_true", help="replace an existing dataset of that name")
    imported.add_argument("--chunk-rows", type=int, default=100_000, help=argparse.SUPPRESS)


def run(args) -> int:
    data_path = data_path_of(args)
    if args.command == "import":
        return _import(args, data_path)
    return _describe(args, data_path)


def import_spec(args):
    """The ImportSpec the arguments ask for (a --format's, with the explicit options on top)."""
    from ..data.formats import format_spec
    from ..data.importing import ImportSpec
    from ..data.tables import table_for

    fields = format_spec(args.format, args.file) if args.format else {}
    if not args.format:
        missing = [f"--{role}" for role in ("user", "item") if getattr(args, role) is None]
        if missing:
            raise ConfigError(f"data import needs {' and '.join(missing)} (the id columns), or --format "
                              "movielens|amazon|yelp for a public raw format")
        fields["source"] = table_for(args.file, args.input_format)
    for role in ("user", "item", "time", "rating", "time_format", "duplicates"):
        if getattr(args, role) is not None:
            fields[role] = getattr(args, role)
    for role, path in (("users", args.users), ("items", args.items)):
        if path is not None:
            fields[role] = table_for(path)
    fields["types"] = {**fields.get("types", {}), **_pairs(args.column_type, "--column-type", _check_type)}
    fields["seq"] = {**fields.get("seq", {}), **_pairs(args.seq, "--seq")}
    fields["drop"] = tuple(args.drop)
    fields["source"] = _encoded(fields["source"], args.encoding)
    if args.separator is not None:
        for role in ("source", "users", "items"):
            fields[role] = _separated(fields.get(role), args.separator)
    return ImportSpec(**fields, decimal_comma=args.decimal_comma, chunk_rows=args.chunk_rows)


def _encoded(table, encoding: str):
    from dataclasses import replace

    return replace(table, encoding=encoding) if encoding != "utf-8" and table.encoding == "utf-8" else table


def _separated(table, separator: str):
    """`table` read with the separator given (`\t` written out is a tab); Parquet and JSON Lines as they are."""
    from dataclasses import replace

    if table is None or table.kind not in ("csv", "tsv"):
        return table
    if not separator:
        raise ConfigError("--separator is empty; give the character between columns, e.g. ';' or ' '")
    return replace(table, separator=separator.replace("\\t", "\t"))


def _check_type(value: str) -> str:
    from ..data.files import FIELD_TYPES

    if value not in FIELD_TYPES:
        raise ConfigError(f"--column-type: {value!r} is not a RecBole type; use one of {', '.join(FIELD_TYPES)}")
    return value


def _pairs(options, flag: str, check=lambda v: v) -> dict:
    pairs = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} expects COL=VALUE, got {option!r}")
        pairs[key] = check(value)
    return pairs


def _import(args, data_path: Path) -> int:
    from ..data.importing import import_dataset
    from .data_render import render_import

    started = time.perf_counter()
    spec = import_spec(args)
    imported = import_dataset(spec, args.name, data_path, force=args.force)
    found = [] if args.separator is not None else [  # a .csv's separator read from its header line
        (table.path.name, table.separator) for table in (spec.source, spec.users, spec.items)
        if table is not None and table.kind == "csv" and table.separator != ","]
    print(render_import(imported, args.name, args.file, time.perf_counter() - started, found))
    return 0


def _describe(args, data_path: Path) -> int:
    from ..config.layers import default_config_dir
    from ..config.params import parse_set_options
    from ..data.describe import check_files, describe
    from ..run.preparation import Experiment, Workspace, prepare
    from .data_render import render_check, render_description

    folder = data_path / args.dataset
    checked = []
    if args.command == "check" and (folder / f"{args.dataset}.inter").is_file():
        checked = check_files(folder, args.dataset)
        bad = [(path, problem) for path, _, problem in checked if problem]
        if bad:
            raise ConfigError(f"{bad[0][0]}: {bad[0][1]}")
    workspace = Workspace(output_dir=Path(os.devnull), data_path=data_path,
                          config_dir=args.config_dir.resolve() if args.config_dir else default_config_dir())
    prepared = prepare(Experiment(args.model, args.dataset, parse_set_options(args.set)), workspace)
    description = describe(prepared.config)
    if args.command == "check":
        print(render_check(checked, description, prepared.config))
    elif args.json:
        print(json.dumps(description.as_dict(), indent=2, default=str))
    else:
        print(render_description(description, prepared.config))
    return 0
