"""Stale references in the documentation: a module, a name in it, or a file of this repository that
a page names in code (`recrunner/run/record.py`, `recrunner.run.record.RunRecord`, `configs/quick.yaml`)
and that does not exist. Used by the MkDocs hook (docs/hooks.py: `mkdocs build --strict` fails on
one) and by tests/test_docs.py."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO_DIRS = ("recrunner/", "configs/", "bench/", "tests/", "docs/", ".ci/")
MODULE = re.compile(r"\brecrunner(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
PATH = re.compile(r"(?<![\w./<-])(?:%s)[\w./-]*" % "|".join(re.escape(d) for d in REPO_DIRS))


def stale_references(text: str, root: Path = ROOT) -> list[str]:
    """Every module path, dotted name or repository file named in `text`'s code that does not exist."""
    stale = []
    for span in _code(text):
        for path in PATH.findall(span):
            if not _path_exists(root, path):
                stale.append(path)
        for name in MODULE.findall(span):
            if not _name_exists(root, name):
                stale.append(name)
    return sorted(set(stale))


def _code(text: str) -> list[str]:
    """The page's text but program output (```text and ```console blocks show what ran, with its
    paths): prose, inline code and the other fenced blocks."""
    kept, fence, kind = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence, kind = (False, "") if fence else (True, line.lstrip()[3:].strip())
            continue
        if not fence or kind not in ("text", "console"):
            kept.append(line)
    return ["\n".join(kept)]


def _path_exists(root: Path, path: str) -> bool:
    path = path.rstrip(".,:;)")
    if any(mark in path for mark in ("<", "*", "...", "{")):
        return True  # a pattern, not a file
    return (root / path).exists()


def _name_exists(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = root.joinpath(*parts[:cut])
        for candidate in (module.with_suffix(".py"), module / "__init__.py"):
            if candidate.is_file():
                rest = parts[cut:]
                return not rest or rest[0] in _defined(candidate)
    return False


@lru_cache(maxsize=None)
def _defined(path: Path) -> frozenset[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if path.name == "__init__.py":
        names.update(_lazy_exports(path))
        names.update(p.stem for p in path.parent.glob("*.py"))
        names.update(p.name for p in path.parent.iterdir() if p.is_dir())
    return frozenset(names)


def _lazy_exports(path: Path) -> set[str]:
    """The names a package exports on first use (its `_PUBLIC` table, recrunner.core.lazy)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_PUBLIC" for t in node.targets):
            return {k.value for k in getattr(node.value, "keys", []) if isinstance(k, ast.Constant)}
    return set()
