"""Write a deterministic synthetic dataset of N interactions in RecBole's atomic format.

    python bench/make_synthetic.py --interactions 5000000 --out datasets/   # -> datasets/synth-5M/synth-5M.inter
    python bench/make_synthetic.py --interactions 20000000 --csv /tmp/synth-20M.csv  # a CSV to import (bench_import.py)

Shaped like the public benchmarks it stands in for (ml-20m, Amazon Books), at any size:
- users: N / 150 of them (ml-20m: 138k users for 20M interactions), each with a session length
  drawn from a log-normal distribution (median 60), at least 5, scaled so the lengths sum to N;
- items: N / 750 of them (ml-20m: 27k), popularity a power law (Zipf, exponent 1 over rank + 10),
  the popular ones spread over the id range rather than first;
- time: each user starts at a uniform time within a year and interacts at exponential gaps
  (mean an hour), so every user's rows are in time order and users overlap in time;
- rating: 1-5, skewed to 4 like MovieLens.
The same --interactions and --seed always give the same file (numpy's PCG64).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

YEAR = 365 * 24 * 3600


def synthesize(interactions: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The columns (user, item, rating, timestamp), rows grouped by user in time order."""
    rng = np.random.default_rng(seed)
    users = max(2, interactions // 150)
    items = max(10, interactions // 750)
    share = rng.lognormal(mean=np.log(60), sigma=1.0, size=users)
    share = share / share.sum() * (interactions - 5 * users)  # everyone has 5; the rest by log-normal weight
    lengths = 5 + np.floor(share).astype(np.int64)
    remainder = interactions - lengths.sum()
    lengths[np.argsort(np.floor(share) - share)[:remainder]] += 1  # the largest fractions round up
    user = np.repeat(np.arange(users), lengths)
    popularity = 1.0 / (np.arange(items) + 10.0)
    cdf = np.cumsum(popularity / popularity.sum())
    by_rank = rng.permutation(items)  # rank r is item by_rank[r]
    item = by_rank[np.minimum(np.searchsorted(cdf, rng.random(len(user))), items - 1)]
    starts = rng.uniform(0, YEAR, size=users)
    gaps = rng.exponential(3600.0, size=len(user))
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    elapsed = np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[first] - gaps[first], lengths)
    timestamp = np.floor(np.repeat(starts, lengths) + elapsed).astype(np.int64)
    rating = rng.choice(np.arange(1, 6), size=len(user), p=[0.06, 0.11, 0.27, 0.35, 0.21])
    return {"user": user, "item": item, "rating": rating, "timestamp": timestamp}


def name_for(interactions: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1000)):
        if interactions % size == 0:
            return f"synth-{interactions // size}{unit}"
    return f"synth-{interactions}"


def write(columns: dict[str, np.ndarray], folder: Path, name: str, chunk: int = 1_000_000) -> Path:
    folder = Path(folder) / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.inter"
    with open(path, "w") as f:
        f.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        for start in range(0, len(columns["user"]), chunk):
            rows = np.stack([columns[c][start:start + chunk] for c in ("user", "item", "rating", "timestamp")], axis=1)
            np.savetxt(f, rows, fmt="%d", delimiter="\t")
    return path


def write_csv(columns: dict[str, np.ndarray], path: Path, chunk: int = 1_000_000, dates: bool = False) -> Path:
    """The same interactions as a researcher's CSV: a header `uid,iid,stars,ts`, other column
    names than RecBole's; `dates`: ts as ISO 8601 dates instead of seconds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("uid,iid,stars,ts\n")
        for start in range(0, len(columns["user"]), chunk):
            part = {c: columns[c][start:start + chunk] for c in ("user", "item", "rating", "timestamp")}
            if dates:
                ts = np.datetime_as_string(part["timestamp"].astype("datetime64[s]"), unit="s")
                lines = [f"{u},{i},{r},{t}Z" for u, i, r, t in zip(part["user"], part["item"], part["rating"], ts)]
                f.write("\n".join(lines) + "\n")
            else:
                np.savetxt(f, np.stack(list(part.values()), axis=1), fmt="%d", delimiter=",")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interactions", type=int, required=True)
    parser.add_argument("--out", type=Path, default=Path("datasets"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, metavar="FILE", help="write a CSV to import instead")
    parser.add_argument("--dates", action="store_true", help="--csv: times as ISO 8601 dates")
    args = parser.parse_args()
    if args.csv:
        path = write_csv(synthesize(args.interactions, args.seed), args.csv, dates=args.dates)
        print(f"{path}: {args.interactions:,} interactions, {path.stat().st_size / 1e6:.0f} MB")
        return
    name = name_for(args.interactions)
    path = write(synthesize(args.interactions, args.seed), args.out, name)
    print(f"{path}: {args.interactions:,} interactions, {path.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
