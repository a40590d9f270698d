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
"""

from __future__ import annotations

import os
from typing import Mapping

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
