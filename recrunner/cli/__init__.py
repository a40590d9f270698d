"""The command line: parses, calls the library, prints (`recrunner`, `python run_experiments.py`)."""

from .main import main

__all__ = ["main"]
