"""What a request can be checked against before torch and RecBole are imported (well under a second).

`impossible_values(params)` is the pure rule for values RecBole would accept and then misuse
(a negative epoch count, a batch size of 0, an unknown optimizer it silently replaces by Adam).
`check_request_early(...)` runs it, with the keys and types RecBole's own YAML files define, over
each source of parameters (--set, each --config-file, the grid file, naming the line), and checks
the output folder and a --resume-from path: the CLI calls it before any heavy import. `prepare`
checks the merged parameters again with RecBole's resolved configuration of each cell.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from .params import RECRUNNER_DEFAULTS, coerce_value, unknown_metric
from ..core.errors import ConfigError
from .choices import choice_problem
from .recbole_files import METRICS, VALUE_METRICS, recbole_keys, recbole_model_defaults_file, recbole_overall_defaults

FAST_PRECISIONS = ("auto", "bf16", "fp16", "fp32")  # fast mode's autocast dtypes (recrunner.training.fast.plan)
SWITCH = ("auto", True, False)  # a setting decided per device or model unless true or false (fast_compile, ...)
FAST_DROPOUTS = ("auto", "torch", "numpy")  # where fast mode's dropout masks come from (recrunner.training.fast.dropout)
FAST_NEGATIVES = ("auto", "numpy", "torch")  # who draws fast mode's training negatives (recrunner.training.fast.data)
POP_COUNTS = ("batches", "interactions")  # Pop's counts: RecBole 1.2.1's, or every interaction (seams/models.py)
_CHOICES = {"fast_precision": (FAST_PRECISIONS, "a precision"), "fast_dropout": (FAST_DROPOUTS, "a generator of masks"),
            "fast_negatives": (FAST_NEGATIVES, "a generator of negatives"), "pop_counts": (POP_COUNTS, "a way to count")}
_SWITCHES = ("fast_compile", "fast_cuda_graphs", "fast_last_layer", "fast_fused_optimizer", "fast_attention", "fast_static_shapes",
             "cuda_graph_step", "cuda_graph_optimizer", "cuda_graph_eval")  # auto | true | false
LEARNERS = ("adam", "adamw", "sgd", "adagrad", "rmsprop", "sparse_adam")  # recbole.trainer.Trainer._build_optimizer
_AT_LEAST_ONE = {"epochs", "train_batch_size", "eval_batch_size", "checkpoint_every", "gradient_accumulation_steps",
                 "eval_every_steps", "checkpoint_every_steps", "log_every_steps",
                 "n_heads", "num_heads", "MAX_ITEM_LIST_LENGTH", "save_total_limit", "topk"}
_WHOLE_STEPS = {"eval_every_steps", "checkpoint_every_steps", "log_every_steps"}  # recrunner.training.loop.steps
_WHOLE = {"nproc": "nproc counts processes"} | {key: f"{key} counts optimizer steps" for key in _WHOLE_STEPS}
_NOT_NEGATIVE = {"stopping_step", "eval_step", "n_layers", "num_layers", "weight_decay", "lr_warmup",
                 "early_stop_min_delta", "clip_grad_norm.max_norm"}


def impossible_values(params: Mapping[str, Any]) -> list[str]:
    """One message per value no run could use (pure); empty when all are possible."""
    problems = []
    for key, value in _flat(params).items():
        if value is None:
            continue
        name = key.rsplit(".", 1)[-1]
        if problem := choice_problem(key, value):  # hidden_act, loss_type, eval_args (config/choices.py)
            problems.append(problem)
            continue
        if key == "read_loss_every":  # recrunner.training.loop.losses
            problems += [problem] if (problem := read_loss_every_problem(value)) else []
            continue
        numbers = value if isinstance(value, list) else [value]
        if key in _SWITCHES and not all(v in SWITCH and type(v) in (str, bool) for v in numbers):  # 1 == True, yet no switch
            problems.append(f"{key} {value!r} must be auto, true or false")
            continue
        if key in _WHOLE and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in numbers):
            problems.append(f"{_WHOLE[key]}: a whole number >= 1, got {value!r}")
            continue
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
            if key == "learner" and str(value).lower() not in LEARNERS:
                problems.append(f"learner {value!r} is not an optimizer RecBole knows (it would silently use adam); "
                                f"choose one of {', '.join(LEARNERS)}")
            if key in _CHOICES and value not in _CHOICES[key][0]:
                choices, what = _CHOICES[key]
                problems.append(f"{key} {value!r} is not {what}; choose one of {', '.join(choices)}")
            unknown = [m for m in numbers if key == "metrics" and METRICS and str(m).lower() not in METRICS]
            if unknown:
                problems.append(unknown_metric(unknown[0], METRICS))
            elif key == "metrics" and mixed_metrics(value):
                problems.append(mixed_metrics(value))
            continue
        if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
            problems.append(f"{key} must be finite, got {value!r}")
        elif (key in _AT_LEAST_ONE or name.endswith("_size")) and any(v < 1 for v in numbers):
            problems.append(f"{key} must be a whole number >= 1, got {value!r}")
        elif key in _NOT_NEGATIVE and any(v < 0 for v in numbers):
            problems.append(f"{key} must be >= 0, got {value!r}")
        elif key in ("learning_rate", "checkpoint_every_minutes", "ddp_timeout") and any(v <= 0 for v in numbers):
            problems.append(f"{key} must be > 0, got {value!r}")
        elif "dropout" in name and any(not 0 <= v < 1 for v in numbers):
            problems.append(f"{key} is a probability: it must be in [0, 1), got {value!r}")
    return problems


def read_loss_every_problem(value) -> str | None:
    """Why `read_loss_every` cannot be `value` (pure), or None: auto, or a whole number >= 1."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return f"read_loss_every must be auto or a whole number >= 1, got {value!r}"


def mixed_metrics(metrics) -> str | None:
    """Why `metrics` cannot be computed together (ranking and value metrics), or None (pure)."""
    names = [metrics] if isinstance(metrics, str) else list(metrics or [])
    value = [m for m in names if str(m).lower() in VALUE_METRICS]
    ranking = [m for m in names if str(m).lower() in METRICS and str(m).lower() not in VALUE_METRICS]
    if value and ranking:
        return (f"metrics mixes ranking metrics ({', '.join(map(str, ranking))}) and value metrics "
                f"({', '.join(map(str, value))}), which RecBole cannot compute in one run: ranking metrics need "
                "full or sampled evaluation, value metrics labeled (eval_args mode); run them as two runs")
    return None


def check_values(params: Mapping[str, Any], source: str, lines: Mapping[str, int] | None = None) -> None:
    """ConfigError naming `source` (and the line, when known) for the first impossible value."""
    for problem in impossible_values(params):
        key = problem.split(" ", 1)[0].rstrip(":")
        raise ConfigError(f"{_where(source, lines, key)}: {problem}")


def check_request_early(sources: list[tuple[str, Mapping, Mapping[str, int] | None]], models=(), *,
                        output: Path | None = None, resume_from: Path | None = None) -> None:
    """Every check that needs neither torch nor RecBole imported; `sources`: (name, params, key lines)."""
    defaults = {**recbole_overall_defaults(), **RECRUNNER_DEFAULTS}
    for model in models:
        defaults.update(recbole_model_defaults_file(model))
    for source, params, lines in sources:
        _check_params(params, defaults, source, lines)
    if output is not None:
        check_output_folder(output)
    if resume_from is not None and not Path(resume_from).is_file():
        raise ConfigError(f"--resume-from {resume_from}: no such file; give a run's checkpoints/last.pth "
                          "(or an epoch-NNNN.pth)")


def check_grid_cells(cells, source: str, lines: Mapping[str, int] | None) -> None:
    """Each cell a grid file expands to: known keys, right types, possible values, naming the file and line."""
    if not cells:
        raise ConfigError(f"{source}: the grid expands to no cell; give at least one model, dataset and value")
    for cell in cells:
        defaults = {**recbole_overall_defaults(), **RECRUNNER_DEFAULTS, **recbole_model_defaults_file(cell.model)}
        _check_params(cell.params, defaults, source, lines)


def _check_params(params: Mapping, defaults: Mapping, source: str, lines: Mapping[str, int] | None) -> None:
    """Known keys, values of their defaults' types, possible values; a ConfigError naming source and line."""
    known = recbole_keys()
    for key, value in params.items():
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; see RecBole's overall.yaml and the model's yaml"
            raise ConfigError(f"{_where(source, lines, key)}: unknown config key {key!r}{hint}")
        coerce_value(key, value, defaults.get(key), _where(source, lines, key))
    check_values(params, source, lines)


_PLAIN_NAME = re.compile(r"\w[\w.-]*")


def plain_name(what: str, name) -> str:
    """`name` when it can name a folder under the output or data folder and nothing else (no path,
    no '..'); else a ConfigError. The one check for sweep, dataset and model names and `data import --name`."""
    if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name):
        raise ConfigError(f"{what} {name!r}: use letters, digits, '-', '_' and '.', starting with a letter or digit "
                          "(it names a folder)")
    return name


def plain_sweep(sweep: str) -> str:
    """A run's sweep: a plain name, or a search's or race's own folder under one (`<name>/final`,
    `<name>/select`: recrunner.core.layout); else a ConfigError (`plain_name`)."""
    from ..core.layout import FINAL, SELECT

    name, _, inner = str(sweep).partition("/")
    if inner and inner not in (FINAL, SELECT):
        plain_name("sweep", sweep)
    plain_name("sweep", name if inner else sweep)
    return sweep


def check_output_folder(output: Path) -> None:
    """The output folder must be a folder recrunner can write, or creatable as one."""
    output = Path(output)
    existing = next((p for p in [output, *output.parents] if p.exists()), None)
    if existing is None:
        return
    if not existing.is_dir():
        raise ConfigError(f"--output {output}: {existing} is a file, not a folder; give a folder for the runs")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--output {output}: {existing} is not writable; give a folder you can write to")


def key_lines(path: Path) -> dict[str, int]:
    """The 1-based line of the first occurrence of each mapping key in a YAML file (pure read)."""
    try:
        root = yaml.compose(Path(path).read_text())
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return {}
    lines: dict[str, int] = {}
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines.setdefault(str(key.value), key.start_mark.line + 1)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return lines


def _flat(params: Mapping, prefix: str = "") -> dict:
    flat = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and key not in ("eval_args", "train_neg_sample_args"):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _where(source: str, lines: Mapping[str, int] | None, key: str) -> str:
    line = (lines or {}).get(key.split(".")[0])
    return f"{source}:{line}" if line else source
