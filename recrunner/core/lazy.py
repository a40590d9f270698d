"""Names a package exports, imported on first use (PEP 562): `recrunner` and `recrunner.sweep`
stay light, so the CLI checks its input and starts a sweep's worker server before torch and
RecBole are imported."""

from __future__ import annotations

import importlib


def exports(package: str, table: dict[str, str]):
    """A module `__getattr__` that imports `name` from the module `table[name]` (relative to
    `package`: "run.experiment", ".sweep.space" for a sibling package) when first asked."""

    def __getattr__(name):
        if name in table:
            module = importlib.import_module(package)
            value = getattr(importlib.import_module(f".{table[name]}", package), name)
            setattr(module, name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
