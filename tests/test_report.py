"""`recrunner report` on a real (and then partial) sweep, and its statistics as pure functions."""

import csv
import json
import re

import numpy as np
import pytest
import yaml

from recrunner.cli import main
from recrunner.report import stats


def test_holm_adjusts_in_order_and_stays_monotone():
    adjusted = stats.holm({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert stats.holm({"x": 0.9, "y": 0.8}) == {"y": 1.0, "x": 1.0}


def test_paired_test_sees_a_consistent_gain_and_not_noise():
    rng = np.random.default_rng(0)
    base = rng.random(400)
    assert stats.paired_test(base + 0.05, base) < 1e-10
    assert stats.paired_test(base, base) == 1.0
    assert stats.paired_test(base + rng.normal(0, 0.1, 400), base) > 0.01
    a = {"users": np.array([3, 1, 2]), "ndcg@10": np.array([0.3, 0.1, 0.2])}
    b = {"users": np.array([1, 2, 4]), "ndcg@10": np.array([1.0, 2.0, 4.0])}
    x, y = stats.pair_by_user(a, b, "ndcg@10")
    assert list(x) == [0.1, 0.2] and list(y) == [1.0, 2.0]


@pytest.fixture
def sweep(workspace, mini_dataset, tmp_path, capsys):
    grid = tmp_path / "compare.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "compare", "models": ["Pop", "BPR"], "datasets": ["ml-100k", mini_dataset], "seeds": [2020, 2021],
        "model_params": {"BPR": {"learning_rate": [0.01, 1e30], "embedding_size": 16}},  # 1e30 diverges: flagged
        "fixed": {"epochs": 3, "user_inter_num_interval": "[10,200]"},
    }))
    main(["--grid", str(grid), "--output", str(workspace.output_dir), "--data-path", str(workspace.data_path),
          "--config-dir", str(workspace.config_dir), "--quiet"])
    capsys.readouterr()
    return workspace.output_dir / "compare"


def test_report_renders_tables_significance_flags_and_charts(sweep, capsys):
    assert main(["report", str(sweep), "--baseline", "Pop"]) == 0
    written = capsys.readouterr().out.split()
    out = sweep / "report"
    assert {p.split("/")[-1] for p in written} >= {"report.md", "summary.csv", "tables.tex", "test_ndcg_at_10.png",
                                                  "valid_ml-100k.png", "valid_ml-mini.png"}
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

    markdown = (out / "report.md").read_text()
    assert "| model | ml-100k | ml-mini |" in markdown and markdown.count("## test ") == 5
    assert "(2)" in markdown
    assert re.search(r"\| \*\*\d\.\d{4}", markdown)  # the best value of a column is bold
    rows = list(csv.DictReader(open(out / "summary.csv")))
    tested = [r for r in rows if r["model"] == "BPR"]
    assert len(tested) == 10 and all(r["p"] and r["p_holm"] for r in tested)  # 5 metrics x 2 datasets
    assert all(float(r["p_holm"]) >= float(r["p"]) for r in tested)
    assert all(r["p"] == "" for r in rows if r["model"] == "Pop")
    assert markdown.count("non-finite training loss") == 4  # 2 datasets x 2 seeds at learning_rate 1e30
    latex = (out / "tables.tex").read_text()
    assert latex.count(r"\begin{tabular}") == 5 and r"\toprule" in latex and r"\textbf{" in latex


def test_report_works_on_a_partial_sweep_and_refuses_an_unknown_baseline(sweep, capsys):
    # as if the sweep had been interrupted before the BPR runs on ml-mini
    for metrics in sweep.glob("ml-mini/BPR/*/metrics.json"):
        metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "interrupted", "test": None}))
    assert main(["report", str(sweep)]) == 0
    capsys.readouterr()
    markdown = (sweep / "report" / "report.md").read_text()
    assert "| BPR | " in markdown and "–" in markdown
    assert main(["report", str(sweep), "--baseline", "SASRec"]) == 2
    assert "baseline 'SASRec' is not in this sweep; models: Pop, BPR" in capsys.readouterr().err
