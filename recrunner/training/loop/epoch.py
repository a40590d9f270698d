"""One training epoch: RecBole's `Trainer._train_epoch`, batch for batch, without a wait for every loss.

| RecBole 1.2.1 `Trainer._train_epoch`                     | `train_epoch` (CustomTrainer's `_train_epoch`) |
|----------------------------------------------------------|------------------------------------------------|
| per batch: `.to(device)`, `zero_grad`, the loss under    | the same calls, in the same order              |
| `autocast(enable_amp)`, backward, `clip_grad_norm_`, the |                                                |
| step through a `GradScaler(enabled=enable_scaler)` made  |                                                |
| once per epoch                                           |                                                |
| `losses.item()` and `_check_nan(loss)` every batch: the  | the loss stays on the device until read with   |
| host waits for the GPU's forward pass before it can      | others (`read_loss_every`, loop/losses.py):    |
| queue the backward                                       | every batch on a CPU, every 32 on a GPU        |
| `loss_func` or `model.calculate_loss`                    | the same, replayed from CUDA graphs under      |
|                                                          | `cuda_graph_step: true` (loop/graphs.py); with |
|                                                          | the backward and the step under                |
|                                                          | `cuda_graph_optimizer` (loop/whole_step.py)    |
| `scaler.scale(loss + sync_loss)` (0 outside its own DDP) | `scaler.scale(loss)`: the same gradient        |
| `train_data.sampler.set_epoch` for its own DDP           | never needed: recrunner's data-parallel runs   |
|                                                          | are its own (`single_spec` stays True)         |

It returns what RecBole's returns: the sum of the batches' losses (each `.item()`, added in order),
or for a model whose loss has parts, the tuple of each part's sum. Trainers with an epoch of their
own (KG, RecVAE ... trainers: families/layers.py) keep it; it runs RecBole's, whose `_check_nan`
reads every batch's loss (CustomTrainer._check_nan).
"""

from __future__ import annotations

import torch
from torch.nn.utils import clip_grad_norm_


def train_epoch(trainer, train_data, epoch_idx, loss_func=None, show_progress=False):
    """Train `trainer.model` one epoch on `train_data` (RecBole's `_train_epoch` signature); the
    epoch's loss as RecBole sums it."""
    from recbole.utils import get_gpu_usage, set_color

    trainer.model.train()
    whole = trainer.whole_step if loss_func is None else None  # cuda_graph_optimizer: loop/whole_step.py
    loss_func = loss_func or trainer.graph_loss or trainer.model.calculate_loss  # graph_loss: loop/graphs.py
    steps = trainer.steps
    batches = train_data
    if show_progress:
        from tqdm import tqdm

        batches = tqdm(train_data, total=len(train_data), ncols=100, desc=set_color(f"Train {epoch_idx:>5}", "pink"))
    scaler = torch.amp.GradScaler("cuda", enabled=trainer.enable_scaler)  # RecBole's torch.cuda.amp.GradScaler
    for interaction in batches:
        interaction = interaction.to(trainer.device)
        replayed = whole(interaction) if whole is not None else None
        if replayed is not None:  # forward, backward and the optimizer's step in one replay; its loss read after
            steps.batch_loss(replayed, None)
            continue
        trainer.optimizer.zero_grad()
        with torch.autocast(device_type=trainer.device.type, enabled=trainer.enable_amp):
            losses = loss_func(interaction)
        parts = losses if isinstance(losses, tuple) else None
        loss = sum(losses) if parts is not None else losses
        steps.batch_loss(loss, parts)  # read when due: a non-finite one ends the epoch here (NonFiniteLoss)
        scaler.scale(loss).backward()
        if trainer.clip_grad_norm:
            clip_grad_norm_(trainer.model.parameters(), **trainer.clip_grad_norm)
        scaler.step(trainer.optimizer)
        scaler.update()
        if trainer.gpu_available and show_progress:
            batches.set_postfix_str(set_color("GPU RAM: " + get_gpu_usage(trainer.device), "yellow"))
    steps.read_losses()
    return steps.epoch.epoch_loss()
