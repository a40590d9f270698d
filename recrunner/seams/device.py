"""RecBole chooses a run's GPU by setting CUDA_VISIBLE_DEVICES: recrunner makes that choice hold.

| RecBole 1.2.1                                              | recrunner                                    |
|------------------------------------------------------------|----------------------------------------------|
| `Config._init_device` sets CUDA_VISIBLE_DEVICES to gpu_id  | `run_gpu_id`: every Config built for a run   |
| on every Config, then calls torch.cuda.is_available().     | (the one of RecBole's defaults that checks   |
| The first CUDA query of a process fixes the GPUs it sees   | the keys too) gets the run's gpu_id, so the  |
| (the driver reads the variable once), so a later Config's  | first query already sees the run's GPU       |
| gpu_id is silently ignored and the run trains on GPU 0     | `cuda_queries_by_nvml`: torch answers        |
| (RecBole issue 1887): recrunner's first Config was the     | is_available/device_count from NVML, which   |
| defaults' (gpu_id 0), so `gpu_id: 1` trained on GPU 0      | reads the variable at each call and starts   |
|                                                            | no CUDA context on any GPU                   |

A run on `gpu_id: 1` thus sees one GPU, its own, as `cuda:0`: nothing is allocated on GPU 0 (no
context, no RNG state: recrunner.training.checkpoints.rng captures CUDA states only where CUDA started).
`gpu_id` is where a run runs, not what it is: it is not part of the run's id, so a run resumes
on another GPU. `--gpus 0,1` gives each sweep cell its own (a fresh process per cell).

RecBole also sets `device` itself, from `use_gpu` and `gpu_id`, over any value given: `device: cpu` on a
GPU machine trained on the GPU, and a `gpu_id` naming no GPU of the machine (`gpu_id: 1` with one GPU)
hid every GPU, so the run trained on the CPU without a word. `check_device` refuses both before anything
is written.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

from ..core.errors import ConfigError

RECBOLE_DEFAULT_GPU = "0"  # recbole/properties/overall.yaml


def cuda_queries_by_nvml() -> None:
    """Make torch's CUDA availability checks start nothing (set once per process, before RecBole runs;
    a value the user set is kept)."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def run_gpu_id(*layers: Mapping) -> dict:
    """{"gpu_id": the run's} from its layers (lowest first), for every Config built for the run (pure)."""
    gpu_id = RECBOLE_DEFAULT_GPU
    for layer in layers:
        if layer.get("gpu_id") is not None:
            gpu_id = layer["gpu_id"]
    return {"gpu_id": gpu_id}


def check_device(settings: Mapping, config) -> None:
    """A ConfigError where the run would not train where its settings say: `device` given (RecBole
    overwrites it), or a `gpu_id` that hid every GPU of the machine (`hidden_gpus`)."""
    if "device" in settings:
        raise ConfigError(f"device ({settings['device']!r}) is set by RecBole from use_gpu and gpu_id, over any value "
                          "given: set use_gpu: false to train on the CPU, or gpu_id (or --gpus) to choose a GPU")
    if problem := hidden_gpus(str(config["gpu_id"]), bool(config["use_gpu"]), str(config["device"]), machine_gpus):
        raise ConfigError(problem)


def hidden_gpus(gpu_id: str, use_gpu: bool, device: str, machine: Callable[[], int]) -> str | None:
    """Why a run would train on the CPU of a machine with `machine()` GPUs, or None (pure but for that
    count, asked only where the run was to use a GPU and is on the CPU: on a CPU machine, every run): RecBole
    made its device the CPU though it was to use a GPU. use_gpu false or an empty gpu_id choose the CPU; so
    does a machine without GPUs."""
    if device != "cpu" or not use_gpu or not gpu_id.strip():
        return None
    gpus = machine()
    if gpus == 0:
        return None
    ids = [part.strip() for part in gpu_id.split(",") if part.strip()]
    if all(part.isdigit() and int(part) < gpus for part in ids):  # the GPUs are there: CUDA is not
        return (f"this machine has {gpus} GPU(s) and gpu_id {gpu_id!r} names one, but torch cannot use it (CUDA is "
                "not available to it: a driver older than torch's CUDA build?), so the run would train on the CPU; "
                "mend the driver or torch, or set use_gpu: false to train on the CPU")
    return (f"gpu_id {gpu_id!r} names no GPU of this machine, which has {gpus} (nvidia-smi lists them): RecBole "
            "hides the others and the run would train on the CPU; set gpu_id to one of them (or use --gpus), or "
            "use_gpu: false to train on the CPU")


def machine_gpus() -> int:
    """The GPUs this machine has, whatever CUDA_VISIBLE_DEVICES says (NVML's raw count; no CUDA starts),
    where torch is built with CUDA; else 0."""
    import warnings

    import torch

    if torch.version.cuda is None:
        return 0
    try:
        from torch.cuda import _raw_device_count_nvml

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns where NVML cannot start
            return max(0, _raw_device_count_nvml())
    except (ImportError, OSError, AttributeError):  # another torch, or no NVML library
        return 0
