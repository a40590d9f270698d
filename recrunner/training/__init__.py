"""The training loop, in homes a newcomer finds by name (docs/development.md), lowest first:

    logging/      TensorBoard's event files, the HParams row, scalar tags
    fast/         fast mode's plan per device and model, and carrying it out
    checkpoints/  checkpoint files, the device boundary, every RNG, the training state, resume
    distributed/  data-parallel processes: collectives, exact evaluation, batch parts
    callbacks/    events, requests, the built-in callbacks
    loop/         CustomTrainer.fit, step schedules, the one optimizer step, evaluation, devices
    families/     RecBole's model trainers under the loop (NCL, pre-training stages, trees)

Each imports only those above it in this list. The names below are the public face, imported on
first use.
"""

from ..core.lazy import exports

_PUBLIC = {
    "CustomTrainer": "loop.trainer", "TrainingState": "checkpoints.state",
    "Callback": "callbacks", "TrainerControl": "callbacks", "LoopView": "callbacks",
}
__all__ = sorted(_PUBLIC)
__getattr__ = exports(__name__, _PUBLIC)
