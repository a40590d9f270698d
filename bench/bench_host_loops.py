"""RecBole's methods that loop over a batch on the host (SRGNN's and GCSAN's `_get_slice`, HRM's
`inverse_seq_item`, KGNNLS's `label_smoothness_predict`, RippleNet's `forward` and `full_sort_predict`,
FEARec's `calculate_loss`) against their replacements (recrunner/seams/host_loops.py), in one process.

    python bench/bench_host_loops.py [--cases SRGNN:ml-100k GCSAN:ml-100k HRM:ml-100k KGNNLS:ml-100k RippleNet:ml-100k
                                              FEARec:ml-100k]
                                     [--max-batches 8]
                                     [--rounds 2] [--data-path ../shared/datasets] [--threads N]

Per case, the model built as a run builds it in exact mode (bench_fast.build) at RecBole's default sizes:
    method     seconds of the (first) method for one training batch, RecBole's and the array-built, over the
               first `--max-batches` batches (the tensors are checked equal, from the same generators' states,
               else the bench fails; FEARec's: its whole loss, forward passes included)
    epoch      an exact training epoch's seconds with each, `--max-batches` batches timed and scaled to
               the whole epoch; the two alternate `--rounds` times, the median kept
    eval       a full validation's seconds with each (median)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fast import REPO, _FirstBatches, build  # noqa: E402

from recrunner.seams.host_loops import REPLACED  # noqa: E402


def _timed(call) -> float:
    """Seconds of `call`, on a GPU until its kernels are done (the array-built methods never wait for them)."""
    import torch

    wait = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    wait()
    start = time.perf_counter()
    call()
    wait()
    return time.perf_counter() - start


def _label_arguments(model, batch) -> tuple:
    """KGNNLS's `label_smoothness_predict` arguments as its `calculate_ls_loss` makes them."""
    import torch

    users = torch.cat((batch[model.USER_ID], batch[model.USER_ID]))
    items = torch.cat((batch[model.ITEM_ID], batch[model.NEG_ITEM_ID]))
    model.batch_size = items.shape[0]  # as its forward sets it
    return (model.user_embedding(users), users, *model.get_neighbors(items))


ARGUMENTS = {  # what each replaced method is called with, from a training batch
    "_get_slice": lambda model, batch: (batch[model.ITEM_SEQ],),
    "inverse_seq_item": lambda model, batch: (batch[model.ITEM_SEQ], batch[model.ITEM_SEQ_LEN]),
    "label_smoothness_predict": _label_arguments,
    "forward": lambda model, batch: (batch,),
    "calculate_loss": lambda model, batch: (batch,),
}


def _seeded(call):
    """`call()` from the same states of Python's and torch's generators (FEARec's draws, dropout)."""
    import random

    import torch

    random.seed(0)
    torch.manual_seed(0)
    return call()


def _tensors(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def method_alone(model, method: str, loader, max_batches: int) -> tuple[float, float]:
    """Median seconds per batch of RecBole's `method` and of the array-built one; fails if they differ."""
    import torch

    recboles, ours = getattr(type(model), method), getattr(model, method)
    if hasattr(loader, "set_mode"):  # a knowledge-aware model's loader: its batches as its trainer asks them
        from recbole.utils import KGDataLoaderState

        loader.set_mode(KGDataLoaderState.RSKG)
    theirs_s, ours_s = [], []
    device = next(model.parameters()).device
    for batch in _FirstBatches(loader, max_batches):
        args = ARGUMENTS[method](model, batch.to(device))  # as the epoch moves it (KGNNLS's lookups need it there)
        theirs_s.append(_timed(lambda: recboles(model, *args)))
        ours_s.append(_timed(lambda: ours(*args)))
        for expected, got in zip(_tensors(_seeded(lambda: recboles(model, *args))), _tensors(_seeded(lambda: ours(*args))),
                                 strict=True):
            assert torch.equal(expected, got), f"the array-built {method} differs from RecBole's"
    return statistics.median(theirs_s), statistics.median(ours_s)


def case_figures(case: str, args, workdir: Path) -> dict:
    model_name, dataset = case.split(":")
    data_path = str(args.data_path) if dataset != "ml-100k" else None
    trainer, train, valid = build(False, model_name, dataset, data_path, workdir, "auto", True, "auto")
    model = trainer.model
    methods = REPLACED[model_name][0]
    ours = {method: model.__dict__[method] for method in methods}  # installed by ready_model, as in a run
    alone = method_alone(model, methods[0], train, args.max_batches)
    loader = _FirstBatches(train, args.max_batches)
    scale = len(train) / min(args.max_batches, len(train))
    times = {"recbole": ([], []), "arrays": ([], [])}
    for epoch in range(args.rounds):
        for way in times:
            for method, replacement in ours.items():
                if way == "recbole":
                    delattr(model, method)
                else:
                    setattr(model, method, replacement)
            trainer.epoch = epoch
            times[way][0].append(_timed(lambda: trainer._train_epoch(loader, epoch)) * scale)
            times[way][1].append(_timed(lambda: trainer._valid_epoch(valid)))
    median = {way: (statistics.median(t), statistics.median(e)) for way, (t, e) in times.items()}
    return {"batches": len(train), "method": ", ".join(f"`{m}`" for m in methods), "alone": alone, **median}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["SRGNN:ml-100k", "GCSAN:ml-100k", "HRM:ml-100k", "KGNNLS:ml-100k", "RippleNet:ml-100k",
                                                  "FEARec:ml-100k"], metavar="MODEL:DATASET")
    parser.add_argument("--max-batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-path", type=lambda path: Path(path).resolve(), default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    print("| model | dataset | batches (timed) | method | a batch's s: RecBole / arrays | speed-up "
          "| exact epoch s: RecBole / arrays | speed-up | validation s: RecBole / arrays | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        with tempfile.TemporaryDirectory() as tmp:
            f = case_figures(case, args, Path(tmp))
        (g_r, g_a), (e_r, v_r), (e_a, v_a) = f["alone"], f["recbole"], f["arrays"]
        model, dataset = case.split(":")
        print(f"| {model} | {dataset} | {f['batches']} ({min(args.max_batches, f['batches'])}) | {f['method']} "
              f"| {g_r:.3f} / {g_a:.4f} "
              f"| {g_r / g_a:.{0 if g_r / g_a >= 10 else 2}f}x | {e_r:.1f} / {e_a:.1f} | {e_r / e_a:.2f}x | {v_r:.2f} / {v_a:.2f} | {v_r / v_a:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
