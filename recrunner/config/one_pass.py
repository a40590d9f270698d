"""Models RecBole fits in one pass, and the training settings their numbers do not depend on.

A model class that says `type = ModelType.TRADITIONAL` (Pop, ItemKNN, AsymKNN, EASE, SLIMElastic,
ADMMSLIM, Random) is trained by RecBole's TraditionalTrainer, which sets `epochs` to 1 whatever the
configuration (recbole/trainer/trainer.py). Such a model computes its scores from the training
interactions (counts, similarities, a closed form) and takes no gradient step that matters: its
optimizer steps a placeholder parameter. NCEPLRec is one too, without the mark (a closed form in its
constructor, its loss `return torch.nn.Parameter(torch.zeros(1))`): RecBole's Trainer runs it for
`epochs` epochs of nothing, its validation score the same each time, so early stopping never ends it
(300 epochs, 47 s on ml-100k, best epoch 299: "may be under-trained"); recrunner gives it
TraditionalTrainer (training/families/layers.py), the same metrics after one epoch.

RecBole's gradient-boosted trees (its exlib models: XGBoost, LightGBM) are not torch
models: each "epoch" fits the booster on the whole training set. XGBoost continues from the last
epoch's trees, so its epochs count; LightGBM fits anew (`lgb.train` without `init_model` in RecBole's
LightGBMTrainer), the same booster every epoch, so it is a one-pass model too (`FITTED_ANEW`: 300
fits of one booster at RecBole's defaults, its validation tied each time), and recrunner trains it
one epoch (training/families/trees.py).

So the settings of gradient training (`GRADIENT_SETTINGS`) change nothing in these models' numbers,
and a sweep over them would fit the same model again per value: a grid does not multiply such a
model's cells by them (sweep/grid.py), and a search leaves them out of its space. `eval_step` is not
among them: above 1 it skips the one epoch's validation; nor is `train_batch_size` for Pop
(`READ_ANYWAY`). XGBoost reads none of them but `epochs` and `stopping_step` (its rate is
`xgb_params`' eta, its data the whole training set whatever the batches).

Read from RecBole's source files, without importing RecBole (config/recbole_files.py).
"""

from __future__ import annotations

import functools
import re

from .recbole_files import class_bodies, exlib_models, model_sources, recbole_model_defaults_file

GRADIENT_SETTINGS = frozenset({
    "learning_rate", "learner", "weight_decay", "clip_grad_norm",   # recbole.trainer.Trainer._build_optimizer
    "train_batch_size", "epochs", "stopping_step",                  # one pass over the data, whatever they are
    "gradient_accumulation_steps", "lr_scheduler", "lr_warmup", "lr_interval", "lr_step_size", "lr_gamma",
    "lr_patience", "lr_min",                                        # recrunner's optimizer step and schedules
})
EPOCH_SETTINGS = frozenset({"epochs", "stopping_step"})  # what a booster that continues each epoch reads of them
# ... but for what a one-pass model reads all the same: RecBole 1.2.1's Pop counts an item once per training
# batch (its issue #1844; seams/models.py), so its scores change with train_batch_size
READ_ANYWAY = {"Pop": frozenset({"train_batch_size"})}
_TRADITIONAL = re.compile(r"^\s+type = ModelType\.TRADITIONAL\b", re.M)
# RecBole 1.2.1's LightGBMTrainer._train_at_once: lgb.train(self.params, self.dtrain, self.num_boost_round, self.evals),
# no init_model: each epoch's booster is fitted anew (tests/test_one_pass.py reads the call)
FITTED_ANEW = frozenset({"LightGBM"})
# a loss that is only a fresh parameter of 0: nothing the model holds is trained
_PLACEHOLDER_LOSS = re.compile(r"def calculate_loss\(self, interaction\):\s*\n\s*return torch\.nn\.Parameter\(torch\.zeros\(1\)\)")


@functools.lru_cache(maxsize=None)
def one_pass_models() -> frozenset[str]:
    """The model classes RecBole trains with its TraditionalTrainer, those with a placeholder loss
    (NCEPLRec), read from its model files, and the booster fitted anew each epoch (LightGBM)."""
    found = {name for source in model_sources() for name in one_pass_classes(source)}
    return frozenset(found | (FITTED_ANEW & tree_models()))


def tree_models() -> frozenset[str]:
    """RecBole's gradient-boosted trees (XGBoost, LightGBM: config/recbole_files.py)."""
    return frozenset(exlib_models())


def one_pass_classes(source: str) -> list[str]:
    """The classes of a Python source whose body sets `type = ModelType.TRADITIONAL` or whose loss is a
    placeholder parameter (pure)."""
    return [name for name, body in class_bodies(source) if _TRADITIONAL.search(body) or _PLACEHOLDER_LOSS.search(body)]


def unread_settings(model: str) -> frozenset[str]:
    """The settings `model`'s numbers do not depend on: `GRADIENT_SETTINGS` for a one-pass model, all but
    the epochs' for a booster that continues each epoch (XGBoost), else none."""
    if model in one_pass_models():
        return GRADIENT_SETTINGS - READ_ANYWAY.get(model, frozenset())
    return GRADIENT_SETTINGS - EPOCH_SETTINGS if model in tree_models() else frozenset()


def unread_because(model: str) -> str:
    """Why `model` reads none of its `unread_settings`, to follow "<model> is" (pure over RecBole's source)."""
    return "fitted in one pass" if model in one_pass_models() else "not a torch model (boosted trees)"


def nothing_to_tune(model: str) -> bool:
    """A one-pass model without parameters of its own (Pop, Random): no setting changes its numbers but
    the data's and the seed."""
    return model in one_pass_models() and not recbole_model_defaults_file(model)
