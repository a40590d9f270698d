"""Building a RecBole model: process-wide state its import changes, and what it builds wrong.

| RecBole 1.2.1                                            | recrunner                                  |
|----------------------------------------------------------|--------------------------------------------|
| importing sequential_recommender (get_model of any       | `model_class`: anomaly detection set from  |
| sequential model) runs set_detect_anomaly(True) (sine.py) | `detect_anomaly` (default off) afterwards |
| KSR keeps relation_Matrix in float64 beside float32      | `repair_model`: cast to the weights' dtype |
| weights: every forward fails                             |                                            |
| KGIN and MCCLK import torch_scatter (a source package    | `provide_torch_scatter`: seams/torch_scatter.py |
| on PyPI, compiled against the installed torch)           | registered as `torch_scatter` when missing |
| SRGNN, GCSAN (session graphs), HRM (sequences moved after | `ready_model`: seams/host_loops.py's equal |
| their padding), KGNNLS (labels from a dict), RippleNet    | tensors from array operations (FEARec: the |
| (ripple sets) and FEARec (same-target sequences) loop     | same draws, without a wait per sequence)   |
| over each batch on the host                               |                                            |
| FEARec, LDiffRec, GRU4RecCPR and SASRecCPR `print` while  | `built_model`: what the constructor prints |
| they are built: to stdout, among a sweep's result lines;  | goes to the run's run.log, line by line;   |
| GRU4RecCPR and SASRecCPR then `sys.exit(0)` on BPR loss   | an exit is a ConfigError saying what it    |
| (the process ends, exit code 0, the run unrecorded)       | printed: the run fails, the sweep goes on  |
| Pop counts an item once per training batch it is in       | kept (exact mode is RecBole's), with a     |
| (`item_cnt[item] = item_cnt[item] + 1`: a repeated index  | warning on every such run; `pop_counts:    |
| is written once), so its scores depend on                 | interactions`: `count_every_interaction`   |
| train_batch_size (RecBole issue #1844, open), and counts  | counts each interaction once and sampled   |
| the negatives sampled for it (pointwise) as interactions  | negatives not at all                       |
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys

from ..core.errors import ConfigError


def model_class(name: str, detect_anomaly: bool = False) -> type:
    """RecBole's `get_model(name)`, with torch's anomaly detection set as asked afterwards.

    RecBole 1.2.1's sine.py turns anomaly detection on for the whole process when its model
    package is imported, which `get_model` does for every sequential model, not only SINE (and
    recrunner's own model listing does once). It changes no number, but records a traceback in
    every forward op and checks every gradient for NaN in backward (SASRec on Amazon_Beauty:
    0.37 s -> 0.22 s of backward per batch of 2048).
    """
    import torch
    from recbole.utils import get_model

    if name in ("KGIN", "MCCLK"):
        provide_torch_scatter()
    model = get_model(name)
    torch.autograd.set_detect_anomaly(bool(detect_anomaly))
    return model


def built_model(model_class: type, config, dataset):
    """`model_class(config, dataset)`, with what its constructor prints logged to the run's run.log (a line
    each, "FEARec printed: ..."), not to stdout, where a sweep's progress and result lines go. A constructor
    that ends the process (GRU4RecCPR and SASRecCPR call `sys.exit(0)` on `loss_type: BPR`, which would end a
    sweep with exit code 0 and the run unrecorded) raises ConfigError with what it printed."""
    name, printed = model_class.__name__, io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return model_class(config, dataset)
    except SystemExit as exc:
        said = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
        raise ConfigError(f"{name} refused its settings and called sys.exit({exc.code}) while it was built"
                          f"{': ' + repr(said[-1]) if said else ''}; change the setting it names") from None
    finally:  # also when it fails: what it printed may say why
        for line in printed.getvalue().splitlines():
            if line.strip():
                logging.getLogger("recrunner").info(f"{name} printed: {line.rstrip()}", extra={"file_only": True})


def repair_model(model):
    """Fix what RecBole 1.2.1 builds wrong for one model (module docstring); returns the model."""
    if type(model).__name__ == "KSR" and model.relation_Matrix.dtype != model.entity_embedding.weight.dtype:
        model.relation_Matrix = model.relation_Matrix.to(model.entity_embedding.weight.dtype)
    return model


def ready_model(model, config=None):
    """The model a run trains: `repair_model`'s, with RecBole's host loops over a batch replaced by
    methods that give equal tensors where the batch is (seams/host_loops.py), and Pop counting every
    interaction where the run's `config` says `pop_counts: interactions`; returns it. Plain RecBole's
    runs in the tests get `repair_model` only."""
    from ..config.params import setting
    from .host_loops import without_host_loops

    if type(model).__name__ == "Pop" and config is not None and setting(config, "pop_counts") == "interactions":
        count_every_interaction(model, config["LABEL_FIELD"])
    methods = without_host_loops(repair_model(model))
    if methods:
        logging.getLogger("recrunner").info(
            f"{' and '.join(f'{type(model).__name__}.{method}' for method in methods)} "
            f"run{'s' if len(methods) == 1 else ''} without RecBole's loop over the batch on the host, with equal "
            f"tensors (seams/host_loops.py)", extra={"file_only": True})
    return model


def count_every_interaction(model, label: str = "label") -> None:
    """Pop's training step counting each training interaction once: a repeated item as often as it is in the
    batch (RecBole 1.2.1 counts it once per batch), and the negatives RecBole samples for it (rows whose `label`
    is 0: Pop is a pointwise model, and RecBole samples one per interaction by default) not at all. An
    instance attribute, so the model's state and checkpoints are unchanged."""
    import torch

    def calculate_loss(interaction):
        items = interaction[model.ITEM_ID]
        if label in interaction:
            items = items[interaction[label] > 0]
        model.item_cnt += torch.bincount(items, minlength=model.item_cnt.size(0)).unsqueeze(1)  # both int64
        model.max_cnt = torch.max(model.item_cnt, dim=0)[0]
        return torch.nn.Parameter(torch.zeros(1)).to(model.device)  # RecBole's Pop: a loss with nothing to train

    model.calculate_loss = calculate_loss


def provide_torch_scatter() -> None:
    """Make `import torch_scatter` work: the real package if installed, else our two functions."""
    import importlib.util

    if "torch_scatter" in sys.modules or importlib.util.find_spec("torch_scatter") is not None:
        return
    from . import torch_scatter

    sys.modules["torch_scatter"] = torch_scatter
