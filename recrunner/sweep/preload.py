"""What the fork server imports once, so that every cell's fresh process starts warm.

Each `--workers` cell runs in a process forked from one server process (executors.LocalProcesses),
so whatever the server has imported, every cell has for free. A run imports a lot lazily: torch's
first optimizer pulls in torch._dynamo (with sympy and torch.distributed: about 2.2 s here), and
RecBole imports its model packages, evaluator and trainers when first asked. Imported here, they
cost nothing per cell (BENCHMARKS.md: about 2.4 s of every cell's process before).

Nothing here starts a thread or computes: a fork server must stay single-threaded, because the
OpenMP pool of a parent that has computed does not survive a fork.
"""

import importlib

import recrunner.sweep.worker  # noqa: F401  (torch, RecBole's config and data, recrunner)

_LAZY_MODULES = (
    "recbole.config",
    "recbole.data",
    "recbole.data.dataset",
    "recbole.utils",
    "recbole.model.general_recommender",
    "recbole.model.context_aware_recommender",
    "recbole.model.sequential_recommender",
    "recbole.model.knowledge_aware_recommender",
    "recbole.trainer",
    "recbole.evaluator",
    "torch.utils.tensorboard",
    "tensorboard.plugins.hparams.summary_v2",
    "tensorboard.backend.event_processing.event_file_loader",
    "tqdm.auto",
    "tqdm.contrib.logging",
)


def warm_up() -> None:
    import torch

    for name in _LAZY_MODULES:
        importlib.import_module(name)
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])  # its constructor imports torch._dynamo


warm_up()
