"""The packages RecBole 1.2.1 runs on: what today's releases removed, given back; what cannot be.

RecBole 1.2.1 (2023) is the newest release. recrunner installs it without its own requirements
(install.sh: `pip install --no-deps recbole==1.2.1`), because it pins `ray<=2.6.3`, which has no
wheel for Python 3.12 or 3.13; pyproject.toml lists the packages RecBole imports instead.

| RecBole 1.2.1                                       | with            | recrunner                                 |
|-----------------------------------------------------|-----------------|-------------------------------------------|
| config/configurator.py assigns np.float = np.float_, | numpy >= 2     | `restore_removed_names` gives numpy the   |
| np.complex_, np.unicode_ (every Config() raises)    |                 | three aliases before RecBole runs         |
| dok_matrix._update in LightGCN, NGCF, GCMC,         | scipy >= 1.13   | `restore_removed_names` gives dok_matrix  |
| SpectralCF, NCL, KGIN, MCCLK (cannot be built)      |                 | back `_update` (a dict update)            |
| dataset.py chained fillna(inplace=True),            | pandas >= 3     | refused: `check_environment` names the    |
| Series.agg(len) on token_seq features               |                 | fix (missing features silently corrupt)   |
| quick_start imports ray 2.6.3 (pkg_resources)       | Python >= 3.12  | never imported; the Ray backend uses a    |
|                                                     |                 | current Ray (extra `ray`)                 |
| torch.load of its pickled checkpoints               | torch >= 2.6    | recrunner writes its own (checkpoint.py)  |

pandas 3 is not shimmed: besides the two call sites above, its default string dtype changes what
every token column holds, and a silent difference in the features is worse than a refusal.
Each shim has a test in tests/test_compat.py that fails without it.
"""

from __future__ import annotations

import contextlib
import warnings
from importlib import metadata

from ..core.errors import EnvironmentProblem

RECBOLE_VERSION = "1.2.1"

# (distribution, first incompatible version, why, fix)
_UPPER_BOUNDS = [
    ("pandas", (3,), "RecBole 1.2.1 silently corrupts missing features under pandas 3", "pip install 'pandas<3'"),
]

# numpy 2 removed these; RecBole's Config.compatibility_settings reads them to set np.float & co.
_NUMPY_ALIASES = {"float_": "float64", "complex_": "complex128", "unicode_": "str_"}


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
    recbole = installed.get("recbole")
    if recbole is None:
        problems.append(f"RecBole is not installed: run `bash install.sh` in recrunner's folder, "
                        f"or `pip install --no-deps recbole=={RECBOLE_VERSION}`")
    elif recbole != RECBOLE_VERSION:
        problems.append(f"recbole {recbole} is installed but recrunner is made for {RECBOLE_VERSION}: "
                        f"pip install --no-deps recbole=={RECBOLE_VERSION}")
    for name, bound, why, fix in _UPPER_BOUNDS:
        version = installed.get(name)
        if version is not None and _version_tuple(version) >= bound:
            problems.append(f"{name} {version} is installed but {why}: {fix}")
    return problems


def installed_versions() -> dict[str, str]:
    versions = {}
    for name in ("recbole", *(bound[0] for bound in _UPPER_BOUNDS)):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def check_environment() -> None:
    problems = incompatibilities(installed_versions())
    if problems:
        raise EnvironmentProblem(problems[0])


def restore_removed_names() -> None:
    """Give numpy >= 2 and scipy >= 1.13 back the names RecBole 1.2.1 uses (idempotent).

    numpy: `float_`, `complex_`, `unicode_` (Config assigns np.float = np.float_ and so on, which
    RecBole's metrics and Interaction then use). scipy: `dok_matrix._update`, which the graph
    models call with a {(row, col): value} dict; since scipy 1.13 the entries live in `_dict`.
    """
    import numpy as np
    from scipy.sparse import dok_matrix

    with warnings.catch_warnings():  # numpy 1.x still has them (some with a DeprecationWarning)
        warnings.simplefilter("ignore")
        for alias, name in _NUMPY_ALIASES.items():
            if not hasattr(np, alias):
                setattr(np, alias, getattr(np, name))
    if not hasattr(dok_matrix, "_update"):
        dok_matrix._update = _dok_update


def _dok_update(self, entries) -> None:
    self._dict.update(entries)


def prepare_environment() -> None:
    """What every process does before RecBole runs: check, restore, quiet, and make CUDA queries start
    nothing (seams/device.py) (idempotent).

    Called by `prepare` (every run, in every worker), by the command line, and when
    recrunner.training.loop.trainer is imported, for scripts that build RecBole's Config themselves.
    """
    from .device import cuda_queries_by_nvml

    check_environment()
    restore_removed_names()
    quiet_known_warnings()
    cuda_queries_by_nvml()


def quiet_known_warnings() -> None:
    """Silence warnings RecBole emits on every run that carry no information for the user."""
    # pandas 2.x announces the pandas-3 behaviour of RecBole's chained fillna (pandas 3 is refused above)
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*chained assignment.*")
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*Downcasting object dtype.*")
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*Series\.agg cannot aggregate.*")
    # trainer.py builds torch.cuda.amp.GradScaler every epoch (deprecated name, same behaviour)
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*GradScaler.*deprecated.*")
    # LightGCN, NGCF, SGL, KGAT and other graph models build their matrices with torch.sparse.FloatTensor
    warnings.filterwarnings("ignore", category=UserWarning, message=r"torch\.sparse\.SparseTensor\(indices, values, shape")
    # XGBoostTrainer._train_at_once passes xgb.train its evals by position (xgboost >= 2 asks for a keyword)
    warnings.filterwarnings("ignore", category=FutureWarning, message=r"Pass `evals` as keyword args")
