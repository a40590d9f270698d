"""`recrunner data import` on a large CSV: time and peak memory, against the usual conversion script.

A synthetic CSV (bench/make_synthetic.py --csv: `uid,iid,stars,ts`, shaped like ml-20m) is
converted to RecBole atomic files two ways, each in a fresh process whose peak resident memory is
read from the kernel (getrusage of the child):
- recrunner: `recrunner data import FILE --name ... --user uid --item iid --rating stars --time ts`,
  which streams the file in chunks of a million rows;
- by hand: what conversion scripts do (RecSysDatasets' and most users'): `pandas.read_csv` of the
  whole file, rename the columns, `to_csv` with a typed header.
Both outputs are checked to hold the same rows. Prints time, rows per second and peak memory, and
the ratios.

    python bench/bench_import.py [--interactions 20000000] [--dates] [--work /tmp/bench-import]
"""

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BY_HAND = """
import sys, pandas as pd
frame = pd.read_csv(sys.argv[1])
frame.columns = ["user_id:token", "item_id:token", "rating:float", "timestamp:float"]
frame.to_csv(sys.argv[2], sep="\\t", index=False)
"""


WATCH = """
import resource, subprocess, sys, time
started = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measured(command: list[str]) -> tuple[float, float]:
    """(seconds, peak resident MB) of `command`, run under a fresh watcher whose only child it is."""
    out = subprocess.run([sys.executable, "-c", WATCH, *command], check=True, capture_output=True, text=True)
    seconds, peak_kb = out.stdout.split()
    return float(seconds), int(peak_kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interactions", type=int, default=20_000_000)
    parser.add_argument("--dates", action="store_true", help="times as ISO 8601 dates in the CSV")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-import"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    csv = args.work / f"synth-{args.interactions}{'-dates' if args.dates else ''}.csv"
    if not csv.is_file():
        subprocess.run([sys.executable, str(REPO / "bench" / "make_synthetic.py"), "--interactions",
                        str(args.interactions), "--csv", str(csv), *(["--dates"] if args.dates else [])], check=True)
    size = csv.stat().st_size / 1e6
    ours = measured([sys.executable, "-m", "recrunner", "data", "import", str(csv), "--name", "synth",
                     "--data-path", str(args.work / "data"), "--user", "uid", "--item", "iid", "--rating", "stars",
                     "--time", "ts", "--force"])
    hand = measured([sys.executable, "-c", BY_HAND, str(csv), str(args.work / "by-hand.inter")])
    ours_rows = sum(1 for _ in open(args.work / "data" / "synth" / "synth.inter")) - 1
    hand_rows = sum(1 for _ in open(args.work / "by-hand.inter")) - 1
    assert ours_rows == hand_rows == args.interactions, (ours_rows, hand_rows)
    print(f"CSV: {args.interactions:,} interactions, {size:.0f} MB{', ISO 8601 dates' if args.dates else ''}")
    print(f"{'':<34} {'time':>9} {'rows/s':>12} {'peak memory':>12}")
    for name, (seconds, peak) in (("recrunner data import (chunked)", ours), ("pandas whole file (by hand)", hand)):
        print(f"{name:<34} {seconds:>8.1f}s {args.interactions / seconds:>12,.0f} {peak:>9,.0f} MB")
    print(f"recrunner / by hand: time {ours[0] / hand[0]:.2f}x, peak memory {ours[1] / hand[1]:.2f}x")


if __name__ == "__main__":
    main()
