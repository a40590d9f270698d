"""The device a run trains on: deterministic kernels, what the run used of it, running out of its memory.

    deterministic: true      torch.use_deterministic_algorithms(True), with cuBLAS's fixed workspace
                             (CUBLAS_WORKSPACE_CONFIG, set before CUDA starts: `deterministic_environment`)
    DeviceUsage              the device's name and the run's peak memory: torch's peak allocation on a
                             GPU (torch.cuda.max_memory_allocated), the process's peak RSS on a CPU
    out of memory            `is_out_of_memory` recognises it (CUDA's and the CPU allocator's);
                             `training_out_of_memory` is the one line a run fails with in training

On a CPU, recrunner's runs are bit-identical without `deterministic` (docs/runs.md: Exactness on
each device). On a GPU, some kernels (atomic adds in index_add, scatter, embedding backward; cuBLAS
split reductions) sum in whatever order threads finish: two runs of the same seed differ in the
last bits of a loss (measured on an H200: 324.1990189552307 and 324.19901752471924 at epoch 1 of
configs/quick.yaml), and `deterministic: true` removes that, at some cost in speed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...core.errors import ConfigError
from ...core.files import size_text
from ...core.docs import page
from ...core.proc import kib_fields

logger = logging.getLogger("recrunner")

CUBLAS_WORKSPACE = ":4096:8"  # what torch's reproducibility notes ask for (":16:8" is the smaller choice)


# ---------------------------------------------------------------------- determinism
def deterministic_environment() -> None:
    """What must be set before CUDA starts in a process that runs a deterministic run: cuBLAS's fixed
    workspace. Called where the run is prepared (every process prepares its run before CUDA starts);
    a value the user set is kept."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)


def set_deterministic(on: bool) -> None:
    """torch's deterministic algorithms on or off for this process's next run (every run sets it: a
    sweep's runs in one process may differ)."""
    if on:
        deterministic_environment()
    torch.use_deterministic_algorithms(bool(on))


def set_tf32(on: bool, device) -> None:
    """fp32 matrix products on a GPU in TF32 (`tf32: true`: faster on Ampere and later, a 10-bit
    mantissa, so the numbers change) or in full fp32 (torch's default, and exact mode's) for this
    process's next run (every run sets it: a sweep's runs in one process may differ)."""
    torch.backends.cuda.matmul.allow_tf32 = bool(on)
    if on:
        where = "has no effect on a CPU" if torch.device(device).type == "cpu" else \
            f"fp32 matrix products on {device} use TF32 (numbers differ from full fp32's)"
        logger.info(f"tf32: {where}")


_NOT_DETERMINISTIC = re.compile(r"(?P<op>[^\n]+?) does not have a deterministic implementation")


def nondeterministic_operation(exc: BaseException) -> str | None:
    """The operation torch refused in deterministic mode, from its error, or None (pure)."""
    match = _NOT_DETERMINISTIC.search(str(exc).strip())
    if match:
        return match.group("op")
    if "CUBLAS_WORKSPACE_CONFIG" in str(exc):
        return "cuBLAS (CUBLAS_WORKSPACE_CONFIG was set after CUDA started)"
    return None


def refusal(model: str, device, op: str, where: str) -> ConfigError:
    """The one-line error of a deterministic run whose model uses `op`, found before training."""
    return ConfigError(f"deterministic: {model} uses {op} in {where}, which has no deterministic kernel on {device}; "
                       f"run it without deterministic: true ({page('runs', 'Exactness on each device')})")


# ---------------------------------------------------------------------- what a run used
@dataclass(frozen=True)
class DeviceUsage:
    """The device a run trained on and its peak memory; metrics.json's `device`."""

    device: str                      # cpu, cuda:0 (as torch names it in this process)
    name: str | None = None          # the GPU's or the CPU's model
    peak_memory_mb: float | None = None
    memory: str = ""                 # what peak_memory_mb measures

    def as_dict(self) -> dict:
        return asdict(self)


def start_measuring(device) -> None:
    """Zero the peaks `usage` reads: torch's on a GPU; the process's peak RSS on Linux (clear_refs)."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(device)
    else:
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux >= 4.0)
        except OSError:
            pass  # elsewhere: the process's peak since it started


def usage(device) -> DeviceUsage:
    """What the run used of `device` since `start_measuring`."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        index = device.index if device.index is not None else torch.cuda.current_device()
        return DeviceUsage(f"cuda:{index}", torch.cuda.get_device_name(index),
                           round(torch.cuda.max_memory_allocated(index) / 2**20, 1), "torch.cuda.max_memory_allocated")
    return DeviceUsage(str(device), cpu_model(), peak_rss_mb(), "peak resident set size of the process")


def cpu_model() -> str | None:
    """This machine's CPU model, as /proc/cpuinfo names it (platform's guess elsewhere)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB (VmHWM; ru_maxrss where /proc is absent)."""
    peak = (kib_fields(Path("/proc/self/status")) or {}).get("VmHWM")
    if peak is not None:
        return round(peak / 1024, 1)
    try:
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except (ImportError, OSError):
        return None




# ---------------------------------------------------------------------- out of memory
def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is a device or host allocation failure (pure over its type and message)."""
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)


class OutOfMemory(ConfigError):
    """The run's settings need more memory than its device has (exit 2: the settings must change)."""


def memory_text(device) -> str:
    """`peak 74.1 GiB of 79.6 GiB` on a GPU, `peak 12.3 GiB RSS` on a CPU."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        index = device.index if device.index is not None else torch.cuda.current_device()
        total = torch.cuda.get_device_properties(index).total_memory / 2**20
        return f"peak {size_text(torch.cuda.max_memory_allocated(index) / 2**20)} of {size_text(total)}"
    peak = peak_rss_mb()
    return f"peak {size_text(peak)} RSS" if peak is not None else "peak unknown"


def training_out_of_memory(model: str, device, batch_size, memory: str, kept: Path | None) -> OutOfMemory:
    """The one line of a run that ran out of memory in training (pure); `kept`: its last checkpoint."""
    kept = f"; {kept} is kept and the same command resumes from it" if kept is not None else ""
    return OutOfMemory(f"{device} ran out of memory training {model} at train_batch_size {batch_size} ({memory}): "
                       f"lower train_batch_size (or the model's size: hidden_size, embedding_size, "
                       f"MAX_ITEM_LIST_LENGTH), or free the device{kept}")


def release(device) -> None:
    """Give cached blocks back after an allocation failure, so a retry starts from what is in use."""
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def out_of_memory_in_training(trainer):
    """Around an epoch's training: running out of memory is `training_out_of_memory`'s one line (exit 2),
    the run's checkpoints as they were."""
    try:
        yield
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        kept = trainer.checkpoints.last if trainer.checkpoints.last.is_file() else None
        error = training_out_of_memory(trainer.config["model"], trainer.device, trainer.config["train_batch_size"],
                                       memory_text(trainer.device), kept)
        release(trainer.device)
        raise error from exc


# ---------------------------------------------------------------------- deterministic kernels, checked first
def check_deterministic_kernels(trainer, train_data, valid_data) -> None:
    """With `deterministic: true`, before anything trains: one training batch (loss and backward) and one
    evaluation batch's scores on the run's device, every RNG, buffer and gradient left as it was. An
    operation with no deterministic kernel is one line naming it (`refusal`), not a traceback mid-epoch."""
    from ..checkpoints import rng

    model = trainer.model
    if not torch.are_deterministic_algorithms_enabled() or not hasattr(model, "calculate_loss"):
        return
    buffers = {name: buffer.detach().clone() for name, buffer in model.named_buffers()}
    mode, where = model.training, "training"
    try:
        with rng.preserved(trainer._generators):
            batch = next(iter(train_data), None)
            if batch is not None:
                model.train()
                loss = model.calculate_loss(batch.to(trainer.device))
                (sum(loss) if isinstance(loss, tuple) else loss).backward()
            where = "evaluation"
            _score_one_batch(model, valid_data, trainer.device)
    except RuntimeError as exc:
        op = nondeterministic_operation(exc)
        if op is None:
            raise
        raise refusal(trainer.config["model"], trainer.device, op, where) from exc
    finally:
        for parameter in model.parameters():
            parameter.grad = None
        for name, buffer in model.named_buffers():
            if name in buffers:
                buffer.copy_(buffers[name])
        model.train(mode)


@torch.no_grad()
def _score_one_batch(model, eval_data, device) -> None:
    batch = next(iter(eval_data), None) if eval_data else None
    if batch is None:
        return
    model.eval()
    interaction = batch[0].to(device)
    if type(eval_data).__name__ == "FullSortEvalDataLoader":
        try:
            model.full_sort_predict(interaction)
            return
        except NotImplementedError:  # RecBole then scores every (user, item) pair with predict
            return
    model.predict(interaction)
