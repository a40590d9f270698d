"""The training state: what last.pth stores and resume restores, field for field.

`CustomTrainer.state` holds it; RecBole's own attribute names (`best_valid_score`, `cur_step`,
`train_loss_dict`, `best_valid_result`) and recrunner's (`best_epoch`, `finished`, ...) read and
write its fields, so RecBole's code, the loop and the callbacks all see one state. A new field is
one line here: saved at the top level of last.pth under its own name, restored by that name, and
its default applies to checkpoints written before it existed (docs/design.md: Checkpoints).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainingState:
    epoch: int | None = None                  # the newest epoch trained (None: none yet)
    finished: bool = False                    # stopped early or reached `epochs`: a resume trains no further
    best_epoch: int | None = None             # the epoch of best.pth (None: no validation improved yet)
    best_valid_score: float | None = None     # its valid_metric (RecBole starts it at -inf / inf)
    best_valid_result: dict | None = None     # all its validation metrics
    initial_valid_result: dict | None = None  # epoch -1: the untrained model's metrics
    cur_step: int = 0                         # validations since the last improvement (RecBole's counter)
    train_loss_dict: dict = field(default_factory=dict)  # epoch -> total training loss
    stopped_early: bool = False               # an early-stopping request ended training (not `epochs`)
    # THE training time of a run: wall time of its epochs (training and validation, epoch -1 included),
    # summed over every process that trained it; metrics.json's train_seconds and seconds_to_best read it
    train_seconds: float = 0.0
    seconds_to_best: float | None = None      # train_seconds at the end of the best epoch (or best step validation)
    # optimizer steps (recrunner.training.loop.steps): counted in every run, acted on with step schedules
    global_step: int = 0                      # optimizer steps taken so far
    best_step: int | None = None              # global_step at the validation best.pth holds
    validated_step: int | None = None         # global_step at the newest validation
    batch_in_epoch: int = 0                   # a mid-epoch last.pth: batches of epoch `epoch + 1` trained
    epoch_loss: float | None = None           # ... and their summed loss

    def to_checkpoint(self) -> dict:
        """The fields as plain data, each under its own name."""
        from .files import to_plain

        values = dataclasses.asdict(self)
        values["best_valid_score"] = None if self.best_valid_score is None else float(self.best_valid_score)
        values["best_valid_result"] = to_plain(dict(self.best_valid_result or {})) or None
        values["initial_valid_result"] = to_plain(self.initial_valid_result)
        values["train_loss_dict"] = to_plain({int(k): v for k, v in self.train_loss_dict.items()})
        return values

    @classmethod
    def from_checkpoint(cls, checkpoint: dict) -> "TrainingState":
        """Read each field by name; a field the checkpoint lacks keeps its default."""
        values: dict[str, Any] = {f.name: checkpoint[f.name] for f in dataclasses.fields(cls) if f.name in checkpoint}
        values["train_loss_dict"] = dict(values.get("train_loss_dict") or {})
        return cls(**values)


def state_attribute(name: str) -> property:
    """A trainer attribute that is a field of `trainer.state` (RecBole assigns several of them)."""

    def get(trainer):
        return getattr(trainer.state, name)

    def set_(trainer, value):
        setattr(trainer.state, name, value)

    return property(get, set_, doc=f"`self.state.{name}` (recrunner.training.checkpoints.state.TrainingState)")


def with_state_attributes(cls):
    """`cls` with every TrainingState field as a property of the same name (`state_attribute`): RecBole's
    code reads and assigns several of them by name, the loop and callbacks read all of them."""
    for item in dataclasses.fields(TrainingState):
        setattr(cls, item.name, state_attribute(item.name))
    return cls
