"""A prepared run's data loaders and its trainer, each as RecBole builds them: the loaders with what fast
mode changes in them (training/fast/data.py), the model seeded as RecBole seeds it, then the trainer with
the run's callbacks. The run (experiment.py), a data-parallel run's other processes and each pre-training
stage (pretraining.py) build theirs here.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..config.params import setting
from ..data.cache import load_data
from ..seams.models import built_model, model_class as recbole_model_class, ready_model
from ..training.fast.plan import loader_settings
from .distributed import reseed_process
from .preparation import PreparedRun, Workspace

logger = logging.getLogger("recrunner")


def loaders(prepared: PreparedRun, workspace: Workspace, evaluation: bool = True):
    """The loaders, with what fast mode changes in them (training/fast/data.py; a pre-training stage has no evaluation)."""
    config, one_pass = prepared.config, getattr(prepared.trainer_class, "single_pass", False)
    return load_data(config, workspace.cache_dir if setting(config, "data_cache") else None,
                     **loader_settings(config, one_pass, evaluation))


def trainer(prepared: PreparedRun, run_dir: Path, train_data, writer, callbacks):
    """The model (seeded as RecBole seeds it) and its trainer, with the run's callbacks."""
    from recbole.utils import init_seed

    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    model_class = recbole_model_class(config["model"], detect_anomaly=setting(config, "detect_anomaly"))
    model = ready_model(built_model(model_class, config, train_data._dataset).to(config["device"]), config)
    logger.info(model, extra={"file_only": True})
    trainer = prepared.trainer_class(config, model, writer=writer, callbacks=callbacks, hparams=prepared.hparams,
                                     run_dir=run_dir)
    reseed_process(config)  # a data-parallel run's processes: one model, then each its own random stream
    return trainer
