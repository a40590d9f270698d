"""bench/gpu_check.py, the project's GPU check, in the mode CI can run: a CPU at tiny sizes. On a GPU
the same script measures the main job at full size (BENCHMARKS.md: GPU check)."""

import json
import subprocess
import sys

from .conftest import REPO


def test_the_gpu_check_runs_on_a_cpu_at_tiny_sizes_and_every_promise_holds(tmp_path):
    steps = "resume,main,fast,models,cells"  # `tests` is the suite's own business here
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--out", str(tmp_path), "--steps", steps],
                          cwd=REPO, capture_output=True, text=True, timeout=900)

    assert done.returncode == 0, done.stderr[-2000:]
    table = json.loads((tmp_path / "gpu_check.json").read_text())
    assert table["device"] == "CPU" and table["tiny"] is True
    resumes = {k: v for k, v in table.items() if k.startswith(("default:", "deterministic:"))}
    assert list(resumes) == ["default: again", "default: killed and resumed",
                             "deterministic: again", "deterministic: killed and resumed"]
    assert all(v.startswith("bit-identical") for v in resumes.values()), resumes
    assert table["exact, test metrics"] == "equal to plain RecBole's"
    assert table["exact, batches built on the host, test metrics"] == "equal to batches built on the device"
    assert table["exact, each loss read, test metrics"] == "equal to losses read in groups"
    assert "FAILED" not in json.dumps(table), table
    assert len(table["--fast, s/epoch"].split(", ")) == 3
    assert [k for k in table if k.startswith(("GRU4Rec", "BPR", "LightGCN"))] == [
        f"{model}, batches built on the device, s/epoch{what}" for model in ("GRU4Rec", "BPR", "LightGCN")
        for what in ("", " training")]
    for key in ("plain RecBole", "exact", "BPR, batches built on the device"):  # training within the whole epoch
        whole, training = (table[f"{key}, s/epoch{what}"].split(", ") for what in ("", " training"))
        assert len(whole) == len(training) and all(0 < float(t) <= float(w) for t, w in zip(training, whole))
    assert (tmp_path / "gpu_check.md").read_text().startswith("# GPU check on CPU")
