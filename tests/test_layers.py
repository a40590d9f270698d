"""The package's tree is its architecture: layers that import only the layers below them, no import
cycle between modules or packages, modules, classes and functions of a readable size, and one home
for every file name of the output tree."""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "recrunner"
LAYERS = ("core", "config", "seams", "data", "training", "run", "report", "sweep", "search", "cli")
PUBLIC_FACE = {"recrunner", "recrunner.__main__"}  # the only modules at the top of the package
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 50
MAX_CLASS_LINES = 200


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """Every recrunner module `name` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        for target in targets:
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in MODULES and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_lives_in_a_layer_or_is_the_public_face():
    stray = sorted(n for n in MODULES if n not in PUBLIC_FACE and _layer(n) not in LAYERS)
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"


TRAINING_HOMES = ("logging", "fast", "checkpoints", "distributed", "callbacks", "loop", "families")  # lowest first


def test_training_holds_only_its_homes_and_its_public_face():
    loose = sorted(n for n in MODULES if n.startswith("recrunner.training.") and n.count(".") == 2
                   and n.split(".")[2] not in TRAINING_HOMES)
    assert loose == [], f"modules directly in recrunner/training/ (give each a home): {loose}"


def test_the_homes_of_training_import_only_those_before_them():
    upward = [f"{name} -> {target}" for name, targets in GRAPH.items() if name.startswith("recrunner.training.")
              and name.split(".")[2] in TRAINING_HOMES for target in targets
              if target.startswith("recrunner.training.") and target.count(".") >= 2
              and target.split(".")[2] in TRAINING_HOMES
              and TRAINING_HOMES.index(target.split(".")[2]) > TRAINING_HOMES.index(name.split(".")[2])]
    assert upward == [], "imports of a later home of training/:\n" + "\n".join(sorted(upward))


def test_a_layer_imports_only_the_layers_below_it():
    upward = []
    for name, targets in GRAPH.items():
        if name in PUBLIC_FACE:
            continue
        rank = LAYERS.index(_layer(name))
        for target in targets:
            if target == "recrunner":  # __version__
                continue
            if LAYERS.index(_layer(target)) > rank:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports of a higher layer:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    # a package's __init__ re-exporting its own modules is not a cycle of meaning: leave those edges out
    graph = {n: {t for t in ts if not (MODULES[t].name == "__init__.py" and n.startswith(t + "."))}
             for n, ts in GRAPH.items()}
    assert _cycles(graph) == []


def test_no_import_cycle_between_packages():
    packages = defaultdict(set)
    for name, targets in GRAPH.items():
        source = name.rsplit(".", 1)[0] if MODULES[name].name != "__init__.py" else name
        for target in targets:
            package = target.rsplit(".", 1)[0] if MODULES[target].name != "__init__.py" else target
            if package != source and not source.startswith(package + ".") and not package.startswith(source + "."):
                packages[source].add(package)
    assert _cycles(packages) == []


def test_modules_stay_readable():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert {n: c for n, c in long.items() if c > MAX_MODULE_LINES} == {}


def _functions(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


def test_functions_stay_readable():
    long = {f"{n}.{f}": c for n, p in MODULES.items() for f, c in _functions(p) if c > MAX_FUNCTION_LINES}
    assert long == {}


def test_classes_stay_readable():
    """A class over 200 lines is usually several things: its parts become components it owns."""
    long = {f"{n}.{node.name}": node.end_lineno - node.lineno + 1 for n, p in MODULES.items()
            for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ClassDef)}
    assert {name: lines for name, lines in long.items() if lines > MAX_CLASS_LINES} == {}


# the output tree's names: only recrunner/core/layout.py spells them (its docstring draws the tree)
LAYOUT_NAMES = ("best.pth", "last.pth", "history.jsonl", "test_per_user.npz", "sweep.jsonl", "results.csv",
                "results.md", "metrics.json", "run.log", "config.yaml", "study.journal", "hparams-columns",
                "checkpoints", "mlruns", "events.out.tfevents.0000000000.hparams")


def _spelled_names(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not any(c.isspace() for c in node.value):
            found += [name for name in LAYOUT_NAMES if node.value == name or node.value.endswith("/" + name)
                      or node.value.startswith(name + "/")]
    return found


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != "recrunner.core.layout"))
def test_only_the_layout_spells_a_file_name_of_the_output_tree(name):
    assert _spelled_names(MODULES[name]) == [], f"{name} spells a name of the output tree; use recrunner.core.layout"


def test_the_layout_check_sees_a_spelled_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('best = run_dir / "checkpoints" / "best.pth"\nlog = "resume from last.pth"\n')
    assert sorted(_spelled_names(module)) == ["best.pth", "checkpoints"]
