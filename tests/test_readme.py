"""README examples marked `<!-- runs as written: tests/test_readme.py -->` run as written."""

import re
import subprocess
import sys

import pytest

from .conftest import REPO

MARKER = "<!-- runs as written: tests/test_readme.py -->"
BLOCKS = re.findall(re.escape(MARKER) + r"\s*```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_readme_has_marked_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs_as_written(code, tmp_path):
    (tmp_path / "configs").symlink_to(REPO / "configs")  # a checkout's layout: configs/ and datasets/
    (tmp_path / "datasets").mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
