"""Dependency versions RecBole 1.2.1 cannot work with, checked at start-up.

| RecBole 1.2.1                                    | with              | what happens                      |
|--------------------------------------------------|-------------------|-----------------------------------|
| config/configurator.py assigns np.float = np.float_ | numpy >= 2     | every Config() raises             |
| dataset.py chained fillna(inplace=True)          | pandas >= 3       | missing features silently corrupt |
| dok_matrix._update in LightGCN, NGCF, NCL...     | scipy >= 1.13     | graph models cannot be built      |
| quick_start imports ray 2.6.3 (pkg_resources)    | setuptools >= 82  | never imported by recrunner       |
| torch.load of its pickled checkpoints            | torch >= 2.6      | recrunner writes its own (checkpoint.py) |

The pins live in pyproject.toml; `check_environment` turns a violated one into a one-line error
instead of a crash deep inside RecBole, or silently wrong data.
"""

from __future__ import annotations

import contextlib
import warnings
from importlib import metadata

from ..errors import EnvironmentProblem

# (distribution, first incompatible version, why, fix)
_UPPER_BOUNDS = [
    ("numpy", (2,), "RecBole 1.2.1's Config uses aliases numpy 2 removed", "pip install 'numpy<2'"),
    ("pandas", (3,), "RecBole 1.2.1 silently corrupts missing features under pandas 3", "pip install 'pandas<3'"),
    ("scipy", (1, 13), "RecBole 1.2.1's graph models (LightGCN, NGCF, NCL...) cannot be built", "pip install 'scipy<1.13'"),
]


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece else ""
        if not digits or not piece[0].isdigit():
            break
        parts.append(int(digits))
    return tuple(parts)


def incompatibilities(installed: dict[str, str]) -> list[str]:
    """Messages for each installed version RecBole 1.2.1 cannot work with (pure function)."""
    problems = []
    for name, bound, why, fix in _UPPER_BOUNDS:
        version = installed.get(name)
        if version is not None and _version_tuple(version) >= bound:
            problems.append(f"{name} {version} is installed but {why}: {fix}")
    return problems


def installed_versions() -> dict[str, str]:
    versions = {}
    for name, *_ in _UPPER_BOUNDS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def check_environment() -> None:
    problems = incompatibilities(installed_versions())
    if problems:
        raise EnvironmentProblem(problems[0])


def quiet_known_warnings() -> None:
    """Silence warnings RecBole emits on every run that carry no information for the user."""
    # pandas 2.x announces the pandas-3 behaviour of RecBole's chained fillna (pinned away above)
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*chained assignment.*")
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*Downcasting object dtype.*")
    # trainer.py builds torch.cuda.amp.GradScaler every epoch (deprecated name, same behaviour)
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*GradScaler.*deprecated.*")
