"""python run_experiments.py --model SASRec --dataset ml-1m   (see README.md; same as `recrunner`)"""

import sys

try:
    from recrunner.cli.main import main
except ImportError as exc:  # run before `bash install.sh`: one line, not a traceback
    print(f"recrunner: error: {exc.name or exc} is not installed; set up first with `bash install.sh` "
          "(README: Set up, run, test)", file=sys.stderr)
    raise SystemExit(2) from None

if __name__ == "__main__":
    raise SystemExit(main())
