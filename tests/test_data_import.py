"""`recrunner data import|describe|check`: a dataset from a researcher's own files, and what it holds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from recrunner.cli.main import main
from recrunner.data.files import builtin_dataset_dir
from recrunner.run.experiment import Experiment, run_experiment

from .conftest import REPO, TINY_BPR, TINY_SASREC

SHIPPED = builtin_dataset_dir() / "ml-100k"


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def export_ml100k(folder: Path) -> dict[str, Path]:
    """ml-100k's own files as a researcher would have them: CSV, other column names, ISO dates."""
    folder.mkdir(parents=True, exist_ok=True)
    inter = pd.read_csv(SHIPPED / "ml-100k.inter", sep="\t", dtype=str)
    inter.columns = ["uid", "movie", "stars", "when"]
    inter["when"] = pd.to_datetime(inter["when"].astype(int), unit="s", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    users = pd.read_csv(SHIPPED / "ml-100k.user", sep="\t", dtype=str)
    users.columns = ["uid", "age", "sex", "job", "zip"]
    items = pd.read_csv(SHIPPED / "ml-100k.item", sep="\t", dtype=str, keep_default_na=False)
    items.columns = ["movie", "title", "year", "genres"]
    paths = {"ratings": folder / "ratings.csv", "users": folder / "users.csv", "items": folder / "items.csv"}
    for frame, path in zip((inter, users, items), paths.values()):
        frame.to_csv(path, index=False)
    return paths


def import_args(paths, data_path: Path, name: str) -> list[str]:
    return ["data", "import", str(paths["ratings"]), "--name", name, "--data-path", str(data_path),
            "--user", "uid", "--item", "movie", "--rating", "stars", "--time", "when",
            "--users", str(paths["users"]), "--items", str(paths["items"])]


def test_ml100k_exported_as_csv_imports_to_the_shipped_files_and_the_same_numbers(tmp_path, workspace, capsys):
    paths = export_ml100k(tmp_path / "raw")
    code, out, err = _run(capsys, import_args(paths, workspace.data_path, "ml-100k"))
    assert code == 0, err
    assert "100,000 rows" in out and "1997-09-20 .. 1998-04-22" in out
    imported = workspace.data_path / "ml-100k"
    assert (imported / "ml-100k.inter").read_bytes() == (SHIPPED / "ml-100k.inter").read_bytes()
    assert (imported / "ml-100k.user").read_text().splitlines()[0] == \
        "user_id:token\tage:float\tsex:token\tjob:token\tzip:token"
    shipped = type(workspace)(workspace.output_dir / "shipped", tmp_path / "empty", workspace.config_dir)
    (tmp_path / "empty").mkdir()
    for model, params in (("BPR", TINY_BPR), ("SASRec", TINY_SASREC)):
        ours = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)
        theirs = run_experiment(Experiment(model, "ml-100k", params), shipped, console=False)
        assert "dataset_example" not in json.dumps(str(ours.run_dir)) and ours.status == theirs.status == "ok"
        assert (ours.best_valid, ours.test) == (theirs.best_valid, theirs.test), model


def test_under_another_name_a_general_model_gives_the_same_numbers_and_the_settings_file_is_read(
        tmp_path, workspace, capsys):
    paths = export_ml100k(tmp_path / "raw")
    assert _run(capsys, import_args(paths, workspace.data_path, "my-ratings"))[0] == 0
    settings = (workspace.data_path / "my-ratings" / "dataset.yaml").read_text()
    assert "context_aware:" in settings
    ours = run_experiment(Experiment("BPR", "my-ratings", TINY_BPR), workspace, console=False)
    theirs = run_experiment(Experiment("BPR", "ml-100k", TINY_BPR), workspace, console=False)
    assert ours.test == theirs.test
    from recrunner.run.preparation import prepare

    bpr = prepare(Experiment("BPR", "my-ratings", TINY_BPR), workspace).config
    fm = prepare(Experiment("FM", "my-ratings", {"threshold": {"rating": 4}}), workspace).config  # its labels: rating >= 4
    assert bpr["load_col"] == {"inter": ["user_id", "item_id", "rating", "timestamp"]}
    assert fm["load_col"]["user"] == ["user_id", "age", "sex", "job", "zip"]  # the features, for context models only
    overridden = prepare(Experiment("BPR", "my-ratings", {"load_col": {"inter": ["user_id", "item_id"]}}), workspace)
    assert overridden.config["load_col"] == {"inter": ["user_id", "item_id"]}


def test_parquet_jsonl_and_small_chunks_write_the_same_files_as_csv(tmp_path, capsys):
    rows = pd.DataFrame({"user": ["u1", "u2", "u1", "u3"], "item": [10, 11, 12, 10], "score": [4.5, 3.0, 5.0, 1.0],
                         "t": ["2020-01-01 10:00:00", "2020-01-02T00:00:01Z", "2020-01-03", "2021-06-30T12:00:00+02:00"],
                         "tags": [["a", "b c"], [], ["a"], ["d"]], "price": [1.5, 2.0, 3.25, 4.0]})
    csv = rows.assign(tags=rows["tags"].map("|".join))
    csv.to_csv(tmp_path / "t.csv", index=False)
    rows.to_parquet(tmp_path / "t.parquet")
    rows.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    common = ["--user", "user", "--item", "item", "--rating", "score", "--time", "t"]
    written = {}
    for name, extra in (("t.csv", ["--seq", "tags=|"]), ("t.parquet", []), ("t.jsonl", []),
                        ("t.csv", ["--seq", "tags=|", "--chunk-rows", "1"])):
        data = tmp_path / f"data-{len(written)}"
        code, _, err = _run(capsys, ["data", "import", str(tmp_path / name), "--name", "t", "--data-path", str(data),
                                     *common, *extra])
        assert code == 0, err
        written[(name, len(extra))] = (data / "t" / "t.inter").read_text()
    assert len(set(written.values())) == 1, written
    header, first, *_ , last = next(iter(written.values())).splitlines()
    assert header == "user_id:token\titem_id:token\trating:float\ttimestamp:float\ttags:token_seq\tprice:float"
    assert first == "u1\t10\t4.5\t1577872800\ta b_c\t1.5"
    assert last.split("\t")[3] == "1625047200"  # 12:00 at +02:00 is 10:00 UTC


def test_a_compressed_tsv_reads_as_its_csv(tmp_path, capsys):
    import gzip

    with gzip.open(tmp_path / "r.tsv.gz", "wt") as f:
        f.write("user\titem\tnote\nu1\ti1\ta, b\nu2\ti1\t\n")
    data = tmp_path / "data"
    code, _, err = _run(capsys, ["data", "import", str(tmp_path / "r.tsv.gz"), "--name", "r", "--data-path", str(data),
                                 "--user", "user", "--item", "item"])
    assert code == 0, err
    assert (data / "r" / "r.inter").read_text() == "user_id:token\titem_id:token\tnote:token\nu1\ti1\ta, b\nu2\ti1\t\n"


def test_a_semicolon_csv_with_decimal_commas_imports_as_its_comma_csv(tmp_path, capsys):
    """What a spreadsheet writes in a locale with a decimal comma: `;` between columns, `4,5`, a BOM, CRLF."""
    plain = "uid,movie,stars,price\nu1,i1,4.5,2.25\nu2,i1,5,-0.5\n"
    (tmp_path / "plain.csv").write_text(plain)
    (tmp_path / "plain-users.csv").write_text("uid,height\nu1,1.75\nu2,1.6\n")
    (tmp_path / "local.csv").write_bytes(b"\xef\xbb\xbfuid;movie;stars;price\r\nu1;i1;4,5;2,25\r\nu2;i1;5;-0,5\r\n")
    (tmp_path / "local-users.csv").write_text("uid;height\nu1;1,75\nu2;1,6\n")
    written = {}
    for name, extra in (("plain", []), ("local", ["--decimal-comma"])):
        code, out, err = _run(capsys, ["data", "import", str(tmp_path / f"{name}.csv"), "--name", "d", "--data-path",
                                       str(tmp_path / name), "--user", "uid", "--item", "movie", "--rating", "stars",
                                       "--users", str(tmp_path / f"{name}-users.csv"), *extra])
        assert code == 0, err
        written[name] = [(tmp_path / name / "d" / f"d.{suffix}").read_text() for suffix in ("inter", "user")]
        assert ("local.csv read as ';'-separated" in out) == (name == "local")
        assert ("local-users.csv read as ';'-separated" in out) == (name == "local")
    assert written["local"] == written["plain"]
    assert written["plain"][0].splitlines()[1] == "u1\ti1\t4.5\t2.25"


def test_a_separator_given_reads_space_separated_text(tmp_path, capsys):
    (tmp_path / "r.txt").write_text("uid movie stars\nu1 i1 4\nu2 i1 5\n")
    (tmp_path / "u.tsv").write_text("uid age\nu1 20\nu2 30\n")
    code, out, err = _run(capsys, ["data", "import", str(tmp_path / "r.txt"), "--input-format", "csv", "--separator", " ",
                                   "--name", "r", "--data-path", str(tmp_path), "--user", "uid", "--item", "movie",
                                   "--rating", "stars", "--users", str(tmp_path / "u.tsv")])
    assert code == 0, err
    assert "read as" not in out  # given, not read from the header line
    assert (tmp_path / "r" / "r.inter").read_text() == "user_id:token\titem_id:token\trating:float\nu1\ti1\t4\nu2\ti1\t5\n"
    assert (tmp_path / "r" / "r.user").read_text() == "user_id:token\tage:float\nu1\t20\nu2\t30\n"


def test_a_header_line_tells_a_csvs_separator():
    from recrunner.data.tables import header_separator

    assert header_separator("uid;movie;stars\r\n") == ";"
    assert header_separator("uid,movie,stars\n") == ","
    assert header_separator("uid|movie|note, free text\n") == "|"
    assert header_separator("uid\tmovie\n") == "\t"
    assert header_separator("uid;movie,stars\n") == ","  # a tie: the comma
    assert header_separator("ratings\n") == ","           # one column


def test_field_types_are_inferred_from_every_chunk(tmp_path, capsys):
    from recrunner.data.atomic import ColumnKind, field_type

    frame = pd.DataFrame({"u": list("abcd"), "i": list("wxyz"), "zip": ["501", "02134", "7", "8"],
                          "age": ["20", "30", "", "41"], "code_id": ["1", "2", "3", "4"], "late": ["1", "2", "3", "x"]})
    frame.to_csv(tmp_path / "f.csv", index=False)
    data = tmp_path / "data"
    assert _run(capsys, ["data", "import", str(tmp_path / "f.csv"), "--name", "f", "--data-path", str(data),
                         "--user", "u", "--item", "i", "--chunk-rows", "2", "--column-type", "age=token"])[0] == 0
    header = (data / "f" / "f.inter").read_text().splitlines()[0]
    assert header == "user_id:token\titem_id:token\tzip:token\tage:token\tcode_id:token\tlate:token"
    assert field_type("x", ColumnKind()) == "float"
    assert field_type("x", ColumnKind(lists=True)) == "float_seq"
    assert field_type("x", ColumnKind(lists=True, list_numbers=False)) == "token_seq"
    assert field_type("x", ColumnKind(numbers=False), forced="float") == "float"


@pytest.mark.parametrize("content, flags, expected", [
    ("a,b\n1,2\n", ["--user", "uid", "--item", "b"], "t.csv: no column 'uid' (--user); its columns: a, b"),
    ("uid movie\n1 2\n", ["--user", "uid", "--item", "movie"], "t.csv: no column 'uid' (--user); its columns: uid movie "
     "(one column: if another character separates them, give --separator, e.g. ' ')"),
    ("u,i\n1,2\n", ["--user", "u", "--item", "i", "--separator", ""], "--separator is empty"),
    ("u,i,r\n1,2,3\n1,3,good\n", ["--user", "u", "--item", "i", "--rating", "r"],
     "t.csv: line 3: rating column 'r' holds 'good', not a number"),
    ("u;i;r\n1;2;3\n1;3;4,5\n", ["--user", "u", "--item", "i", "--rating", "r"],
     "t.csv: line 3: rating column 'r' holds '4,5', not a number; for a decimal comma add --decimal-comma"),
    ("u,i,t\n1,2,2020-01-01\n1,3,yesterday\n", ["--user", "u", "--item", "i", "--time", "t"],
     "t.csv: line 3: time column 't' holds 'yesterday', which cannot be read as a number or an ISO 8601 date"),
    ("u,i,t\n1,2,01/02/2020\n", ["--user", "u", "--item", "i", "--time", "t", "--time-format", "%Y-%m-%d"],
     "line 2: time column 't' holds '01/02/2020', which cannot be read with --time-format '%Y-%m-%d'"),
    ("u,i,t\n1,2,1e9\n1,3,\n", ["--user", "u", "--item", "i", "--time", "t"],
     "t.csv: line 3: time column 't' is empty; every row needs a time (or leave out --time)"),
    ("u,i,t\n1,2,2020\n", ["--user", "u", "--item", "i", "--time", "t", "--time-format", "%Q"],
     "--time-format '%Q': 'Q' is a bad directive"),
    ("", ["--user", "u", "--item", "i"], "t.csv: holds no rows"),
    ("u,i\n1,2\n3,4,5\n", ["--user", "u", "--item", "i"], "t.csv: Expected 2 fields in line 3, saw 3"),
    ("u,i\n1,2\n", ["--user", "u"], "data import needs --item (the id columns)"),
    ("u,i\n1,2\n", ["--user", "u", "--item", "i", "--column-type", "i=text"], "'text' is not a RecBole type"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, content, flags, expected):
    (tmp_path / "t.csv").write_text(content)
    data = tmp_path / "data"
    code, out, err = _run(capsys, ["data", "import", str(tmp_path / "t.csv"), "--name", "t", "--data-path", str(data), *flags])
    assert code == 2 and expected in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not data.exists() or list(data.iterdir()) == []  # no dataset, no staging folder left behind


def test_a_bad_json_line_is_named_and_an_existing_dataset_needs_force(tmp_path, capsys):
    (tmp_path / "r.jsonl").write_text('{"u": 1, "i": 2}\n{"u": 1, "i": 3}\n{"u": 2, "i": oops}\n')
    data = tmp_path / "data"
    args = ["data", "import", str(tmp_path / "r.jsonl"), "--name", "r", "--data-path", str(data), "--user", "u", "--item", "i"]
    code, _, err = _run(capsys, args)
    assert code == 2 and "r.jsonl: line 3 is not a JSON object" in err
    (tmp_path / "r.jsonl").write_text('{"u": 1, "i": 2}\n{"u": 1, "i": 3}\n{"u": 2, "i": 3}\n{"u": 2, "i": 3}\n')
    assert _run(capsys, args)[0] == 0
    before = (data / "r" / "r.inter").read_text()
    code, _, err = _run(capsys, args + ["--duplicates", "first"])
    assert code == 2 and "already exists; add --force to replace it" in err
    assert (data / "r" / "r.inter").read_text() == before
    code, out, _ = _run(capsys, args + ["--duplicates", "first", "--force"])
    assert code == 0 and "1 repeated (user, item) pairs: runs keep the first of each (rm_dup_inter: first)" in out
    assert "rm_dup_inter: first" in (data / "r" / "dataset.yaml").read_text()
    assert sorted(p.name for p in data.iterdir()) == ["r"]


def test_public_formats(tmp_path, capsys):
    ml = tmp_path / "ml-1m"
    ml.mkdir()
    (ml / "ratings.dat").write_text("1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::978298413\n")
    (ml / "movies.dat").write_bytes("1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n"
                                    "661::James and the Giant Peach (1996)::Animation|Children's|Musical\n".encode("latin-1"))
    (ml / "users.dat").write_text("1::F::1::10::48067\n2::M::56::16::70072\n")
    (tmp_path / "amazon.jsonl").write_text(
        '{"reviewerID": "A1", "asin": "B01", "overall": 5.0, "unixReviewTime": 1393545600, "reviewText": "ok"}\n'
        '{"reviewerID": "A2", "asin": "B01", "overall": 3.0, "unixReviewTime": 1393632000, "reviewText": "meh"}\n')
    (tmp_path / "review.json").write_text(
        '{"review_id": "r1", "user_id": "u1", "business_id": "b1", "stars": 4, "date": "2016-03-09 00:44:42", "text": "x"}\n'
        '{"review_id": "r2", "user_id": "u2", "business_id": "b1", "stars": 2, "date": "2016-03-10 00:00:00", "text": "y"}\n')
    latest = tmp_path / "ml-latest-small"
    latest.mkdir()
    (latest / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.0,964981247\n")
    (latest / "movies.csv").write_text('movieId,title,genres\n1,Toy Story (1995),Adventure|Animation\n'
                                       '3,"Grumpier Old Men, The (1995)",Comedy|Romance\n')
    (tmp_path / "amazon-2023.jsonl").write_text(
        '{"rating": 5.0, "title": "t", "asin": "B1", "parent_asin": "P1", "user_id": "U1", "timestamp": 1588687728923}\n')
    data = tmp_path / "data"
    for source, fmt, name in ((ml, "movielens", "ml"), (latest / "ratings.csv", "movielens", "latest"),
                              (tmp_path / "amazon-2023.jsonl", "amazon", "amz23"), (tmp_path / "amazon.jsonl", "amazon", "amz"),
                              (tmp_path / "review.json", "yelp", "yelp")):
        code, _, err = _run(capsys, ["data", "import", str(source), "--format", fmt, "--name", name, "--data-path", str(data)])
        assert code == 0, err
    assert (data / "ml" / "ml.inter").read_text().splitlines()[1] == "1\t1193\t5\t978300760"
    assert (data / "ml" / "ml.item").read_text().splitlines()[:3] == [
        "item_id:token\ttitle:token\tgenres:token_seq", "1193\tOne Flew Over the Cuckoo's Nest (1975)\tDrama",
        "661\tJames and the Giant Peach (1996)\tAnimation Children's Musical"]
    assert (data / "ml" / "ml.user").read_text().splitlines()[1] == "1\tF\t1\t10\t48067"
    assert (data / "latest" / "latest.inter").read_text().splitlines()[1] == "1\t1\t4.0\t964982703"
    assert (data / "latest" / "latest.item").read_text().splitlines()[2] == "3\tGrumpier Old Men, The (1995)\tComedy Romance"
    assert (data / "amz" / "amz.inter").read_text().splitlines() == [
        "user_id:token\titem_id:token\trating:float\ttimestamp:float", "A1\tB01\t5.0\t1393545600", "A2\tB01\t3.0\t1393632000"]
    assert (data / "amz23" / "amz23.inter").read_text().splitlines()[1] == "U1\tP1\t5.0\t1588687728923"
    assert (data / "yelp" / "yelp.inter").read_text().splitlines()[1] == "u1\tb1\t4\t1457484282"
    code, _, err = _run(capsys, ["data", "import", str(tmp_path / "review.json"), "--format", "amazon", "--name", "x",
                                 "--data-path", str(data)])
    assert code == 2 and "not an Amazon reviews file" in err


def test_describe_counts_what_each_filter_and_the_split_leave(tmp_path, capsys):
    args = ["--data-path", str(tmp_path), "--config-dir", str(REPO / "configs")]
    code, out, err = _run(capsys, ["data", "describe", "ml-100k", "--json", *args,
                                   "--set", "user_inter_num_interval=[10,60]", "val_interval={rating: '[3,inf)'}"])
    assert code == 0, err
    described = json.loads(out)
    assert described["loaded"]["interactions"] == 100000 and described["loaded"]["users"] == 943
    assert described["loaded"]["per_user"]["min"] == 20
    assert described["loaded"]["time"]["dates"] == ["1997-09-20", "1998-04-22"]
    steps = {s["step"]: s for s in described["steps"]}
    assert steps["_filter_by_field_value"]["interactions"] == 82520  # ratings of 3 and above
    assert steps["_filter_by_field_value"]["settings"] == {"val_interval": {"rating": "[3,inf)"}}
    final = described["filtered"]
    assert final["interactions"] == steps["_filter_by_inter_num"]["interactions"]
    split = described["split"]
    assert sum(split[p]["interactions"] for p in ("train", "valid", "test")) == final["interactions"]
    code, out, _ = _run(capsys, ["data", "describe", "ml-100k", "--model", "SASRec", *args])
    assert code == 0 and "split (split: {'LS': 'valid_and_test'}, order: TO" in out
    assert "      943 rows, 943 users" in out  # leave-one-out: one test row per user


def test_a_filter_that_leaves_too_little_is_named(tmp_path, capsys):
    args = ["--data-path", str(tmp_path), "--config-dir", str(REPO / "configs")]
    code, _, err = _run(capsys, ["data", "describe", "ml-100k", *args, "--set", "user_inter_num_interval='[700,inf)'"])
    assert code == 2
    assert ("k-core: interactions per user and per item (user_inter_num_interval: [700,inf), item_inter_num_interval: None) "
            "left 737 interactions of 1 users") in err
    from recrunner.data.describe import too_small

    steps = [{"what": "as loaded", "settings": {}, "interactions": 10, "users": 3, "items": 4},
             {"what": "value intervals", "settings": {"val_interval": {"rating": "[9,inf)"}}, "interactions": 0,
              "users": 0, "items": 0}]
    assert too_small(steps).startswith("value intervals (val_interval: {'rating': '[9,inf)'}) left 0 interactions")
    assert too_small(steps[:1]) is None
    tiny = [{**steps[0], "items": 1}, {**steps[0], "what": "rows without a user or an item", "items": 1}]
    assert too_small(tiny) == ("holds 10 interactions of 3 users and 1 items as loaded; RecBole needs at least "
                               "2 users and 2 items: give a larger dataset")


def test_check_reads_every_line_and_names_the_bad_one(tmp_path, capsys):
    folder = tmp_path / "big"
    folder.mkdir()
    lines = ["user_id:token\titem_id:token\trating:float"] + [f"{u}\t{i}\t{(u + i) % 5 + 1}"
                                                             for u in range(60) for i in range(30)]
    lines[1500] = "7\t8\tfive"
    (folder / "big.inter").write_text("\n".join(lines) + "\n")
    args = ["--data-path", str(tmp_path), "--config-dir", str(REPO / "configs")]
    code, _, err = _run(capsys, ["data", "check", "big", *args])
    assert code == 2 and "big.inter: line 1501: rating:float is a float column, but holds 'five'" in err
    lines[1500] = "7\t8\t5"
    (folder / "big.inter").write_text("\n".join(lines) + "\n")
    code, out, err = _run(capsys, ["data", "check", "big", *args])
    assert code == 0, err
    assert "big.inter: 1,800 rows, ok" in out and "1,800 interactions, 60 users, 30 items" in out


def test_ranking_and_value_metrics_together_are_one_line(tmp_path, capsys):
    code, _, err = _run(capsys, ["data", "describe", "ml-100k", "--data-path", str(tmp_path),
                                 "--set", "metrics=[Recall,RMSE]"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "metrics mixes ranking metrics (Recall) and value metrics (RMSE), which RecBole cannot compute" in err


def test_an_import_killed_midway_leaves_nothing_and_the_same_command_then_imports(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    rows = 300_000
    (tmp_path / "big.csv").write_text("u,i,r\n" + "".join(f"{n % 997},{n % 1013},{n % 5 + 1}\n" for n in range(rows)))
    data = tmp_path / "data"
    command = [sys.executable, "-m", "recrunner", "data", "import", str(tmp_path / "big.csv"), "--name", "big",
               "--data-path", str(data), "--user", "u", "--item", "i", "--rating", "r", "--chunk-rows", "200"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".big.importing-") for p in data.glob(".*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (data / "big").exists()  # nothing in place, half written or not
    assert [p.name for p in data.iterdir()] == [f".big.importing-{process.pid}"]
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert sorted(p.name for p in data.iterdir()) == ["big"]  # the killed import's folder is gone too
    assert len((data / "big" / "big.inter").read_text().splitlines()) == rows + 1
