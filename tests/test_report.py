"""`recrunner report` on a real (and then partial) sweep, and its statistics as pure functions."""

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from recrunner import Workspace
from recrunner.cli.main import main
from recrunner.report import stats
from recrunner.run.per_user import load

from .conftest import REPO, write_mini_dataset


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


def test_the_bootstrap_interval_covers_a_known_shift():
    rng = np.random.default_rng(1)
    trials, covered = 200, 0
    for trial in range(trials):
        base = rng.beta(2, 8, size=300)
        candidate = base + 0.03 + rng.normal(0, 0.1, size=300)
        difference, low, high = stats.bootstrap_difference([np.arange(300)], [candidate], [base], resamples=500,
                                                           seed=trial)
        assert low < difference < high and difference == pytest.approx(np.mean(candidate - base))
        covered += low <= 0.03 <= high
    assert 0.90 <= covered / trials <= 0.99  # a 95% interval covers the true shift about 95% of the time


def test_the_bootstrap_counts_a_user_once_however_many_seeds():
    users = [np.array([1, 2, 3]), np.array([3, 2, 1])]
    candidate, baseline = [np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.0, 4.0])], [np.zeros(3), np.zeros(3)]
    # per user, averaged over the two seeds: user 1 (1+4)/2, users 2 and 3 (1+0)/2
    difference, low, high = stats.bootstrap_difference(users, candidate, baseline, resamples=300)
    assert difference == pytest.approx((2.5 + 0.5 + 0.5) / 3) and 0.5 <= low <= high <= 2.5
    assert stats.relative_improvement(np.array([0.3, 0.3]), np.array([0.2, 0.2])) == pytest.approx(0.5)
    assert stats.relative_improvement(np.ones(2), np.zeros(2)) is None
    assert stats.mean_interval(1.0, 2) == pytest.approx(12.7062 / 2 ** 0.5, rel=1e-4)
    assert np.isnan(stats.mean_interval(1.0, 1))


def test_the_paired_test_counts_a_user_once_however_many_seeds():
    rng = np.random.default_rng(3)
    users, base = np.arange(40), np.full(40, 0.5)
    candidate = base + rng.normal(-0.02, 0.1, 40)
    once = stats.user_test([users], [candidate], [base])
    assert stats.user_test([users, users[::-1]], [candidate, candidate[::-1]], [base, base]) == pytest.approx(once)
    assert stats.paired_test(np.tile(candidate, 2), np.tile(base, 2)) < 0.05 < once  # pooled pairs: too sure


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """The sweep the tests below report on, run once for them all (each test gets its own copy)."""
    root = tmp_path_factory.mktemp("report")
    workspace = Workspace(output_dir=root / "runs", data_path=root / "datasets", config_dir=REPO / "configs")
    mini_dataset = write_mini_dataset(workspace.data_path)
    grid = root / "compare.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "compare", "models": ["Pop", "BPR"], "datasets": ["ml-100k", mini_dataset], "seeds": [2020, 2021],
        "model_params": {"BPR": {"learning_rate": [0.01, 1e30], "embedding_size": 16}},  # 1e30 diverges: flagged
        "fixed": {"epochs": 3, "user_inter_num_interval": "[10,200]"},
    }))
    main(["--grid", str(grid), "--output", str(workspace.output_dir), "--data-path", str(workspace.data_path),
          "--config-dir", str(workspace.config_dir), "--quiet"])
    return workspace.output_dir / "compare"


@pytest.fixture
def sweep(finished_sweep, tmp_path, capsys):
    capsys.readouterr()
    return Path(shutil.copytree(finished_sweep, tmp_path / "runs" / "compare"))


def test_a_single_seed_has_no_spread_in_the_tables_not_a_spread_of_zero(tmp_path):
    from recrunner.report.model import Report
    from recrunner.report.render import latex, markdown

    chosen = {("BPR", "d"): [{"test/ndcg@10": 0.25, "seed": 1}],
              ("Pop", "d"): [{"test/ndcg@10": 0.1, "seed": 1}, {"test/ndcg@10": 0.2, "seed": 2}]}
    report = Report(tmp_path, "BPR", ["ndcg@10"], ["BPR", "Pop"], ["d"], chosen, counts={"ok": 3})
    tex = latex(report)
    assert r"\textbf{0.2500} \\" in tex and r"0.1500 $\pm$ 0.0707" in tex  # one seed: no "$\pm$ 0.0000"
    assert "(a value without one: a single seed)" in tex
    assert "| BPR | **0.2500 (1)** |" in markdown(report)
    del chosen[("BPR", "d")]
    assert "single seed" not in latex(report)  # said only where a cell has one seed


def test_chart_files_are_named_so_a_shell_takes_them_unquoted():
    from recrunner.report.plots import file_part

    assert file_part("ndcg@10") == "ndcg_at_10"
    assert file_part("ml-100k [grouping global; ranking valid labeled, test labeled]") == \
        "ml-100k_grouping_global_ranking_valid_labeled_test_labeled"  # a dataset under two protocols


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
    assert "Protocol: ml-100k: ratio [0.8, 0.1, 0.1], random order, per user; full ranking" in latex

    # every column says its protocol; every comparison has an effect size beside its p-value
    assert "### ml-mini" in markdown and "- leakage audit: " in markdown and "**warning:** the split leaks" in markdown
    effect = re.findall(r"\| ndcg@10 \| ml-100k \| BPR \| ([+-]\d\.\d{4}) \[([+-]\d\.\d{4}), ([+-]\d\.\d{4})\] \| "
                        r"([+-][\d.]+%) \|", markdown)
    assert len(effect) == 1 and float(effect[0][1]) <= float(effect[0][0]) <= float(effect[0][2])
    bpr = next(r for r in tested if r["metric"] == "ndcg@10" and r["dataset"] == "ml-100k")
    assert float(bpr["difference"]) == pytest.approx(float(effect[0][0]), abs=1e-4)
    assert float(bpr["relative"]) == pytest.approx(float(bpr["mean"]) / float(
        next(r for r in rows if r["model"] == "Pop" and r["metric"] == "ndcg@10" and r["dataset"] == "ml-100k")["mean"])
        - 1, abs=1e-3)
    chosen = {model: sorted((sweep / "ml-100k" / model).glob(pattern)) for model, pattern in
              (("BPR", "*learning_rate=0.01,*"), ("Pop", "*"))}
    per_user = {model: [load(run / "test_per_user.npz") for run in runs] for model, runs in chosen.items()}
    pairs = [stats.paired_users(a, b, "ndcg@10") for a, b in zip(per_user["BPR"], per_user["Pop"])]
    assert len(pairs) == 2 and float(bpr["p"]) == pytest.approx(stats.user_test(*zip(*pairs)), rel=1e-3, abs=0)
    assert "| BPR | ml-100k | 2 | 3.0 | " in markdown  # training budget: 2 seeds, 3 epochs each
    assert "‡" in markdown  # 3 epochs without early stopping: may be under-trained


def test_tables_can_show_a_confidence_interval_over_seeds(sweep, capsys):
    from recrunner.report.stats import mean_interval

    assert main(["report", str(sweep), "--interval", "ci"]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader(open(sweep / "report" / "summary.csv")))
    pop = next(r for r in rows if r["model"] == "Pop" and r["metric"] == "ndcg@10" and r["dataset"] == "ml-100k")
    assert float(pop["ci95"]) == pytest.approx(mean_interval(float(pop["std"]), 2), rel=1e-4)
    markdown = (sweep / "report" / "report.md").read_text()
    assert "mean ± 95% confidence interval" in markdown and f"± {float(pop['ci95']):.4f} (2)" in markdown
    assert main(["report", str(sweep), "--interval", "sem"]) == 2


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
    for metrics in sweep.glob("*/Pop/*/metrics.json"):  # the first model failed: BPR is the baseline, said
        metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "failed", "test": None}))
    for run in sweep.glob("ml-100k/BPR/*"):  # a third model to compare with (of two, either is as good)
        copy = Path(shutil.copytree(run, sweep / "ml-100k" / "NeuMF" / run.name))
        (copy / "metrics.json").write_text(json.dumps({**json.loads((copy / "metrics.json").read_text()), "model": "NeuMF"}))
    assert main(["report", str(sweep)]) == 0
    assert "note: the baseline is BPR: Pop can be compared on fewer cells" in capsys.readouterr().err
    assert "## significance and effect sizes against BPR" in (sweep / "report" / "report.md").read_text()


def test_the_default_baseline_is_the_first_model_that_can_be_compared():
    from recrunner.report.build import default_baseline

    def row(model, status="ok", **test):
        return {"model": model, "dataset": "d", "status": status, **{f"test/{k}": v for k, v in test.items()}}

    ranked = [row("Pop", **{"ndcg@10": 0.1}), row("BPR", **{"ndcg@10": 0.2})]
    assert default_baseline(["Pop", "BPR"], ranked) == "Pop"  # the sweep's first model, as before
    assert default_baseline(["Pop", "BPR", "NeuMF"], [row("Pop", "failed"), ranked[1], row("NeuMF", **{"ndcg@10": 0.3})]) == "BPR"
    trees = [row("LightGBM", auc=0.75, logloss=0.58)] + [row(m, **{"ndcg@10": 0.1, "mrr@10": 0.1, "hit@10": 0.2})
                                                           for m in ("BPR", "Pop")]
    assert default_baseline(["LightGBM", "BPR", "Pop"], trees) == "BPR"  # other metrics: nothing to compare with
    more = [row("Pop", **{"ndcg@10": 0.1}), row("BPR", **{"ndcg@10": 0.2, "gauc": 0.8}), row("NeuMF", **{"ndcg@10": 0.2})]
    assert default_baseline(["Pop", "BPR", "NeuMF"], more) == "Pop"  # a metric only BPR has compares with nothing
    assert default_baseline(["Pop", "BPR", "NeuMF"], [row("Pop", **{"ndcg@10": 0.1})] + more[1:2]) == "Pop"  # of two, the first


def test_a_p_value_that_underflowed_is_not_written_as_zero():
    from recrunner.report.render import p_text

    assert (p_text(0.0), p_text(4.12e-267), p_text(0.0312)) == ("< 1e-300", "4.12e-267", "0.0312")
