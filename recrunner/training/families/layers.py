"""Trainer families: RecBole's model trainers, each run under recrunner's one loop.

RecBole picks a trainer per model (`recbole.utils.get_trainer`). recrunner keeps every one of
them, layered so that `CustomTrainer.fit` is the loop and the model trainer keeps what it adds:

| RecBole trainer                      | what it adds                     | how it runs here                       |
|--------------------------------------|----------------------------------|----------------------------------------|
| Trainer                              | -                                | CustomTrainer                          |
| KGTrainer, KGATTrainer, MKRTrainer,  | its own `_train_epoch` (KG and   | (CustomTrainer, base): the base's      |
| RecVAETrainer, TraditionalTrainer    | recommender steps, one epoch...) | epoch inside recrunner's loop          |
| NCLTrainer                           | `fit` + E-step every m_step      | (NCLLayer, CustomTrainer, NCLTrainer): |
|                                      | epochs                           | the E-step at each epoch's start; its  |
|                                      |                                  | clusters are checkpointed state        |
| S3RecTrainer, RaCTTrainer            | `fit` dispatching on train_stage | (PretrainLayer, CustomTrainer, base):  |
|                                      | to a validation-free pretrain    | a pre-training stage is the same loop  |
|                                      | loop                             | without validation; stages are chained |
|                                      |                                  | by recrunner.stages                    |
| DecisionTreeTrainer (XGBoost,        | not a torch trainer at all       | recrunner.training.families.trees.TreeTrainer            |
| LightGBM)                            |                                  |                                        |

A layer overrides only the trainer's role-named hooks (`epoch_start`, `is_validating`...), never
`fit`. A RecBole trainer that replaces `fit` and has no layer here is refused by name. NCEPLRec,
fitted in its constructor with a placeholder loss but not marked TRADITIONAL, gets TraditionalTrainer
too (recrunner.config.one_pass): RecBole's Trainer runs it for `epochs` epochs of nothing, and its
equal validation scores never stop it early.
"""

from __future__ import annotations

import shutil

from ...config.one_pass import one_pass_models


class NCLLayer:
    """NCLTrainer's E-step (k-means over the embeddings, faiss) before every m_step-th epoch."""

    extra_state_names = ("user_centroids", "user_2cluster", "item_centroids", "item_2cluster")

    def epoch_start(self, epoch_idx):
        super().epoch_start(epoch_idx)
        if epoch_idx % self.num_m_step == 0:
            self.logger.info("Running E-step ! ")
            self.model.e_step()  # faiss-cpu runs NCL's Kmeans(gpu=True) on the CPU when it has no GPU


class PretrainLayer:
    """A pre-training stage (S3Rec `pretrain`, RaCT `actor_pretrain` / `critic_pretrain`).

    As RecBole's `PretrainTrainer.pretrain`: `pretrain_epochs` epochs, no validation, the newest
    weights kept (best.pth, which holds `state_dict` as RecBole's fine-tuning reads it) and a copy
    `{model}-{dataset}-{epoch}.pth` every `save_step` epochs. In the fine-tuning stage the layer
    does nothing: it is Trainer.fit, as in RecBole.
    """

    def __init__(self, config, model, **kwargs):
        super().__init__(config, model, **kwargs)
        if self.pretraining:
            self.epochs = self.pretrain_epochs

    @property
    def pretraining(self) -> bool:
        return self.model.train_stage != "finetune"

    def is_validating(self, valid_data) -> bool:
        return not self.pretraining and super().is_validating(valid_data)

    def save_training_state(self, epoch):
        super().save_training_state(epoch)
        if self.pretraining and (epoch + 1) % self.save_step == 0:
            name = f"{self.config['model']}-{self.config['dataset']}-{epoch + 1}.pth"
            shutil.copyfile(self.checkpoints.best, self.checkpoints.best.parent / name)

    @property
    def reports_hparams(self) -> bool:
        return not self.pretraining  # a stage is part of its run, not a row of its own


LAYERS = {"NCLTrainer": NCLLayer, "S3RecTrainer": PretrainLayer, "RaCTTrainer": PretrainLayer}

# what a layerable trainer must leave to recrunner's loop
_LOOP_METHODS = ("fit", "evaluate", "_valid_epoch", "_save_checkpoint", "resume_checkpoint")


def trainer_class(model_name: str, model_type, custom_trainer: type) -> type:
    """The trainer class that runs `model_name` (see the table above); ValueError if none can."""
    from recbole.trainer import Trainer
    from recbole.utils import get_trainer

    base = get_trainer(model_type, model_name)
    if base is Trainer and model_name in one_pass_models():  # NCEPLRec: fitted while built (module docstring)
        from recbole.trainer import TraditionalTrainer

        base = TraditionalTrainer
    if base is Trainer:
        return custom_trainer
    if base.__name__ in LAYERS:
        return type(f"Custom{base.__name__}", (LAYERS[base.__name__], custom_trainer, base), _own_epoch(base))
    if not issubclass(base, Trainer):
        from .trees import TreeTrainer

        return TreeTrainer.for_library(base, single_pass=model_name in one_pass_models())
    if all(getattr(base, name) is getattr(Trainer, name) for name in _LOOP_METHODS):
        one_pass = base.__name__ == "TraditionalTrainer"  # epochs = 1 whatever the config: nothing to converge
        return type(f"Custom{base.__name__}", (custom_trainer, base), {"single_pass": one_pass} if one_pass else {}
                    | _own_epoch(base))
    raise ValueError(f"{model_name} trains with RecBole's {base.__name__}, which replaces the training loop "
                     "itself and has no layer in recrunner.training.families.layers")


def _own_epoch(base) -> dict:
    """The base's own `_train_epoch`, where it has one, ahead of CustomTrainer's (loop/epoch.py): the
    base's epoch runs, and RecBole's loop inside it (`super()._train_epoch`)."""
    from recbole.trainer import Trainer

    return {"_train_epoch": base._train_epoch} if base._train_epoch is not Trainer._train_epoch else {}


# pre-training stages, in order; the run itself is the last stage, `finetune`
PRETRAINING_STAGES = {"S3Rec": ("pretrain",), "RaCT": ("actor_pretrain", "critic_pretrain")}


def pretraining_stages(model_name: str, train_stage) -> tuple[str, ...]:
    """The stages to pre-train before fine-tuning, from `train_stage` on (pure).

    RecBole runs one stage per command and the user passes each stage's file to the next
    (`pre_model_path`); recrunner runs them all in one run. `train_stage: finetune` (with the
    user's own `pre_model_path`) pre-trains nothing.
    """
    stages = PRETRAINING_STAGES.get(model_name, ())
    if not stages or train_stage == "finetune":
        return ()
    if train_stage not in stages:
        raise ValueError(f"train_stage {train_stage!r} is not a stage of {model_name}; "
                         f"its stages: {', '.join((*stages, 'finetune'))}")
    return stages[stages.index(train_stage):]
