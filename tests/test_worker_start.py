"""A --workers cell starts warm: the fork server has imported what a run needs, and is started
before the sweep process imports torch (BENCHMARKS.md: 2.4 s of every cell's process before)."""

import json
import subprocess
import sys

from .conftest import TINY_SASREC

HEAVY = ("torch._dynamo", "sympy", "torch.distributed", "recbole.model", "recbole.trainer", "recbole.evaluator",
         "torch.utils.tensorboard")

CELL_AFTER_PRELOAD = """
import json, sys
from pathlib import Path
import recrunner.sweep.preload
from recrunner.run.experiment import Experiment, Workspace
from recrunner.sweep.worker import Task, run_task

workspace = Workspace(output_dir=Path(sys.argv[1]), data_path=Path(sys.argv[1]), config_dir=Path(sys.argv[2]))
before = set(sys.modules)
result = run_task(Task(cell="c", experiment=Experiment("SASRec", "ml-100k", json.loads(sys.argv[3])),
                       workspace=workspace, threads=1))
print(json.dumps({"status": str(result.status), "imported": sorted(set(sys.modules) - before)}))
"""


def test_a_cell_forked_from_the_preloaded_server_imports_nothing_heavy(tmp_path):
    from .conftest import REPO

    params = {**TINY_SASREC, "epochs": 1}
    out = subprocess.run([sys.executable, "-c", CELL_AFTER_PRELOAD, str(tmp_path), str(REPO / "configs"),
                          json.dumps(params)], capture_output=True, text=True, check=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    assert report["status"] == "ok"
    assert [name for name in report["imported"] if name.startswith(HEAVY)] == []


def test_the_command_line_imports_neither_torch_nor_recbole_before_it_starts_the_server():
    code = "import sys, recrunner.cli; print(sorted(m for m in ('torch', 'recbole') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
