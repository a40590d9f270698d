"""python run_experiments.py --model SASRec --dataset ml-1m   (see README.md; same as `recrunner`)"""

from recrunner.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
