"""Batch losses read from the device in groups: on a GPU, one wait for it per 32 batches, not per batch.

RecBole's epoch reads every batch's loss (`losses.item()`, then `torch.isnan(loss)` in
`_check_nan`) before its backward. On a CPU that costs nothing: the loss is computed by then. On a
GPU each read makes the host wait until the batch's forward pass has run, so the host cannot queue
the backward, the optimizer step and the next batch ahead of the GPU: the GPU idles while the host
builds every batch and launches every kernel.

`PendingLosses` keeps each batch's loss on the device (a copy: CUDA graphs overwrite their outputs
at the next step) and the step boundaries (loop/steps.py) read all pending ones at once, in one
copy from the device, when:

    read_loss_every batches are pending     auto: 1 on a CPU, 32 on a GPU (`read_every`)
    the epoch ends
    a step boundary needs the loss          a log_every_steps line, a validation, a checkpoint, a stop

The values are RecBole's, number for number: each batch's value as `.item()` gives it, summed in the
batches' order in Python floats (`EpochProgress.count_loss`, loop/context.py). What waiting changes, and only when a
loss is not finite: it is found when read, up to `read_loss_every - 1` batches later. Those batches
have trained (on weights that are then not finite); the epoch stops at the read, the run fails
naming the first non-finite batch and where it was read, and nothing is saved after it (a
checkpoint reads the pending losses first). A data-parallel run reads every batch: its processes
agree on each batch's loss (distributed/processes.py).
"""

from __future__ import annotations

import torch

from ...config.checks import read_loss_every_problem

AUTO_ON_GPU = 32  # batches whose losses wait on a GPU under `read_loss_every: auto`


class NonFiniteLoss(Exception):
    """A batch's loss is NaN or infinite: `value`, `batch` (its index in the epoch), `read_at` (the
    batch whose step read it)."""

    def __init__(self, value: float, batch: int, read_at: int):
        super().__init__(str(value))
        self.value, self.batch, self.read_at = value, batch, read_at


def read_every(asked, device_type: str, processes: bool) -> int:
    """How many batches' losses wait on the device before one read (pure): `asked` ("auto" or a whole
    number >= 1, from `read_loss_every`); 1 in a data-parallel run; auto: 1 on a CPU, else 32."""
    if processes:
        return 1
    problem = None if asked is None else read_loss_every_problem(asked)
    if problem:
        raise ValueError(problem)
    if asked in (None, "auto"):
        return 1 if device_type == "cpu" else AUTO_ON_GPU
    return asked


class PendingLosses:
    """Batch losses not read yet, in order: `add` keeps one on its device, `read` reads all at once."""

    def __init__(self, every: int = 1):
        self.every = every
        self.batches: list[int] = []                # each pending batch's index in the epoch
        self.values: list[torch.Tensor] = []        # its loss (float64, 0-d, on the loss's device)
        self.parts: list[tuple | None] = []          # its loss's parts, where the model returns a tuple

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def due(self) -> bool:
        return len(self.batches) >= self.every

    def add(self, batch: int, loss: torch.Tensor, parts: tuple | None = None) -> None:
        self.batches.append(batch)
        self.values.append(_kept(loss))
        self.parts.append(None if parts is None else tuple(_kept(part) for part in parts))

    def read(self) -> list[tuple[int, float, tuple | None]]:
        """(batch, value, part values or None) of every pending batch, in order, read with one copy
        from the device (each value what `.item()` gives); none is pending after."""
        if not self.batches:
            return []
        flat = torch.stack([*self.values, *(part for parts in self.parts for part in parts or ())]).tolist()
        values, at, parts = flat[:len(self.batches)], len(self.batches), []
        for kept in self.parts:
            parts.append(None if kept is None else tuple(flat[at:at + len(kept)]))
            at += len(kept or ())
        read = list(zip(self.batches, values, parts))
        self.batches, self.values, self.parts = [], [], []
        return read


def _kept(loss: torch.Tensor) -> torch.Tensor:
    """A copy of a loss's value on its device, exact in float64 (bf16, fp16 and fp32 all are): what the
    next step (a CUDA graph's replay) cannot overwrite and one `stack` can gather."""
    return loss.detach().to(torch.float64, copy=True).reshape(())
