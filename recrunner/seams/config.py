"""RecBole's Config: what recrunner hides from it and what it sets back.

| RecBole 1.2.1                                          | recrunner                                   |
|--------------------------------------------------------|---------------------------------------------|
| Config reads `--key=value` from sys.argv, top priority | `recbole_argv_cleared`: argv hidden         |
| `_set_default_parameters`: a dataset named ml-100k is  | `honour_data_path`: data_path set back to   |
| always its packaged copy, whatever data_path says      | the folder recrunner resolved               |
| properties/model/xgboost.yaml, lightgbm.yaml: Config   | `recbole_model_defaults`: loaded as the     |
| looks for XGBoost.yaml (never found on Linux)          | lowest layer                                |
"""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def recbole_argv_cleared():
    """RecBole's Config gives `--key=value` in sys.argv top priority; hide ours from it."""
    saved = sys.argv
    sys.argv = saved[:1] if saved else ["recrunner"]
    try:
        yield
    finally:
        sys.argv = saved


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
