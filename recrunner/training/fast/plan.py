"""Fast mode (`--fast`, `fast: true`): the model's loss compiled and in reduced precision, its scoring compiled.

Exact mode (the default) leaves RecBole's numbers bit-identical; fast mode trades that for speed
and says what it changed. What it does, and the one place each decision is made:

| decision                     | where                | rule                                                    |
|------------------------------|----------------------|---------------------------------------------------------|
| precision and compile        | `choose` (pure)      | `fast_precision: auto`: bf16 on a CPU with native bf16   |
|                              |                      | (avx512_bf16 / amx_bf16), else fp32; on CUDA bf16 where  |
|                              |                      | the GPU has it, else fp16 with a gradient scaler.        |
|                              |                      | `fast_compile: auto`: compile                            |
| what each model can and gains| `FACTS` (facts.py)   | one fact at a time: a kernel or compiler limit (every    |
|                              |                      | device), a speed or a quality measurement (the device it |
|                              |                      | was measured on only); the log line names the facts that |
|                              |                      | decided and the device each was measured on              |
| which models on a CPU        | `facts.CPU_DEFAULT`  | `auto` accelerates only the models measured faster on a  |
|                              |                      | CPU; a GPU with no fact of a model gets its defaults     |
| what is accelerated          | `accelerate`         | `calculate_loss` (training), `predict` and               |
|                              |                      | `full_sort_predict` (validation and test), wrapped as    |
|                              |                      | instance attributes: state_dict keys are unchanged       |
| scores                       | `FastMethod`         | computed in fp32 (compiled): bf16 rounds scores into     |
|                              |                      | ties that moved SASRec's test MRR@10 by up to 0.0012 on  |
|                              |                      | the same weights (bench/fast_scoring.py)                 |
| random numbers               | `dropout_choice`     | on a CPU nn.Dropout's masks from numpy's SFC64, seeded   |
|                              | (pure, dropout.py),  | from torch's generator (7x faster than torch's serial    |
|                              | `eager_random`       | generator; other masks than exact mode's); elsewhere,    |
|                              | (compiler.py)        | and all other random numbers, torch's generator          |
| fp16 gradients               | `OptimizerStep`      | torch's GradScaler; its state is saved in last.pth       |
| evaluation batches           | `evaluation_users`   | a general model's full sort at least 256 users a batch   |
|                              | (pure, data.py; the  | where the model scores users itself; RecBole's           |
|                              | run layer passes it  | `eval_batch_size` counts scores (one user on ml-1m)      |
|                              | to recrunner.data)   |                                                          |
| training batch shapes        | `static_choice`      | `fast_static_shapes: true`: each epoch's last, shorter   |
|                              | (pure, data.py)      | batch dropped, the loss compiled for one shape           |
| training negatives           | `negatives_choice`   | on a GPU uniform negatives drawn by torch where the      |
|                              | (pure, data.py; the  | batch is, RecBole's distribution, other negatives than   |
|                              | run layer passes it  | exact mode's (seams/negatives.py); on a CPU RecBole's    |
|                              | to recrunner.data)   | sampler                                                  |
| the optimizer's step         | `fused_choice`       | on a GPU one fused kernel (RecBole's Adam, AdamW, SGD),  |
|                              | (pure, fused.py)     | other last bits than RecBole's step; on a CPU RecBole's  |
| RecBole's attention          | `attention_choice`   | `fast_attention: true`: scaled_dot_product_attention, one |
|                              | (pure, attention.py) | kernel on a GPU, its own dropout draws; `auto`: off       |
| SASRec's, BERT4Rec's last    | `last_layer_choice`  | computed at the positions the loss and the scores read   |
| transformer layer            | (pure, last_layer.py)| only: 43% of the main job's arithmetic; the same         |
|                              |                      | function, rounded otherwise, other dropout draws         |

Compiling: with dynamic shapes, one graph for every batch size (RecBole's last batch, evaluation
batches of any size), so which code runs a batch never depends on what ran before: a resumed
fast run computes what the uninterrupted one did; with `fast_static_shapes: true` the loss's one
shape compiled as it is (the last batch dropped, `static_choice`), scoring still dynamic. A model's float attributes (LayerNorm's eps, dropout's p) are compiled as constants, so the
loss is captured once, not twice (compiler.py, `constant_floats`). With `fast_cuda_graphs: true` on a
GPU the compiled training loss (forward and backward) is replayed as CUDA graphs (torch.compile's
`reduce-overhead`), one recorded per batch size, the same kernels with one launch; scoring is not
(its outputs outlive the next call). A function the compiler cannot handle runs eagerly in the
chosen precision (one log line). Without it, on a GPU, the training loop records the compiled step
as CUDA graphs itself (`cuda_graph_step: auto`, recrunner.training.loop.graphs), which was faster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from ...config.checks import FAST_PRECISIONS as PRECISIONS, SWITCH
from ...config.params import setting
from ...core.errors import ConfigError
from .attention import attention_choice
from .data import full_sort_users, negatives_choice, static_choice, training_draws
from .dropout import dropout_choice
from .facts import CPU_DEFAULT, Fact, facts_of
from .fused import fused_choice
from .last_layer import last_layer_choice

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

METHODS = ("calculate_loss", "predict", "full_sort_predict")  # what fast mode accelerates


@dataclass(frozen=True)
class FastPlan:
    """What a fast run does; stored in last.pth and metrics.json (`as_dict`)."""

    precision: str = "fp32"   # bf16 | fp16 | fp32: the autocast dtype of the training loss
    compile: bool = False     # torch.compile the accelerated methods
    scaler: bool = False      # fp16: a gradient scaler
    compile_scoring: bool = True  # with compile: predict and full_sort_predict too (False: eager, facts.py)
    reason: str = ""          # why this plan (device, model limits), one line
    cuda_graphs: bool = False  # with compile on a GPU: the training loss replayed as CUDA graphs
    dropout: str = "torch"    # torch | numpy: where nn.Dropout's masks come from (dropout.py)
    negatives: str = "numpy"  # numpy | torch: who draws the training negatives (data.py)
    last_layer: bool = False  # SASRec's, BERT4Rec's last transformer layer at the scored positions only (last_layer.py)
    fused_optimizer: bool = False  # the optimizer's step as one fused kernel (fused.py)
    attention: bool = False   # RecBole's attention by scaled_dot_product_attention (attention.py)
    static_shapes: bool = False  # each epoch's last, shorter training batch dropped, the loss compiled for one shape

    @property
    def dtype(self):
        return _DTYPES.get(self.precision)

    @property
    def model_unchanged(self) -> bool:
        """fp32, not compiled, every layer at every position: the model's methods run as RecBole's (the one
        place this rule is written)."""
        return self.dtype is None and not self.compile and not self.last_layer and not self.attention

    @property
    def changes_nothing(self) -> bool:
        """The model unchanged, RecBole's negatives and optimizer step: the run is exact."""
        return self.model_unchanged and self.negatives == "numpy" and not self.fused_optimizer and not self.static_shapes

    def describe(self) -> str:
        """The run's log line: the plan and why."""
        if self.changes_nothing:
            return f"fast mode: loss and scores exact ({self.reason})"
        return f"fast mode: {self.settings()} ({self.reason})"

    def settings(self) -> str:
        """The plan in words, for the log line, resume refusals and `recrunner reproduce` (the one place):
        "bf16, compiled, numpy's dropout masks"; "exact" for a plan that changes nothing."""
        if self.changes_nothing:
            return "exact"
        parts = [self.precision] + (["compiled"] if self.compile else ["eager"]) + (["grad scaler"] if self.scaler else [])
        parts += ["scoring eager"] if self.compile and not self.compile_scoring else []
        parts += ["CUDA graphs"] if self.cuda_graphs else []
        parts += ["numpy's dropout masks"] if self.dropout == "numpy" else []
        parts += ["negatives drawn by torch"] if self.negatives == "torch" else []
        parts += ["last layer at the scored positions"] if self.last_layer else []
        parts += ["attention in one kernel"] if self.attention else []
        parts += ["fused optimizer step"] if self.fused_optimizer else []
        parts += ["last batch dropped"] if self.static_shapes else []
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def stored(cls, plan: dict) -> FastPlan:
        """The plan a last.pth or metrics.json holds (`as_dict`); a key an older recrunner did not write
        takes the value of its time (scoring compiled with the loss, torch's dropout masks, RecBole's negatives,
        every layer at every position, RecBole's optimizer step and attention, every batch)."""
        names = {field.name for field in fields(cls)}
        return cls(**{name: value for name, value in plan.items() if name in names})


def choose(*, precision: str = "auto", compile="auto", device_type: str = "cpu", native_bf16: bool = False,
           model: str = "", single_pass: bool = False, cuda_graphs="auto", dropout="auto", negatives="auto",
           drawn: str = "", last_layer="auto", fused="auto", learner: str = "adam", attention="auto",
           static="auto") -> FastPlan:
    """The fast plan for one run (pure), from the model's facts that hold on `device_type` (facts.py);
    `native_bf16`: the device computes bf16 natively (a CPU's avx512_bf16/amx_bf16, a GPU's
    `torch.cuda.is_bf16_supported()`); `drawn`: the training negatives' distribution (data.py); `fused`,
    `learner`: fast_fused_optimizer and RecBole's optimizer (fused.py); `attention`: fast_attention (attention.py);
    `static`: fast_static_shapes (data.py)."""
    _check_settings(precision, compile)
    masks, masks_why = dropout_choice(dropout, device_type)
    negatives, negatives_why = negatives_choice(negatives, device_type, drawn)
    last_layer, last_layer_why = last_layer_choice(last_layer, model)
    fused, fused_why = fused_choice(fused, learner, device_type)
    attention, attention_why = attention_choice(attention)
    static, static_why = static_choice(static)
    if single_pass:
        return FastPlan(reason=f"{model} is fitted in one pass without a training loop: nothing to accelerate")
    here, elsewhere = facts_of(model, device_type)
    first = {}
    for fact in here:
        first.setdefault(fact.acts, fact)
    unused = [_not_applied(elsewhere, device_type)] if elsewhere else []
    faster = first.get("accelerate")
    exact = f"{model} runs exactly on {device_type}: {first['exact'].text()}" if "exact" in first else \
        f"{model} runs exactly: {CPU_DEFAULT}; fast_compile: true or fast_precision tries it anyway" \
        if device_type == "cpu" and faster is None and precision == "auto" and compile == "auto" else ""
    if exact:  # the model as RecBole's; who draws the negatives is decided apart
        return FastPlan(reason="; ".join(text for text in (exact, negatives_why, static_why, *unused) if text),
                        negatives=negatives, static_shapes=static)
    reasons = [f"faster on {device_type}: {faster.text()}"] if faster else \
        [f"nothing measured of {model} on {device_type}: the device's defaults"] if device_type != "cpu" else []
    precision, why = _precision_choice(precision, first, here, device_type, native_bf16)
    reasons.append(why)
    compiled = compile is not False and "eager" not in first
    if "eager" in first and compile is not False:
        reasons.append(f"not compiled: {first['eager'].text()}")
    scoring = not (compiled and "eager scoring" in first)
    if not scoring:
        reasons.append(f"scoring eager: {first['eager scoring'].text()}")
    graphs, why = graphs_choice(cuda_graphs, compiled, device_type)
    reasons += [text for text in (why, masks_why, negatives_why, last_layer_why, attention_why, fused_why, static_why) if text]
    return FastPlan(precision, compiled, scaler=precision == "fp16" and device_type == "cuda", compile_scoring=scoring,
                    reason="; ".join(reasons + unused), cuda_graphs=graphs, dropout=masks, negatives=negatives,
                    last_layer=last_layer, fused_optimizer=fused, attention=attention, static_shapes=static)


def _precision_choice(precision: str, first: dict, here: list, device_type: str, native_bf16: bool) -> tuple[str, str]:
    """The loss's precision and why, from the facts that apply (`first`: the first of each act) (pure)."""
    prefer_fp32 = [f.text() for f in here if f.acts == "fp32 unless asked"]
    if "fp32" in first:
        return "fp32", f"fp32: {first['fp32'].text()}"
    if prefer_fp32 and precision == "auto":
        return "fp32", f"fp32: {'; '.join(prefer_fp32)}; fast_precision: bf16 trades that for speed"
    if precision == "auto" and device_type == "cuda":
        return ("bf16", "the GPU has bf16") if native_bf16 else ("fp16", "the GPU has no bf16: fp16 with a gradient scaler")
    if precision == "auto":
        return ("bf16", "this CPU has native bf16") if native_bf16 else ("fp32", "this CPU has no native bf16")
    return precision, f"fast_precision {precision}" + (f" (auto would be fp32: {'; '.join(prefer_fp32)})" if prefer_fp32 else "")


def _check_settings(precision, compile) -> None:
    if precision not in PRECISIONS:
        raise ConfigError(f"fast_precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if compile not in SWITCH:
        raise ConfigError(f"fast_compile must be auto, true or false, got {compile!r}")


def graphs_choice(asked, compiled: bool, device_type: str) -> tuple[bool, str]:
    """Whether the compiled training loss is replayed as CUDA graphs, and what to say (pure).

    `fast_cuda_graphs: auto` is off: on an H200 the main job's epoch trained in 1.64-1.84 s with them,
    after 33 s more of compiling, against 1.46-1.48 s with the step recorded by the training loop
    (`cuda_graph_step: auto`, docs/fast.md); `true` turns them on where they exist: compiled code on a GPU."""
    if asked not in SWITCH:
        raise ConfigError(f"fast_cuda_graphs must be auto, true or false, got {asked!r}")
    if asked is not True:
        return False, ""
    if device_type != "cuda":
        return False, f"fast_cuda_graphs: {device_type} has no CUDA graphs"
    if not compiled:
        return False, "fast_cuda_graphs: only compiled code is replayed as CUDA graphs"
    return True, ""


def _not_applied(facts: list[Fact], device_type: str) -> str:
    """`not applied on cuda: 3 facts measured on <machine> (quality, speed)` (pure)."""
    machines = sorted({f.machine for f in facts})
    kinds = sorted({f.kind for f in facts})
    return (f"not applied on {device_type}: {len(facts)} fact{'s' if len(facts) != 1 else ''} measured on "
            f"{' and '.join(machines)} ({', '.join(kinds)})")


def plan_for(config, model_name: str, single_pass: bool = False) -> FastPlan | None:
    """The plan of a run's config (None: `fast` is off): `choose` with what the device has."""
    if not setting(config, "fast"):
        return None
    device = torch.device(config["device"]) if config["device"] is not None else torch.device("cpu")
    native = torch.cuda.is_bf16_supported() if device.type == "cuda" else cpu_has_native_bf16()
    return choose(precision=setting(config, "fast_precision"), compile=setting(config, "fast_compile"),
                  device_type=device.type, native_bf16=native, model=model_name, single_pass=single_pass,
                  cuda_graphs=setting(config, "fast_cuda_graphs"), dropout=setting(config, "fast_dropout"),
                  negatives=setting(config, "fast_negatives"), drawn=training_draws(config),
                  last_layer=setting(config, "fast_last_layer"), fused=setting(config, "fast_fused_optimizer"),
                  learner=config["learner"] or "adam", attention=setting(config, "fast_attention"),
                  static=setting(config, "fast_static_shapes"))


def loader_settings(config, single_pass: bool = False, evaluation: bool = True) -> dict:
    """What fast mode changes in a run's loaders (data.py), as recrunner.data.load_data's keywords:
    evaluation batches of more users (none where the loaders have no evaluation), torch's negatives, the last
    training batch dropped."""
    plan = plan_for(config, config["model"], single_pass=single_pass)
    return {"full_sort_users": full_sort_users(config) if evaluation else None,
            "torch_negatives": plan is not None and plan.negatives == "torch",
            "drop_last": plan is not None and plan.static_shapes}


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bf16 instructions (avx512_bf16 or amx_bf16; Linux's cpuinfo flags)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def same_plan_key(plan: dict | None) -> tuple | None:
    """What must match for a fast run to resume another's checkpoint (pure): precision, compile, scaler,
    compiled scoring (a plan saved before scoring could stay eager compiled it), the dropout masks'
    generator (a plan saved before numpy's masks drew torch's), who drew the negatives, the last layer at the
    scored positions only (it draws fewer dropout masks), the fused optimizer step (other last bits), the attention
    in one kernel (its own dropout draws), the last batch dropped (other batches)."""
    if not plan:
        return None
    stored = FastPlan.stored(plan)
    if stored.changes_nothing:
        return None
    return (stored.precision, stored.compile, stored.scaler, stored.compile and stored.compile_scoring, stored.dropout,
            stored.negatives, stored.last_layer, stored.fused_optimizer, stored.attention, stored.static_shapes)


def plan_text(key: tuple | None) -> str:
    """`same_plan_key`'s value in words (pure)."""
    if key is None:
        return "exactly (no fast mode)"
    precision, compiled, scaler, scoring, masks, negatives, last_layer, fused, attention, static = key
    plan = FastPlan(precision, compiled, scaler, compile_scoring=scoring or not compiled, dropout=masks, negatives=negatives,
                    last_layer=last_layer, fused_optimizer=fused, attention=attention, static_shapes=static)
    return f"in fast mode ({plan.settings()})"
