"""S3Rec's and RaCT's pre-training stages before the run fine-tunes (`pretrain`): each stage a resumable
sub-run in its own folder, as RecBole would run it alone."""

from __future__ import annotations

import logging
import time

from . import building
from ..training.checkpoints.files import load as load_checkpoint
from ..training.logging.tensorboard import RunWriter
from .preparation import PreparedRun, Workspace
from .record import RunRecord
from .resume import resume_point

logger = logging.getLogger("recrunner")


def pretrain(prepared: PreparedRun, workspace: Workspace, callbacks, record: RunRecord, begun) -> None:
    """The run's pre-training stages, if its model has any; `begun` tells the run it has begun training
    (a --restart's earlier run is set aside then), and the record gets their time."""
    if not prepared.stages:
        return
    begun()  # a pre-training stage is the new run's first training
    started = time.perf_counter()
    _stages(prepared, workspace, callbacks)
    record.pretrain_seconds = round(time.perf_counter() - started, 3)


def _stages(prepared: PreparedRun, workspace: Workspace, callbacks) -> None:
    """S3Rec's and RaCT's pre-training stages, each a resumable sub-run; then the config fine-tunes.

    Stage S lives in <run_dir>/S/ (checkpoints/, TensorBoard events), as RecBole would run it
    alone: seeded, fresh data loaders, `pretrain_epochs` without validation. Its best.pth (the
    newest weights) is the next stage's `pre_model_path`. A finished stage is not trained again.
    """
    from recbole.utils import init_seed

    config, pre_model_path = prepared.config, prepared.config["pre_model_path"]
    for stage in prepared.stages:
        stage_paths = prepared.paths.stage(stage)
        stage_paths.create()
        config["train_stage"], config["pre_model_path"] = stage, pre_model_path
        config["checkpoint_dir"] = str(stage_paths.checkpoints)
        resume = resume_point(stage_paths)
        done = resume is not None and load_checkpoint(resume[0]).get("finished") and stage_paths.best.is_file()
        if done:
            logger.info(f"pre-training stage {stage}: finished before, using {stage_paths.best}")
        else:
            logger.info(f"pre-training stage {stage}: {config['pretrain_epochs']} epochs, no validation")
            init_seed(config["seed"], config["reproducibility"])
            train_data, _, _ = building.loaders(prepared, workspace, evaluation=False)
            writer = RunWriter(stage_paths.run_dir, purge_step=resume.epoch + 1 if resume else None,
                               step_purge=resume.step + 1 if resume else None)
            try:
                trainer = building.trainer(prepared, stage_paths.run_dir, train_data, writer, callbacks)
                if resume:
                    trainer.resume_checkpoint(resume[0])
                trainer.fit(train_data, None, saved=True)
            finally:
                writer.close()
        pre_model_path = str(stage_paths.best)
    config["train_stage"], config["pre_model_path"] = "finetune", pre_model_path
    config["checkpoint_dir"] = str(prepared.paths.checkpoints)
