import sys

from .cli.main import main

code = main()
_run = sys.modules.get("recrunner.cli.run")
if _run is not None and _run.EXIT_AT_ONCE:  # under torchrun: no interpreter teardown (cli/run.py)
    _run.exit_at_once(code)
raise SystemExit(code)
