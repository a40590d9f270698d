"""Public raw formats by name (`--format`): the usual benchmarks one command from their downloads.

| format    | give                                                   | reads                                                         |
|-----------|--------------------------------------------------------|---------------------------------------------------------------|
| movielens | the folder (or its ratings file)                       | ratings.dat + movies.dat + users.dat (ml-1m, ml-10m), or ratings.csv + movies.csv (ml-20m, ml-25m, ml-latest) |
| amazon    | a reviews file (.json / .jsonl, optionally .gz)         | 2014/2018 (reviewerID, asin, overall, unixReviewTime) or 2023 (user_id, parent_asin, rating, timestamp) |
| yelp      | yelp_academic_dataset_review.json                      | user_id, business_id, stars, date                             |

Each returns the `ImportSpec` fields for its files; the command's own options (--time-format,
--duplicates, --users, --items) still apply on top.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import ConfigError, DataError
from .tables import Table, table_for

FORMATS = ("movielens", "amazon", "yelp")
_AMAZON = {("reviewerID", "asin", "overall", "unixReviewTime"), ("user_id", "parent_asin", "rating", "timestamp")}


def format_spec(name: str, path: Path) -> dict:
    """ImportSpec keyword arguments for the raw files of `name` at `path`."""
    if name not in FORMATS:
        raise ConfigError(f"--format {name!r} is not a known format; known: {', '.join(FORMATS)}")
    return {"movielens": movielens, "amazon": amazon, "yelp": yelp}[name](Path(path))


def movielens(path: Path) -> dict:
    folder = path if path.is_dir() else path.parent
    ratings = path if path.is_file() else _first(folder, ("ratings.dat", "ratings.csv"), "movielens")
    if ratings.suffix == ".dat":  # UserID::MovieID::Rating::Timestamp, Latin-1, no header
        source = Table(ratings, "delimited", ":", ("userId", "movieId", "rating", "timestamp"), (0, 2, 4, 6), "latin-1")
        movies = folder / "movies.dat"
        items = Table(movies, "delimited", "::", ("movieId", "title", "genres"), None, "latin-1") if movies.is_file() else None
        users_file = folder / "users.dat"
        users = (Table(users_file, "delimited", ":", ("userId", "gender", "age", "occupation", "zip_code"),
                       (0, 2, 4, 6, 8), "latin-1") if users_file.is_file() else None)
    else:
        source = table_for(ratings, keep=("userId", "movieId", "rating", "timestamp"))
        movies = folder / "movies.csv"
        items = table_for(movies, keep=("movieId", "title", "genres")) if movies.is_file() else None
        users = None
    return dict(source=source, user="userId", item="movieId", rating="rating", time="timestamp",
                items=items, users=users, seq={"genres": "|"},
                types={"title": "token", "age": "token", "occupation": "token"})


def amazon(path: Path) -> dict:
    keys = set(_first_object(path))
    for columns in _AMAZON:
        if set(columns) <= keys:
            user, item, rating, time = columns
            return dict(source=table_for(path, "jsonl", keep=columns), user=user, item=item, rating=rating, time=time)
    raise DataError(f"{path}: not an Amazon reviews file: its first line has {', '.join(sorted(keys))}; expected "
                    "reviewerID, asin, overall, unixReviewTime (2014/2018) or user_id, parent_asin, rating, timestamp (2023)")


def yelp(path: Path) -> dict:
    columns = ("user_id", "business_id", "stars", "date")
    keys = set(_first_object(path))
    if not set(columns) <= keys:
        raise DataError(f"{path}: not a Yelp reviews file: its first line has {', '.join(sorted(keys))}; "
                        "expected user_id, business_id, stars, date (yelp_academic_dataset_review.json)")
    return dict(source=table_for(path, "jsonl", keep=columns), user="user_id", item="business_id",
                rating="stars", time="date")


def _first(folder: Path, names: tuple[str, ...], fmt: str) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise ConfigError(f"{folder}: no {' or '.join(names)}; give the folder of the downloaded {fmt} files or the ratings file")


def _first_object(path: Path) -> dict:
    import pandas as pd

    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such file")
    with pd.io.common.get_handle(path, "r", compression="infer") as handles:
        line = handles.handle.readline()
    try:
        value = json.loads(line)
    except ValueError:
        raise DataError(f"{path}: line 1 is not a JSON object; these reviews are JSON Lines") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: line 1 is not a JSON object; these reviews are JSON Lines")
    return value
