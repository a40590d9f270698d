"""Parameters: recrunner's own keys and their defaults, YAML and --set values read, keys, types and
metrics checked. Where the YAML layers come from is recrunner.config.layers.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ..core.errors import ConfigError

# Keys RecBole sets itself or reads without shipping a default for them.
RECBOLE_DERIVED_KEYS = frozenset({
    "model", "dataset", "device", "single_spec", "local_rank", "world_size", "offset",
    "ip", "port", "config_files", "MODEL_TYPE", "MODEL_INPUT_TYPE", "eval_type", "eval_neg_sample_args",
    "valid_neg_sample_args", "test_neg_sample_args", "is_pretrain", "pretrain_path", "save_step",
    "train_stage", "pre_model_path", "kg_reverse_r",
})

# Keys a RecBole 1.2.1 model reads from its config that none of RecBole's YAML files define: RecBole gives
# None unless they are set, and what they switch on is reachable only by setting them. Not here: keys
# whose only use fails (FEARec's use_filter reads a weight RecBole never makes) or is none (HRM's reg_weight).
RECBOLE_UNDECLARED_KEYS: dict[str, tuple[str, ...]] = {
    "FEARec": ("contrast", "tau", "sim"),  # FEARec.__init__: its contrastive losses (contrast us, un, su, us_x; sim dot, cos)
    "AutoInt": ("has_residual",),          # AutoInt.__init__: its residual connection
    "DiffRec": ("norm",), "LDiffRec": ("norm",),  # DiffRec.__init__: its denoiser's input normalised
    "KD_DAGFM": ("cin",),                  # kd_dagfm.py CIN.__init__: the CIN teacher's layer sizes
}
CONTEXT_UNDECLARED_KEYS = ("double_tower",)  # ContextRecommender.__init__: user and item fields embedded apart


def undeclared_keys(model: str, context_aware: bool) -> dict[str, None]:
    """The keys `model` reads without a default anywhere in RecBole's YAML files, each with RecBole's None (pure)."""
    keys = RECBOLE_UNDECLARED_KEYS.get(model, ()) + (CONTEXT_UNDECLARED_KEYS if context_aware else ())
    return dict.fromkeys(keys)

# recrunner's own keys with their defaults: the lowest layer above RecBole's (docs/configuration.md).
RECRUNNER_DEFAULTS: dict[str, Any] = {
    "checkpoint_every": 1,              # write checkpoints/last.pth every N epochs
    "checkpoint_every_steps": None,     # also write last.pth every N optimizer steps, within epochs
    "checkpoint_every_minutes": None,   # also write last.pth when M minutes passed since the last one
    "eval_every_steps": None,           # validate every N optimizer steps instead of every eval_step epochs
    "log_every_steps": None,            # training loss and learning rate every N optimizer steps
    "save_total_limit": None,           # also keep the newest N epoch-NNNN.pth copies of last.pth
    "early_stop_metric": None,          # metric watched by early stopping; None: valid_metric
    "early_stop_min_delta": 0.0,        # smallest change that counts as an improvement
    "nan_guard": True,                  # a non-finite loss or score fails the run with its reason
    "detect_anomaly": False,            # torch's autograd anomaly detection (RecBole turns it on; slow)
    "progress_bar": True,               # progress within each epoch: one updating line on a terminal, else log lines
    "progress_every": 60,               # off a terminal: seconds between progress lines while an epoch trains
    "lr_scheduler": None,               # constant | step | cosine | plateau; None: RecBole's fixed rate
    "lr_warmup": 0,                     # linear warmup length, in lr_interval units
    "lr_interval": "epoch",             # epoch | batch: what one schedule step is
    "lr_step_size": 10,                 # step: multiply by lr_gamma every lr_step_size steps
    "lr_gamma": 0.1,                    # step and plateau: the multiplicative factor
    "lr_patience": 2,                   # plateau: validations without improvement before lowering
    "lr_min": 0.0,                      # cosine and plateau: the floor
    "gradient_accumulation_steps": 1,   # batches whose gradients are averaged before a step
    "data_cache": True,                 # reuse the filtered, split dataset across runs (<output>/.cache)
    "trackers": [],                     # external loggers: wandb, mlflow (pip install 'recrunner[wandb]')
    "mlflow_tracking_uri": None,        # None: runs/<sweep>/mlruns
    "mlflow_experiment": None,          # None: MLflow's default experiment
    "deterministic": False,             # torch's deterministic kernels: GPU runs repeat bit for bit (docs/runs.md)
    "batches_on_device": True,          # a GPU run's tables copied to the GPU once, batches gathered there (docs/fast.md)
    "read_loss_every": "auto",          # auto | N: batch losses read from a GPU every N batches, not each (docs/fast.md)
    "cuda_graph_step": "auto",          # auto | true | false: the loss's forward and backward replayed from CUDA graphs (auto: fast mode on a GPU; docs/fast.md)
    "cuda_graph_optimizer": "auto",     # auto | true | false: the optimizer's step recorded with forward and backward in one CUDA graph (auto: off; docs/fast.md)
    "cuda_graph_eval": "auto",          # auto | true | false: a validation's one-user batches scored from one CUDA graph, many a replay (auto: off; docs/fast.md)
    "tf32": False,                      # a GPU's fp32 matrix products in TF32: faster, numbers change (docs/fast.md)
    "fast": False,                      # fast mode: compiled, reduced precision (docs/fast.md); off: exact
    "fast_precision": "auto",           # auto | bf16 | fp16 | fp32: autocast dtype in fast mode
    "fast_compile": "auto",             # auto | true | false: torch.compile in fast mode
    "fast_cuda_graphs": "auto",         # auto | true | false: the compiled loss replayed as CUDA graphs on a GPU
    "fast_dropout": "auto",             # auto | torch | numpy: dropout masks from numpy's SFC64 on a CPU (auto), or torch's
    "fast_last_layer": "auto",          # auto | true | false: SASRec's, SASRecF's, FDSA's, BERT4Rec's last layer only where it is read (auto: on)
    "fast_attention": "auto",           # auto | true | false: RecBole's attention by scaled_dot_product_attention (auto: off)
    "fast_fused_optimizer": "auto",     # auto | true | false: the optimizer's step as one fused kernel (auto: on a GPU)
    "fast_static_shapes": "auto",       # auto | true | false: training's last, shorter batch dropped, the loss compiled for one shape (auto: off)
    "fast_negatives": "auto",           # auto | numpy | torch: training negatives drawn by torch where the batch is (auto: on a GPU)
    "pop_counts": "batches",            # batches | interactions: Pop counts an item once per training batch it is in (RecBole 1.2.1), or every interaction
    "nproc": 1,                         # processes (one per GPU) that train the run together (docs/distributed.md)
    "ddp_timeout": 300,                 # seconds a process waits for the others before the run fails
}
RECRUNNER_KEYS = frozenset(RECRUNNER_DEFAULTS)

# Keys that change what a run shows or keeps, never its numbers: not part of its id or fingerprint,
# so `--set progress_every=10` continues the same run.
NOT_IDENTITY_KEYS = frozenset({
    "progress_bar", "progress_every", "show_progress", "checkpoint_every", "save_total_limit", "data_cache",
    "checkpoint_every_steps", "checkpoint_every_minutes", "log_every_steps",
    "trackers", "mlflow_tracking_uri", "mlflow_experiment", "wandb_project", "log_wandb", "state", "detect_anomaly", "ddp_timeout",
    "batches_on_device",  # where batches are built, never what they hold
    "read_loss_every",  # when losses are read from the device, never their values
    "cuda_graph_step",  # how the step's kernels are launched, never which (the GPU check compares the numbers)
    "cuda_graph_eval",  # how a validation's kernels are launched, never which
    "gpu_id",  # where a run runs, not what it is: a run resumes on another GPU
})

# RecBole keys that take one string or a list of them (a preset may give the string form)
STRING_OR_LIST_KEYS = frozenset({"additional_feat_suffix", "metrics"})


def setting(config, key: str) -> Any:
    """A recrunner key from a RecBole Config (None when missing), falling back to its default."""
    value = config[key]
    return RECRUNNER_DEFAULTS[key] if value is None else value


def load_yaml(path: Path) -> dict:
    """Read one YAML mapping; a malformed file is a ConfigError naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.load(path.read_text(), Loader=_loader())
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a text file; a config file is YAML (key: value per line)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"malformed YAML in {where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of key: value, not {type(data).__name__}")
    return data


@functools.lru_cache(maxsize=None)
def _loader():
    """A YAML loader that reads 1e-3 as a float, like RecBole's own loader does."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |\.[0-9_]+(?:[eE][-+][0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
            re.X,
        ),
        list("-+0123456789."),
    )
    return Loader


def parse_set_options(options: Iterable[str]) -> dict:
    """`--set key=value` pairs to a dict; values are YAML (`epochs=5`, `topk=[10,20]`)."""
    result = {}
    for option in options:
        key, sep, raw = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {option!r}")
        try:
            result[key] = yaml.load(raw, Loader=_loader()) if raw.strip() else None
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r} as YAML") from None
    return result


def check_overrides(overrides: Mapping, defaults: Mapping, source: str = "--set", model: str | None = None) -> dict:
    """Reject unknown keys and values of the wrong type; return overrides with numbers coerced.

    `defaults` maps every key RecBole knows for this model and dataset to its default value; `model`
    names the model in the hint for a key with no close match (another model's, in a grid)."""
    checked = {}
    for key, value in overrides.items():
        if key not in defaults and key not in RECBOLE_DERIVED_KEYS and key not in RECRUNNER_KEYS:
            known = sorted(set(defaults) | RECRUNNER_KEYS)
            close = difflib.get_close_matches(key, known, n=3)
            if close:
                hint = f"; did you mean {', '.join(close)}?"
            elif model:
                hint = (f"; neither RecBole's overall.yaml nor {model}'s yaml has it (a grid gives a parameter only "
                        "some of its models have under model_params: {Model: {key: values}})")
            else:
                hint = "; see RecBole's overall.yaml and the model's yaml"
            raise ConfigError(f"{source}: unknown config key {key!r}{hint}")
        checked[key] = coerce_value(key, value, defaults.get(key, RECRUNNER_DEFAULTS.get(key)), source)
    return checked


def coerce_value(key: str, value: Any, default: Any, source: str = "--set") -> Any:
    """Check `value` against the type of RecBole's `default` (pure; None default accepts all)."""
    if _numbers(value) and (isinstance(default, str) or (key.endswith("_interval") and len(value) == 2)):
        return "[" + ",".join(str(v) for v in value) + "]"  # YAML read `[10,60]`: RecBole's interval string
    if default is None or value is None:
        return value

    def wrong(expected: str):
        sweep = (f"; to sweep values, give them in a grid (params: {{{key}: {value!r}}}, --grid FILE)"
                 if isinstance(value, list) and source == "--set" else "")
        return ConfigError(f"{source}: {key} expects {expected} (default {default!r}), got {value!r}{sweep}")

    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if isinstance(default, (int, float)):
        if isinstance(value, bool):
            raise wrong("a number")
        if isinstance(value, str):
            try:
                value = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                raise wrong("a number") from None
        if not isinstance(value, (int, float)):
            raise wrong("a number")
        if isinstance(default, int) and isinstance(value, float):
            if not value.is_integer():
                raise wrong("an integer")
            value = int(value)
        return value
    if isinstance(default, dict) and not isinstance(value, dict):
        raise wrong("a mapping")
    if key in STRING_OR_LIST_KEYS and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if isinstance(default, str) and isinstance(value, (dict, list)):
        raise wrong("a string (quote it: key='...')")
    return value


def _numbers(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)


def check_valid_metric(config) -> None:
    """Every name in `metrics` must be a metric RecBole has; valid_metric one this run computes."""
    from recbole.evaluator.register import metrics_dict

    metrics = config["metrics"]
    for metric in [metrics] if isinstance(metrics, str) else list(metrics or []):
        if str(metric).lower() not in metrics_dict:
            raise ConfigError(unknown_metric(metric, sorted(metrics_dict)))
    require_metric(config, "valid_metric", config["valid_metric"])


def unknown_metric(metric, available: list[str]) -> str:
    """The message for a `metrics` entry RecBole does not have (pure)."""
    close = difflib.get_close_matches(str(metric).lower(), available, n=2)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"metrics: RecBole has no metric {metric!r}; {hint}available: {', '.join(available)}"


def require_metric(config, key: str, metric) -> str:
    """`metric` (the value of setting `key`) lower-cased, or a ConfigError listing what this run computes."""
    available = available_metrics(config["metrics"], config["topk"])
    if str(metric).lower() not in available:
        raise ConfigError(f"{key} {metric!r} is not computed by this run; "
                          f"available: {', '.join(available)} (change {key}, metrics or topk)")
    return str(metric).lower()


def available_metrics(metrics, topk) -> list[str]:
    """Names RecBole's evaluator returns for these settings (pure)."""
    from recbole.evaluator.base_metric import TopkMetric
    from recbole.evaluator.register import metrics_dict

    metrics = [metrics] if isinstance(metrics, str) else list(metrics or [])
    topk = [topk] if isinstance(topk, int) else list(topk or [])
    names = []
    for metric in metrics:
        metric_class = metrics_dict.get(metric.lower())
        if metric_class is not None and issubclass(metric_class, TopkMetric):
            names += [f"{metric.lower()}@{k}" for k in topk]
        else:
            names.append(metric.lower())
    return names


def eval_modes(eval_args) -> dict[str, str]:
    """{"valid": mode, "test": mode} of RecBole's `eval_args` (pure): its `mode` is one string for both
    phases or one per phase ("full", "uni100", "pop100", "labeled"); "full" where unset."""
    mode = (eval_args or {}).get("mode") or "full"
    modes = mode if isinstance(mode, dict) else {"valid": mode, "test": mode}
    return {phase: str(modes.get(phase, "full")) for phase in ("valid", "test")}
