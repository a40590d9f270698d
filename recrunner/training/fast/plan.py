"""Fast mode (`--fast`, `fast: true`): the model's loss compiled and in reduced precision, its scoring compiled.

Exact mode (the default) leaves RecBole's numbers bit-identical; fast mode trades that for speed
and says what it changed. What it does, and the one place each decision is made:

| decision                     | where                | rule                                                    |
|------------------------------|----------------------|---------------------------------------------------------|
| precision and compile        | `choose` (pure)      | `fast_precision: auto`: bf16 on a CPU with native bf16   |
|                              |                      | (avx512_bf16 / amx_bf16), else fp32; on CUDA bf16 where  |
|                              |                      | the GPU has it, else fp16 with a gradient scaler.        |
|                              |                      | `fast_compile: auto`: compile (on a CPU: CPU_GAINS only) |
| which models on a CPU        | `CPU_GAINS`          | `auto` accelerates only the models bench/bench_fast.py   |
|                              |                      | measured faster on a CPU; the others run exactly and say |
|                              |                      | so (an explicit fast_precision/fast_compile still acts)  |
| which models                 | `LIMITS`             | measured by bench/fast_matrix.py; a model listed there   |
|                              |                      | runs as the table says, with one log line saying why     |
| which scoring stays eager    | `EAGER_SCORING`      | measured by bench/bench_fast.py: compiled, its scoring   |
|                              |                      | was slower (a call's overhead outweighs a cheap method)  |
| what is accelerated          | `accelerate`         | `calculate_loss` (training), `predict` and               |
|                              |                      | `full_sort_predict` (validation and test), wrapped as    |
|                              |                      | instance attributes: state_dict keys are unchanged       |
| scores                       | `FastMethod`         | computed in fp32 (compiled): bf16 rounds scores into     |
|                              |                      | ties that moved SASRec's test MRR@10 by up to 0.0012 on  |
|                              |                      | the same weights (bench/fast_scoring.py)                 |
| random numbers               | `_eager_random`      | compiled code draws dropout masks from torch's generator,|
|                              | (accelerate.py)      | as exact mode does: a seed means the same in both modes  |
| fp16 gradients               | `OptimizerStep`      | torch's GradScaler; its state is saved in last.pth       |

Compiling: with dynamic shapes, one graph for every batch size (RecBole's last batch, evaluation
batches of any size), so which code runs a batch never depends on what ran before: a resumed
fast run computes what the uninterrupted one did. A function the compiler cannot handle runs
eagerly in the chosen precision (one log line).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...config.checks import FAST_PRECISIONS as PRECISIONS
from ...config.params import setting
from ...core.errors import ConfigError

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# Models whose fast mode is limited, from bench/fast_matrix.py and bench/fast_seeds.py (docs/fast.md):
# model -> (what runs: "eager" = the chosen precision, not compiled; "fp32" = compiled in fp32;
# "quality" = compiled in fp32 unless `fast_precision` names a precision (bf16 measured lower quality);
# "exact" = no fast mode; why).
_SPARSE_BF16 = "its sparse matrix products refuse bf16"
_SCATTER_BF16 = "its scatter mixes bf16 and fp32 tensors"
LIMITS: dict[str, tuple[str, str]] = {
    "GRU4Rec": ("exact", "its GRU is one fused kernel already; bf16 and compiling made an epoch 0.80x as fast"),
    "BPR": ("exact", "its epoch is the data loader and two embedding lookups; bf16 and compiling made an epoch "
                     "0.72x as fast on ml-100k and 0.76x on ml-1m"),
    "LightGCN": ("exact", "its epoch is sparse matrix products and the data loader; compiling made an epoch 0.77x as "
                          "fast on ml-100k and 0.98x on ml-1m"),
    **{model: ("fp32", _SPARSE_BF16) for model in ("DGCF", "GCMC", "KGIN", "MCCLK", "NCL", "NGCF", "SGL",
                                                    "SpectralCF")},
    "S3Rec": ("eager", "its pre-training loss loops over the batch in Python, which the compiler unrolls (stopped "
                       "after 14 minutes of compiling)"),
    **{model: ("fp32", _SCATTER_BF16) for model in ("GRU4RecCPR", "RepeatNet", "SASRecCPR")},
    "SASRec": ("quality", "bf16 added no speed to compiling on a CPU (2.08x against 2.10x) and its 3 seeds' test "
                          "MRR@10 left the exact range"),
    "BERT4Rec": ("quality", "bf16 added no speed to compiling on a CPU (1.97x against 2.24x) and its 3 seeds' test "
                            "MRR@10 left the exact range"),
}
# Models bench/bench_fast.py measured faster per epoch in fast mode on this project's CPU (2 cores, avx512_bf16):
# model -> the epoch's speed-up. On a CPU, `auto` leaves every other model exact: compiled, most other models
# measured were slower (_SLOWER_COMPILED), a compiled call's fixed overhead outweighing their small products.
CPU_GAINS: dict[str, str] = {
    "SASRec": "2.10-2.28x on ml-100k, 2.12x on ml-1m",
    "BERT4Rec": "2.24-2.32x on ml-100k, 2.93x on ml-1m",
    "LightSANs": "2.59x on ml-100k",
    "NextItNet": "1.67x on ml-100k",
    "FDSA": "1.62x on ml-100k",
    "SASRecF": "1.56x on ml-100k",
    "SRGNN": "1.28x on ml-100k (the compile time repaid after 6 epochs)",
}
_SLOWER_COMPILED = "compiled, an epoch of NeuMF was 0.64x as fast, DeepFM's 0.78x, BPR's 0.72x on ml-100k"

# Models whose scoring (predict, full_sort_predict) runs eagerly when their loss is compiled -> why.
_CACHED_SCORES = ("it scores from embeddings computed once per validation, a user per call on ml-1m: compiled, "
                  "each call's overhead made validation {}x as fast")
EAGER_SCORING: dict[str, str] = {"NGCF": _CACHED_SCORES.format("0.67"), "SGL": _CACHED_SCORES.format("0.81")}

METHODS = ("calculate_loss", "predict", "full_sort_predict")  # what fast mode accelerates


@dataclass(frozen=True)
class FastPlan:
    """What a fast run does; stored in last.pth and metrics.json (`as_dict`)."""

    precision: str = "fp32"   # bf16 | fp16 | fp32: the autocast dtype of the training loss
    compile: bool = False     # torch.compile the accelerated methods
    scaler: bool = False      # fp16: a gradient scaler
    compile_scoring: bool = True  # with compile: predict and full_sort_predict too (False: eager, EAGER_SCORING)
    reason: str = ""          # why this plan (device, model limits), one line

    @property
    def dtype(self):
        return _DTYPES.get(self.precision)

    @property
    def changes_nothing(self) -> bool:
        """fp32 and not compiled: the run is exact (the one place this rule is written)."""
        return self.dtype is None and not self.compile

    def describe(self) -> str:
        if self.changes_nothing:
            return f"fast mode: exact ({self.reason})"
        parts = [self.precision] + (["compiled"] if self.compile else ["eager"]) + (["grad scaler"] if self.scaler else [])
        parts += ["scoring eager"] if self.compile and not self.compile_scoring else []
        return f"fast mode: {', '.join(parts)} ({self.reason})"

    def as_dict(self) -> dict:
        return asdict(self)


def choose(*, precision: str = "auto", compile="auto", device_type: str = "cpu", native_bf16: bool = False,
           model: str = "", single_pass: bool = False) -> FastPlan | None:
    """The fast plan for one run (pure); None: the run is exact (with the reason logged by the caller).

    `native_bf16`: the device computes bf16 natively (a CPU's avx512_bf16/amx_bf16; a GPU's
    `torch.cuda.is_bf16_supported()`).
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"fast_precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if compile not in ("auto", True, False):
        raise ConfigError(f"fast_compile must be auto, true or false, got {compile!r}")
    if single_pass:
        return FastPlan(reason=f"{model} is fitted in one pass without a training loop: nothing to accelerate")
    limit, why = LIMITS.get(model, (None, ""))
    if limit == "exact":
        return FastPlan(reason=f"{model} runs exactly: {why}")
    if device_type == "cpu" and model not in CPU_GAINS and precision == "auto" and compile == "auto":
        return FastPlan(reason=f"{model} runs exactly: on a CPU, fast mode acts only where it was measured faster, and "
                               f"most models measured were not ({_SLOWER_COMPILED}); fast_compile: true or "
                               "fast_precision tries it anyway")
    reasons = []
    if limit == "fp32" or (limit == "quality" and precision == "auto"):
        precision = "fp32"
        reasons.append(f"fp32: {why}" + ("; fast_precision: bf16 trades that for speed" if limit == "quality" else ""))
    elif precision == "auto":
        if device_type == "cuda":
            precision = "bf16" if native_bf16 else "fp16"
            reasons.append("the GPU " + ("has bf16" if native_bf16 else "has no bf16: fp16 with a gradient scaler"))
        else:
            precision = "bf16" if native_bf16 else "fp32"
            reasons.append("this CPU " + ("has native bf16" if native_bf16 else "has no native bf16"))
    else:
        reasons.append(f"fast_precision {precision}" + (f" (auto would be fp32: {why})" if limit == "quality" else ""))
    compiled = compile is not False and limit != "eager"
    if limit == "eager" and compile is not False:
        reasons.append(f"not compiled: {why}")
    scoring = not (compiled and model in EAGER_SCORING)
    if not scoring:
        reasons.append(f"scoring eager: {EAGER_SCORING[model]}")
    return FastPlan(precision, compiled, scaler=precision == "fp16" and device_type == "cuda", compile_scoring=scoring,
                    reason="; ".join(reasons))


def plan_for(config, model_name: str, single_pass: bool = False) -> FastPlan | None:
    """The plan of a run's config (None: `fast` is off): `choose` with what the device has."""
    if not setting(config, "fast"):
        return None
    device = torch.device(config["device"]) if config["device"] is not None else torch.device("cpu")
    native = torch.cuda.is_bf16_supported() if device.type == "cuda" else cpu_has_native_bf16()
    return choose(precision=setting(config, "fast_precision"), compile=setting(config, "fast_compile"),
                  device_type=device.type, native_bf16=native, model=model_name, single_pass=single_pass)


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bf16 instructions (avx512_bf16 or amx_bf16; Linux's cpuinfo flags)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def share_compile_cache(folder: Path) -> None:
    """Let every run under one output folder share the compiler's cache, unless the user chose one.

    torch sets TORCHINDUCTOR_CACHE_DIR to its default (a folder in /tmp) as soon as it imports its
    compiler, so a value equal to that default is not the user's choice.
    """
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or current == _torch_default_cache_dir():
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)


def _torch_default_cache_dir() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # another torch: only an unset variable is replaced
        return None
    return os.path.abspath(default_cache_dir())


def same_plan_key(plan: dict | None) -> tuple | None:
    """What must match for a fast run to resume another's checkpoint (pure): precision, compile, scaler,
    compiled scoring (a plan saved before scoring could stay eager compiled it)."""
    if not plan:
        return None
    stored = FastPlan(plan.get("precision", "fp32"), bool(plan.get("compile")), bool(plan.get("scaler")),
                      bool(plan.get("compile_scoring", True)))
    if stored.changes_nothing:
        return None
    return stored.precision, stored.compile, stored.scaler, stored.compile and stored.compile_scoring


def plan_text(key: tuple | None) -> str:
    """`same_plan_key`'s value in words (pure)."""
    if key is None:
        return "exactly (no fast mode)"
    precision, compiled, scaler, scoring = key
    extras = (", grad scaler" if scaler else "") + (", scoring eager" if compiled and not scoring else "")
    return f"in fast mode ({precision}, {'compiled' if compiled else 'eager'}{extras})"
