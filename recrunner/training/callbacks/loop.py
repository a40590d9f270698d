"""LoopView: what a callback sees of the loop. Read-only, and all it gets besides `control`.

Callbacks never hold the trainer: they read the training state and the facts of this fit here,
and ask for actions through `TrainerControl` (stop, save, fail). Two things are handed over
because a callback's job is to act on them: `optimizer` (the LR schedule sets its rates) and
`writer` (the TensorBoard logger writes the run's scalars).
"""

from __future__ import annotations


def _from_state(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._trainer.state, name), doc=doc)


def _from_trainer(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._trainer, name), doc=doc)


class LoopView:
    """The loop of one fit, as callbacks see it (`on_*(self, loop, control, ...)`)."""

    __slots__ = ("_trainer",)

    def __init__(self, trainer):
        self._trainer = trainer

    @property
    def state(self):
        """The TrainingState dataclass that last.pth saves whole (recrunner.training.checkpoints.state)."""
        return self._trainer.state

    epoch = _from_state("epoch", "The epoch training now, or the newest trained (None before the first).")
    best_epoch = _from_state("best_epoch", "The epoch of best.pth (None: no validation improved yet).")
    best_valid_score = _from_state("best_valid_score", "valid_metric at best_epoch.")
    best_valid_result = _from_state("best_valid_result", "Every validation metric at best_epoch.")
    initial_valid_result = _from_state("initial_valid_result", "Epoch -1: the untrained model's metrics.")
    global_step = _from_state("global_step", "Optimizer steps taken so far (recrunner.training.loop.steps).")
    best_step = _from_state("best_step", "global_step at the validation best.pth holds.")

    config = _from_trainer("config", "RecBole's resolved Config of the run (read it, never change it).")
    hparams = _from_trainer("hparams", "The run's identifying parameters: its HParams row.")
    epochs = _from_trainer("epochs", "The cap on epochs (`epochs`).")
    start_epoch = _from_trainer("start_epoch", "The first epoch this fit trains (> 0: a resumed run).")
    eval_step = _from_trainer("eval_step", "Validation every eval_step epochs (0: none).")
    start_batch = property(lambda self: self._trainer.steps.start_batch,
                           doc="The batch of start_epoch this fit starts at (> 0: resumed within it).")
    eval_every_steps = property(lambda self: self._trainer.steps.eval_every,
                                doc="Validation every N optimizer steps (None: every eval_step epochs).")
    batches_per_epoch = _from_trainer("batches_per_epoch", "Training batches per epoch.")
    steps_per_epoch = _from_trainer("steps_per_epoch", "Optimizer steps per epoch (batches / accumulation).")
    non_finite_batch = property(lambda self: self._trainer.steps.epoch.non_finite_batch,
                                doc="This epoch's first batch with a non-finite loss, else None.")
    valid_metric_bigger = _from_trainer("valid_metric_bigger", "Whether a bigger valid_metric is better.")
    reports_loss = _from_trainer("reports_loss", "False for a trainer whose epochs have no loss (a booster).")
    reports_hparams = _from_trainer("reports_hparams", "False for a fit that is a stage of its run, not a row.")
    model = _from_trainer("model", "The model being trained.")
    optimizer = _from_trainer("optimizer", "The optimizer: the LR schedule sets its rates.")
    writer = _from_trainer("tensorboard", "The run's TensorBoard writer (RunWriter).")
