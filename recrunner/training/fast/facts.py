"""What fast mode knows of each model: one fact at a time, each with the device it was measured on.

Three kinds of fact, kept apart because they travel differently between devices:

| kind      | what it says                                      | on which devices `choose` applies it          |
|-----------|---------------------------------------------------|-----------------------------------------------|
| `cannot`  | a kernel refuses a precision, the compiler fails  | every device: measured on one, assumed on the |
|           |                                                   | others until measured there (what refuses bf16 |
|           |                                                   | on a CPU is not tried on a GPU blind)         |
| `speed`   | fast mode measured faster or slower per epoch     | the device type it was measured on only       |
| `quality` | a precision moved the test metrics out of the     | the device type it was measured on only       |
|           | exact range over seeds                            |                                               |

What a fact makes `auto` do (`acts`):

| acts             | the plan                                                         | an explicit setting   |
|------------------|------------------------------------------------------------------|-----------------------|
| `exact`          | no fast mode (measured slower on this device)                    | still exact           |
| `fp32`           | compiled in fp32 (`cannot`: a kernel refuses bf16)               | still fp32            |
| `fp32 unless asked` | compiled in fp32 (`speed`: bf16 no faster; `quality`: worse) | `fast_precision` wins |
| `eager`          | the chosen precision, not compiled (the compiler fails)         | still eager           |
| `eager scoring`  | the loss compiled, scoring eager (compiled scoring was slower)   |                       |
| `accelerate`     | measured faster on this device (on a CPU, `auto` accelerates     |                       |
|                  | only these: most models measured there were slower)              |                       |

A device type with no fact of a model gets the device's defaults: on a GPU, bf16 (fp16 with a
gradient scaler where the GPU has no bf16) and compiled. bench/bench_fast.py, bench/fast_matrix.py
and bench/fast_seeds.py measure the facts (docs/fast.md has their tables); the GPU check
(bench/gpu_check.py) measures the main job on a GPU. The sequential models' CPU speed facts were
measured again on 2026-11-26 with torch's anomaly detection off, as runs train: bench_fast.py had
left RecBole's on until then, which slowed exact mode's backward far more than fast mode's compiled
one (BENCHMARKS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

CPU = "2-core CPU, avx512_bf16"  # the project's development machine (BENCHMARKS.md)
AMD = "2-core AMD EPYC, AVX2"  # the project's other CPU machine, without avx512 (BENCHMARKS.md)
H200 = "NVIDIA H200"
KINDS = ("cannot", "speed", "quality")
ACTS = ("exact", "fp32", "fp32 unless asked", "eager", "eager scoring", "accelerate")


@dataclass(frozen=True)
class Fact:
    kind: str         # cannot | speed | quality
    acts: str         # what it makes `auto` do (ACTS)
    device_type: str  # cpu | cuda: where it was measured
    machine: str      # that device, in words
    why: str          # what was measured

    def __post_init__(self):  # a slip in the table fails at import, not silently in `choose`
        if self.kind not in KINDS or self.acts not in ACTS:
            raise ValueError(f"a fast-mode fact of kind {self.kind!r} that acts {self.acts!r}: kinds {KINDS}, acts {ACTS}")

    def applies_on(self, device_type: str) -> bool:
        return self.kind == "cannot" or self.device_type == device_type

    def text(self) -> str:
        """`what was measured [the machine it was measured on]`"""
        return f"{self.why} [{self.machine}]"


def _cpu(kind: str, acts: str, why: str) -> Fact:
    return Fact(kind, acts, "cpu", CPU, why)


_SPARSE_BF16 = _cpu("cannot", "fp32", "its sparse matrix products refuse bf16")
_SCATTER_BF16 = _cpu("cannot", "fp32", "its scatter mixes bf16 and fp32 tensors")
_CACHED_SCORES = ("it scores from embeddings computed once per validation, a user per call on ml-1m: compiled, "
                  "each call's overhead made validation {}x as fast")

FACTS: dict[str, tuple[Fact, ...]] = {
    "GRU4Rec": (_cpu("speed", "exact", "its GRU is one fused kernel already; bf16 and compiling made an epoch 0.80x "
                                       "as fast"),),
    "BPR": (_cpu("speed", "exact", "its epoch is the data loader and two embedding lookups; bf16 and compiling made an "
                                   "epoch 0.72x as fast on ml-100k and 0.76x on ml-1m"),),
    "LightGCN": (_cpu("speed", "exact", "its epoch is sparse matrix products and the data loader; compiling made an "
                                        "epoch 0.77x as fast on ml-100k and 0.98x on ml-1m"),),
    **{model: (_SPARSE_BF16,) for model in ("DGCF", "GCMC", "KGIN", "MCCLK", "NCL", "SpectralCF")},
    "NGCF": (_SPARSE_BF16, _cpu("speed", "eager scoring", _CACHED_SCORES.format("0.67"))),
    "SGL": (_SPARSE_BF16, _cpu("speed", "eager scoring", _CACHED_SCORES.format("0.81"))),
    "S3Rec": (_cpu("cannot", "eager", "its pre-training loss loops over the batch in Python, which the compiler unrolls "
                                      "(stopped after 14 minutes of compiling)"),),
    **{model: (_SCATTER_BF16,) for model in ("GRU4RecCPR", "RepeatNet", "SASRecCPR")},
    "SASRec": (Fact("speed", "accelerate", "cpu", AMD, "2.98x an epoch on ml-1m (633 s against 1888 s; 1.85x "
                                                       "with its last layer at every position)"),
               _cpu("speed", "accelerate", "2.41x an epoch on ml-100k with numpy's dropout masks (59.4 s against "
                                           "143.3 s; 1.16x with torch's), 1.40x on ml-1m with torch's"),
               _cpu("quality", "fp32 unless asked", "trained in bf16, its 3 seeds' test MRR@10 left the exact range"),
               Fact("speed", "accelerate", "cuda", H200, "bf16 and compiled, its step from CUDA graphs, its last layer "
                                                         "at the scored positions: an epoch of the main job took "
                                                         "1.27-1.41 s against exact mode's 4.26-4.58 s (3.42-3.58 s with "
                                                         "the eager step); fp32 compiled was slower than exact mode")),
    "BERT4Rec": (Fact("speed", "accelerate", "cpu", AMD, "2.03x an epoch on ml-100k (111.0 s against 225.2 s; 1.52x "
                                                         "with its last layer at every position)"),
                 _cpu("speed", "accelerate", "1.92x an epoch on ml-100k with numpy's dropout masks (83.5 s against "
                                             "160.6 s; 1.27x with torch's), 1.71x on ml-1m with torch's"),
                 _cpu("quality", "fp32 unless asked", "trained in bf16, its 3 seeds' test MRR@10 left the exact range")),
    "LightSANs": (_cpu("speed", "accelerate", "2.67x an epoch on ml-100k with numpy's dropout masks (52.9 s against "
                                              "141.4 s; 1.48x with torch's)"),),
    "NextItNet": (_cpu("speed", "accelerate", "1.63x an epoch on ml-100k"),),
    "FDSA": (Fact("speed", "accelerate", "cpu", AMD, "2.43x an epoch on ml-100k (121.7 s against 296.0 s; 1.66x "
                                                     "with its last layers at every position)"),
             _cpu("speed", "accelerate", "1.95x an epoch on ml-100k with numpy's dropout masks (152.7 s against "
                                         "297.7 s; 1.13x with torch's)"),),
    # on another CPU (avx512_bf16), before numpy's dropout masks and the last layer, bf16 and compiling made
    # SASRecF's epoch 1.02x as fast: it ran exactly on CPUs until 2026-11-29 (BENCHMARKS.md)
    "SASRecF": (Fact("speed", "accelerate", "cpu", AMD, "2.05x an epoch on ml-100k (84.1 s against 172.3 s; 1.42x "
                                                        "with its last layer at every position)"),),
    "GCSAN": (Fact("speed", "accelerate", "cpu", AMD, "2.20x an epoch on ml-100k (83.3 s against 183.4 s; 1.94x "
                                                      "with its last layer at every position)"),),
    "SRGNN": (Fact("speed", "exact", "cpu", AMD, "compiled with its session graphs from array operations, an epoch "
                                                 "was 0.92-0.96x as fast on ml-100k (34.1-35.6 s against 32.8 s)"),
              _cpu("speed", "exact", "bf16 and compiling made an epoch 0.74x as fast on ml-100k (its session "
                                     "graphs then built by RecBole's loop on the host)")),
}

# Why a CPU runs a model without an `accelerate` fact exactly under `auto`: what was measured there.
CPU_DEFAULT = ("on a CPU, fast mode acts only where it was measured faster, and most models measured were not "
               "(compiled, an epoch of NeuMF was 0.64x as fast, DeepFM's 0.78x, BPR's 0.72x on ml-100k)")


def facts_of(model: str, device_type: str) -> tuple[list[Fact], list[Fact]]:
    """(the facts of `model` that apply on `device_type`, those measured elsewhere) (pure)."""
    facts = FACTS.get(model, ())
    return [f for f in facts if f.applies_on(device_type)], [f for f in facts if not f.applies_on(device_type)]


def accelerated_on(device_type: str) -> list[str]:
    """The models measured faster in fast mode on `device_type` (pure)."""
    return [model for model, facts in FACTS.items()
            if any(f.acts == "accelerate" and f.device_type == device_type for f in facts)]
