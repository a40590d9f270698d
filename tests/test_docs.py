"""The documentation: README an entry of at most about 250 lines, a site that builds with
`mkdocs build --strict` (a broken link or a stale reference to a module or file fails it), pasted
output that docs/regenerate.py can bring up to date, examples that run as written, and a design
contract whose modules, events and files exist."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from .conftest import REPO

DOCS = REPO / "docs"
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"recrunner_docs_{name}", DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


references = _load("references")
regenerate = _load("regenerate")


def test_the_readme_is_an_entry():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    text = "\n".join(lines)
    for command in ("bash install.sh", "python run_experiments.py", "python -m pytest -q"):
        assert command in text
    for page in sorted(DOCS.glob("*.md")):
        if page.name not in ("index.md", "benchmarks.md"):
            assert f"(docs/{page.name})" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", [*PAGES, REPO / "BENCHMARKS.md"], ids=[p.name for p in [*PAGES, REPO / "BENCHMARKS.md"]])
def test_no_page_names_a_module_or_file_that_does_not_exist(page):  # BENCHMARKS.md: in the site as a snippet
    assert references.stale_references(page.read_text()) == []


def test_the_reference_check_finds_a_stale_module_a_stale_name_and_a_stale_file():
    text = "`recrunner/trainer.py`, `recrunner.run.record.NoSuchThing`, configs/nowhere.yaml; `recrunner.run.record.RunRecord`"
    assert references.stale_references(text) == ["configs/nowhere.yaml", "recrunner.run.record.NoSuchThing",
                                                 "recrunner/trainer.py"]


def test_every_pasted_output_block_is_regenerated_by_a_known_block_and_every_block_is_used():
    shown = regenerate.markers()
    assert set(shown) == set(regenerate.BLOCKS)
    assert REPO / "README.md" in shown["quick-run"]


def test_the_design_contract_names_events_and_files_that_exist():
    from recrunner.core.layout import HPARAMS_ROW, OutputPaths, RunPaths, SweepPaths
    from recrunner.training.callbacks.base import EVENTS

    design = (DOCS / "design.md").read_text()
    named_events = set(re.findall(r"`(on_[a-z_]+)", design))
    assert named_events and named_events <= set(EVENTS), named_events - set(EVENTS)
    assert set(EVENTS) <= named_events, f"events the contract leaves out: {set(EVENTS) - named_events}"
    run, sweep, output = RunPaths(REPO / "r"), SweepPaths(REPO / "s"), OutputPaths(REPO)
    laid_out = {p.name for p in (run.config, run.log, run.metrics, run.history, run.test_per_user, run.valid_per_user,
                                 run.best, run.last, sweep.record, sweep.results_csv, sweep.results_md, sweep.selection, sweep.asked,
                                 output.hparams_columns)}
    laid_out.add(HPARAMS_ROW)
    for name in re.findall(r"\b[\w.-]+\.(?:pth|jsonl|json|npz|yaml|log|csv|md)\b", design.split("## Seams")[0]):
        pages = {page.name for page in PAGES} | {"BENCHMARKS.md"}
        if name in pages | {"index.json", "overall.yaml", "xgboost.yaml", "lightgbm.yaml", "base.yaml", "epoch-NNNN.pth"}:
            continue
        assert name in laid_out, f"design.md names {name}, which recrunner/core/layout.py does not lay out"


def test_the_documentation_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=QUIET)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "design" / "index.html").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy)
    shutil.copy(REPO / "BENCHMARKS.md", copy)
    for folder in ("recrunner", "configs", "bench", "tests", ".ci"):
        (copy / folder).symlink_to(REPO / folder)
    page = copy / "docs" / "runs.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=copy, capture_output=True, text=True, timeout=300, env=QUIET)
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


MARKER = "<!-- runs as written: tests/test_docs.py -->"
EXAMPLES = [(page.name, code) for page in PAGES
            for code in re.findall(re.escape(MARKER) + r"\s*```python\n(.*?)```", page.read_text(), re.S)]


def test_the_docs_have_marked_examples():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=[f"{p}-{i}" for i, (p, _) in enumerate(EXAMPLES)])
def test_a_documented_example_runs_as_written(code, tmp_path):
    (tmp_path / "configs").symlink_to(REPO / "configs")  # a checkout's layout: configs/ and datasets/
    (tmp_path / "datasets").mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_developers_page_names_every_module_of_every_layer():
    rows = {line.split("|")[1].strip().strip("`/"): line for line in (DOCS / "development.md").read_text().splitlines()
            if line.startswith("| `") and "/` |" in line}
    package = REPO / "recrunner"
    for layer in sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file()):
        modules = sorted(p.relative_to(package / layer).as_posix() for p in (package / layer).rglob("*.py")
                         if p.name != "__init__.py" and "callbacks" not in p.parts)
        assert layer in rows, f"docs/development.md has no row for {layer}/"
        missing = [m for m in modules if f"`{m.split('/')[-1]}`" not in rows[layer]]
        assert missing == [], f"docs/development.md's row for {layer}/ leaves out {missing}"
