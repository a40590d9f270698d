"""The one place where recrunner meets RecBole 1.2.1's incompatibilities and global state.

Dependency breakage (pins live in pyproject.toml; `check_environment` turns a violated pin
into a one-line error instead of a crash deep inside RecBole, or silently wrong data):
  numpy >= 2       RecBole's Config assigns removed aliases (np.float_ ...)   -> numpy<2
  pandas >= 3      chained fillna(inplace=True) is a no-op: corrupt features   -> pandas<3
  scipy >= 1.13    dok_matrix._update is gone: graph models cannot be built    -> scipy<1.13
  setuptools >= 82 ray 2.6.3 needs pkg_resources (only the Ray backend)        -> setuptools<82
  torch >= 2.6     torch.load refuses RecBole's pickled checkpoints: recrunner writes its own
                   checkpoints as plain data and loads them with weights_only=True
                   (recrunner/checkpoint.py); RecBole's own torch.load call sites are never used.
  recbole.quick_start imports ray at import time: recrunner never imports it.
  properties/model/xgboost.yaml, lightgbm.yaml: Config looks for XGBoost.yaml, never found on a
                   case-sensitive file system      -> `recbole_model_defaults` (lowest layer)

Global state (each handled by a context manager below, never by editing RecBole):
  Config reads sys.argv                       -> `recbole_argv_cleared`
  Trainer.__init__ opens a cwd-relative TensorBoard writer named after the first log file
                                              -> `recbole_tensorboard_writer`
  init_logger works once per process          -> recrunner/runlog.py never calls it
  Config points data_path at its packaged example whenever the dataset is named ml-100k, so a
  user's own ml-100k folder (with extra files, e.g. KSR's .ent) is silently ignored
                                              -> `honour_data_path`
  importing recbole.model.sequential_recommender (get_model of any sequential model) runs
  torch.autograd.set_detect_anomaly(True) in sine.py, for every later model of the process:
  backward about 1.7x slower              -> `model_class` (key `detect_anomaly`, default off)

Model bugs (fixed on the built model, `repair_model`):
  KSR keeps `relation_Matrix` as float64 (numpy's preload weight) while its parameters are
  float32: every forward fails with "expected m1 and m2 to have the same dtype", in plain RecBole too.

Optional packages:
  KGIN and MCCLK import torch_scatter (scatter_mean, scatter_softmax), which PyPI has only as a
  source package that builds against the installed torch with a compiler: when it is missing,
  `model_class` registers `torch_scatter_fallback`, the same two functions on torch's own
  scatter_reduce, as the module `torch_scatter` (tests/test_model_state.py checks them).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from importlib import metadata

from .errors import EnvironmentProblem

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


@contextlib.contextmanager
def recbole_argv_cleared():
    """RecBole's Config gives `--key=value` in sys.argv top priority; hide ours from it."""
    saved = sys.argv
    sys.argv = saved[:1] if saved else ["recrunner"]
    try:
        yield
    finally:
        sys.argv = saved


@contextlib.contextmanager
def recbole_tensorboard_writer(writer):
    """Make RecBole's Trainer.__init__ take `writer` instead of opening a cwd-relative one."""
    import recbole.trainer.trainer as trainer_module

    original = trainer_module.get_tensorboard
    trainer_module.get_tensorboard = lambda logger: writer
    try:
        yield
    finally:
        trainer_module.get_tensorboard = original


def honour_data_path(config, data_path) -> None:
    """Point RecBole at `data_path/<dataset>` where recrunner found the dataset (Config._set_default_parameters)."""
    import os

    config["data_path"] = os.path.join(str(data_path), config["dataset"])


def recbole_model_defaults(model: str) -> dict:
    """RecBole's yaml for `model` where its own Config cannot find it (the lowest layer).

    Config reads properties/model/<Model>.yaml; XGBoost and LightGBM ship theirs as xgboost.yaml
    and lightgbm.yaml, which a case-sensitive file system never matches: plain RecBole then has
    no xgb_params / lgb_params and fails in training ('NoneType' object ...).
    """
    from pathlib import Path

    import recbole
    import yaml

    folder = Path(recbole.__file__).parent / "properties" / "model"
    if (folder / f"{model}.yaml").is_file():
        return {}
    lower = folder / f"{model.lower()}.yaml"
    return yaml.safe_load(lower.read_text()) or {} if lower.is_file() else {}


def model_class(name: str, detect_anomaly: bool = False) -> type:
    """RecBole's `get_model(name)`, with torch's anomaly detection set as asked afterwards.

    RecBole 1.2.1's sine.py turns anomaly detection on for the whole process when its model
    package is imported, which `get_model` does for every sequential model, not only SINE (and
    recrunner's own model listing does once). It changes no number, but records a traceback in
    every forward op and checks every gradient for NaN in backward (SASRec on Amazon_Beauty:
    0.37 s -> 0.22 s of backward per batch of 2048).
    """
    import torch
    from recbole.utils import get_model

    if name in ("KGIN", "MCCLK"):
        provide_torch_scatter()
    model = get_model(name)
    torch.autograd.set_detect_anomaly(bool(detect_anomaly))
    return model


def repair_model(model):
    """Fix what RecBole 1.2.1 builds wrong for one model (module docstring); returns the model."""
    if type(model).__name__ == "KSR" and model.relation_Matrix.dtype != model.entity_embedding.weight.dtype:
        model.relation_Matrix = model.relation_Matrix.to(model.entity_embedding.weight.dtype)
    return model


def provide_torch_scatter() -> None:
    """Make `import torch_scatter` work: the real package if installed, else our two functions."""
    import importlib.util

    if "torch_scatter" in sys.modules or importlib.util.find_spec("torch_scatter") is not None:
        return
    from . import torch_scatter_fallback

    sys.modules["torch_scatter"] = torch_scatter_fallback
