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

So the settings of gradient training (`GRADIENT_SETTINGS`) change nothing in these models' numbers,
and a sweep over them would fit the same model again per value: a grid does not multiply such a
model's cells by them (sweep/grid.py), and a search leaves them out of its space. `eval_step` is not
among them: above 1 it skips the one epoch's validation; nor is `train_batch_size` for Pop
(`READ_ANYWAY`).

Read from RecBole's source files, without importing RecBole (as config/checks.py reads its YAML).
"""

from __future__ import annotations

import functools
import re

from .checks import recbole_dir, recbole_model_defaults_file

GRADIENT_SETTINGS = frozenset({
    "learning_rate", "learner", "weight_decay", "clip_grad_norm",   # recbole.trainer.Trainer._build_optimizer
    "train_batch_size", "epochs", "stopping_step",                  # one pass over the data, whatever they are
    "gradient_accumulation_steps", "lr_scheduler", "lr_warmup", "lr_interval", "lr_step_size", "lr_gamma",
    "lr_patience", "lr_min",                                        # recrunner's optimizer step and schedules
})
# ... but for what a one-pass model reads all the same: RecBole 1.2.1's Pop counts an item once per training
# batch (its issue #1844; seams/models.py), so its scores change with train_batch_size
READ_ANYWAY = {"Pop": frozenset({"train_batch_size"})}
_CLASS = re.compile(r"^class (\w+)\b", re.M)
_TRADITIONAL = re.compile(r"^\s+type = ModelType\.TRADITIONAL\b", re.M)
# a loss that is only a fresh parameter of 0: nothing the model holds is trained
_PLACEHOLDER_LOSS = re.compile(r"def calculate_loss\(self, interaction\):\s*\n\s*return torch\.nn\.Parameter\(torch\.zeros\(1\)\)")


@functools.lru_cache(maxsize=None)
def one_pass_models() -> frozenset[str]:
    """The model classes RecBole trains with its TraditionalTrainer, and those with a placeholder loss
    (NCEPLRec), read from its model files."""
    recbole = recbole_dir()
    if recbole is None:
        return frozenset()
    found = set()
    for path in sorted((recbole / "model").rglob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
        except OSError:
            continue
        if "ModelType.TRADITIONAL" in source or "torch.nn.Parameter(torch.zeros(1))" in source:
            found.update(one_pass_classes(source))
    return frozenset(found)


def one_pass_classes(source: str) -> list[str]:
    """The classes of a Python source whose body sets `type = ModelType.TRADITIONAL` or whose loss is a
    placeholder parameter (pure)."""
    heads = list(_CLASS.finditer(source))
    ends = [head.start() for head in heads[1:]] + [len(source)]
    return [head[1] for head, end in zip(heads, ends)
            if _TRADITIONAL.search(source, head.end(), end) or _PLACEHOLDER_LOSS.search(source, head.end(), end)]


def unread_settings(model: str) -> frozenset[str]:
    """The settings `model`'s numbers do not depend on: `GRADIENT_SETTINGS` for a one-pass model, else none."""
    return GRADIENT_SETTINGS - READ_ANYWAY.get(model, frozenset()) if model in one_pass_models() else frozenset()


def nothing_to_tune(model: str) -> bool:
    """A one-pass model without parameters of its own (Pop, Random): no setting changes its numbers but
    the data's and the seed."""
    return model in one_pass_models() and not recbole_model_defaults_file(model)
