"""RecBole's optimizer step against fast mode's fused one, on the run's device.

    python bench/bench_optimizer.py [--cases SASRec:ml-1m] [--steps 300] [--data-path DIR]

Per case, the model is built as a run builds it (recrunner's configuration layers, RecBole's full
sizes) twice with the same weights, and each copy gets its optimizer: RecBole's as
`Trainer._build_optimizer` makes it (torch's `foreach` step on a GPU, its loop over the tensors on a
CPU) and fast mode's (`recrunner.training.fast.fused.fused_optimizer`: the same one with
`fused=True`). Both take the same gradients (random, made before the clock starts) for `--steps`
steps, in alternating blocks of 50, the device synchronised around each block; the bench prints
the median time of a step, the ratio, and how far apart the two copies' weights ended (relative:
the same update, rounded otherwise).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BLOCK = 50


def optimizers(model_name: str, dataset: str, data_path: str):
    """(device, {way: (model, optimizer)}): one model as a run builds it, copied, with each optimizer."""
    from recbole.utils import init_seed

    from recrunner.seams.environment import prepare_environment

    prepare_environment()
    from recrunner import Experiment, Workspace, prepare
    from recrunner.data.cache import load_data
    from recrunner.seams.models import model_class
    from recrunner.training.fast.fused import fused_optimizer

    workspace = Workspace(output_dir=Path("/tmp/bench-optimizer"), data_path=Path(data_path), config_dir=REPO / "configs")
    prepared = prepare(Experiment(model_name, dataset, {"show_progress": False}), workspace)
    config = prepared.config
    init_seed(config["seed"], config["reproducibility"])
    train, _, _ = load_data(config, None)
    model = model_class(model_name)(config, train._dataset).to(config["device"])
    trainer = prepared.trainer_class(config, model)  # RecBole's optimizer for `model`
    other = copy.deepcopy(model)
    built = {"RecBole's": (model, trainer.optimizer),
             "fused": (other, fused_optimizer(trainer._build_optimizer(params=other.parameters())))}
    return trainer.device, built


def measure(case: str, steps: int, data_path: str) -> dict:
    import torch

    model_name, dataset = case.split(":")
    device, built = optimizers(model_name, dataset, data_path)
    params = {way: [p for p in model.parameters() if p.requires_grad] for way, (model, _) in built.items()}
    generator = torch.Generator(device=device).manual_seed(0)
    grads = [[torch.randn(p.shape, device=device, generator=generator) * 1e-3 for p in params["fused"]]
             for _ in range(4)]
    times = {way: [] for way in built}

    def block(way: str, start: int) -> float:
        _, optimizer = built[way]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        began = time.perf_counter()
        for step in range(start, start + BLOCK):
            for param, grad in zip(params[way], grads[step % len(grads)]):
                param.grad = grad
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - began) / BLOCK

    for way in built:  # warm up: the optimizer's state made, kernels loaded
        block(way, 0)
    for index, start in enumerate(range(BLOCK, BLOCK + steps, BLOCK)):
        for way in built if index % 2 == 0 else reversed(list(built)):  # neither always first
            times[way].append(block(way, start))
    apart = max(((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()
                for a, b in zip(params["RecBole's"], params["fused"]))
    return {"case": case, "device": str(device), "tensors": len(params["fused"]),
            "median": {way: statistics.median(values) for way, values in times.items()}, "apart": apart}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["SASRec:ml-1m"], metavar="MODEL:DATASET")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--data-path", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    print("| case | device | tensors | RecBole's step ms | fused step ms | RecBole's / fused | weights apart (relative) |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        m = measure(case, args.steps, args.data_path)  # ml-100k: RecBole's own where the folder lacks it
        plain, fused = m["median"]["RecBole's"], m["median"]["fused"]
        print(f"| {case} | {m['device']} | {m['tensors']} | {plain * 1e3:.3f} | {fused * 1e3:.3f} | {plain / fused:.2f}x | "
              f"{m['apart']:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
