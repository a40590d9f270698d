"""Finding a dataset's atomic files, fetching a known one, and building RecBole's data."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

import yaml

from ..core.errors import ConfigError, DataError, DatasetNotFoundError
from ..core.docs import page
from ..seams.dataset import dataset_class_name

FIELD_TYPES = ("token", "token_seq", "float", "float_seq")  # recbole.utils.enum_type.FeatureType
ATOMIC_SUFFIXES = ("inter", "user", "item", "kg", "link", "net")
SETTINGS_FILE = "dataset.yaml"  # a dataset's own settings, beside its atomic files (data.importing writes it)


def builtin_dataset_dir() -> Path:
    """Where the recbole package ships its example datasets (ml-100k)."""
    import recbole

    return Path(recbole.__file__).parent / "dataset_example"


def has_atomic_files(folder: Path, name: str) -> bool:
    return (folder / name / f"{name}.inter").is_file()


CONTEXT_SECTION = "context_aware"  # a settings file's section read by context-aware models only


def dataset_settings(data_path: Path, name: str, context_aware: bool) -> dict:
    """The settings beside the dataset's atomic files (`<name>/dataset.yaml`; {} if none): a layer
    of every run on it. Its `context_aware` section applies on top for context-aware models only,
    as RecBole's own ml-100k preset loads the user and item features for those models alone."""
    from ..config.params import load_yaml

    path = Path(data_path) / name / SETTINGS_FILE
    if not path.is_file():
        return {}
    settings = load_yaml(path)
    section = settings.pop(CONTEXT_SECTION, None) or {}
    if not isinstance(section, dict):
        raise DataError(f"{path}: {CONTEXT_SECTION} must be a mapping of settings, not {type(section).__name__}")
    return {**settings, **section} if context_aware else settings


def locate_dataset(name: str, search_dirs: Sequence[Path]) -> Path | None:
    """The first folder in `search_dirs` holding `<name>/<name>.inter` (RecBole's data_path)."""
    for folder in search_dirs:
        if has_atomic_files(Path(folder), name):
            return Path(folder)
    return None


def known_download_url(name: str) -> str | None:
    """RecBole's download address for `name`, if it knows one."""
    import recbole

    url_file = Path(recbole.__file__).parent / "properties" / "dataset" / "url.yaml"
    return yaml.safe_load(url_file.read_text()).get(name)


def reachable(url: str, timeout: float = 3.0) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def download_dataset(name: str, url: str, data_path: Path) -> None:
    """Fetch RecBole's processed copy of `name` into data_path/<name>/.

    Done here rather than by RecBole's Dataset._download, which calls
    torch.distributed.barrier() in a single process and dies (RecBole issue 2050).
    """
    from recbole.utils.url import download_url, extract_zip, rename_atomic_files

    folder = Path(data_path) / name
    folder.mkdir(parents=True, exist_ok=True)
    archive = download_url(url, str(folder))
    extract_zip(archive, str(folder))
    Path(archive).unlink()
    rename_atomic_files(str(folder), Path(archive).stem, name)


def resolve_data_path(name: str, data_path: Path, *, allow_download: bool = True) -> Path:
    """The data_path RecBole should use for `name`: data_path itself, or recbole's examples.

    A dataset found nowhere is downloaded when RecBole knows it and its server answers;
    otherwise a DatasetNotFoundError names every folder searched and how to supply the files.
    """
    data_path = Path(data_path)
    search = [data_path, builtin_dataset_dir()]
    found = locate_dataset(name, search)
    if found is not None:
        return found
    url = known_download_url(name)
    if url and allow_download and reachable(url):
        download_dataset(name, url, data_path)
        return data_path
    searched = ", ".join(str(p / name) for p in search)
    available = sorted({d.name for p in search if p.is_dir() for d in p.iterdir() if has_atomic_files(p, d.name)})
    offline = " (RecBole knows it, but its server cannot be reached)" if url and allow_download else ""
    raise DatasetNotFoundError(
        f"dataset {name!r} not found{offline}: searched {searched}. Put RecBole atomic files at "
        f"{data_path / name / (name + '.inter')} or point --data-path / RECRUNNER_DATA_PATH at a "
        f"folder holding them. Available: {', '.join(available) or 'none'}"
    )


def check_additional_files(config) -> None:
    """The files beside .inter that the model reads must exist before RecBole reads anything: a knowledge-aware
    model's .kg and .link (RecBole fails inside the data build without them), each `additional_feat_suffix`
    file (KSR's .ent...)."""
    if knowledge_aware(config):
        if missing := _missing_files(config, ("kg", "link")):
            raise DatasetNotFoundError(
                f"{config['model']} is knowledge-aware: it needs {' and '.join(map(str, missing))} (.kg: "
                f"{config['HEAD_ENTITY_ID_FIELD']}, {config['RELATION_ID_FIELD']}, {config['TAIL_ENTITY_ID_FIELD']}; "
                f".link: {config['ITEM_ID_FIELD']}, {config['ENTITY_ID_FIELD']}; ml-100k has both): supply them "
                f"({page('models')}) or point --data-path at a folder that has them")
    if missing := _missing_files(config, _additional_suffixes(config)):
        columns = config["load_col"].get(missing[0].suffix[1:]) if isinstance(config["load_col"], dict) else None
        described = f" with columns {', '.join(columns)}" if columns else ""
        raise DatasetNotFoundError(
            f"{config['model']} needs {', '.join(map(str, missing))} (additional_feat_suffix){described}: "
            f"supply the file ({page('models', 'Knowledge-aware sequential models')}) or point --data-path at a folder that has it")


def _missing_files(config, suffixes) -> list[Path]:
    """The dataset's files with these suffixes that are not in its folder."""
    paths = [Path(config["data_path"]) / f"{config['dataset']}.{suffix}" for suffix in suffixes]
    return [path for path in paths if not path.is_file()]


def check_labels(config) -> None:
    """A pointwise model (context-aware ones; a sequential model's CE loss reads none) reads a label per
    interaction: from the data's label column, from `threshold` over a rating, or, for sampled negatives,
    from the sampler. Where the data has none and training samples no negatives or evaluation is
    `labeled`, RecBole fails in its first batch (KeyError: 'label'): refused here with what to set."""
    from recbole.utils import InputType, ModelType

    modes = config["eval_args"]["mode"]
    modes = modes.values() if isinstance(modes, dict) else [modes]
    needs_labels = config["train_neg_sample_args"]["distribution"] == "none" or "labeled" in modes
    if (config["MODEL_INPUT_TYPE"] != InputType.POINTWISE or config["MODEL_TYPE"] == ModelType.SEQUENTIAL
            or config["threshold"] or not needs_labels):
        return
    header = _inter_header(config)
    if header is None:
        return
    load = config["load_col"]
    loaded = [c for c in header if c in load["inter"]] if isinstance(load, dict) and load.get("inter") else header
    if config["LABEL_FIELD"] in loaded:
        return
    rating, fix = config["RATING_FIELD"], ""
    if rating in header:
        also = "" if rating in loaded else f" and load_col: {{inter: [{', '.join([*loaded, rating])}]}}"
        fix = f"set threshold: {{{rating}: 4}}{also} (label 1 where {rating} >= 4, as RecBole's ml-100k preset does), or "
    raise ConfigError(f"{config['model']} learns from a label per interaction, and {config['dataset']}'s have none (no "
                      f"{config['LABEL_FIELD']!r} column, no threshold): {fix}add --config-file "
                      f"protocols/implicit-feedback.yaml (sampled negatives labelled 0, every item ranked in evaluation)")


def _inter_header(config) -> list[str] | None:
    """The field names of the dataset's .inter header; None where it has no single .inter file."""
    path = Path(config["data_path"]) / f"{config['dataset']}.inter"
    if config["benchmark_filename"] or not path.is_file():
        return None
    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().rstrip("\r\n").split(config["field_separator"] or "\t")
    return [field.rpartition(":")[0] or field for field in header]


def knowledge_aware(config) -> bool:
    """Whether RecBole builds the run's dataset as a KnowledgeBasedDataset (or a sequential one with its graph)."""
    from recbole.data import dataset as datasets

    return issubclass(getattr(datasets, dataset_class_name(config)), datasets.KnowledgeBasedDataset)


def check_atomic_files(config, rows: int = 1000) -> None:
    """The header and first `rows` lines of each atomic file RecBole will read: a DataError (exit 2)
    naming the file, the line and what RecBole needs, instead of its traceback."""
    folder, separator = Path(config["data_path"]), config["field_separator"] or "\t"
    for suffix in (*ATOMIC_SUFFIXES, *_additional_suffixes(config)):
        path = folder / f"{config['dataset']}.{suffix}"
        if path.is_file():
            problem = atomic_file_problem(path, separator, rows)
            if problem:
                raise DataError(f"{path}: {problem}")


def _additional_suffixes(config) -> list[str]:
    suffixes = config["additional_feat_suffix"] or []
    return [suffixes] if isinstance(suffixes, str) else list(suffixes)


def atomic_file_problem(path: Path, separator: str = "\t", rows: int | None = 1000) -> str | None:
    """What is wrong with an atomic file's header and first `rows` lines (None: all), or None (pure read)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().rstrip("\r\n")
        if not header.strip():
            return ("is empty; an atomic file starts with a tab-separated header of field:type columns "
                    "(e.g. user_id:token<TAB>item_id:token<TAB>timestamp:float)")
        fields = header.split(separator)
        untyped = [f for f in fields if f.rpartition(":")[2] not in FIELD_TYPES]
        if untyped:
            shown = header if len(header) <= 80 else header[:77] + "..."
            csv = "," in header and separator not in header
            return (f"line 1 {'looks like CSV' if csv else 'is not a header RecBole can read'} ({shown!r}); "
                    f"RecBole needs a tab-separated header of field:type columns, type one of {', '.join(FIELD_TYPES)} "
                    f"(e.g. user_id:token<TAB>item_id:token<TAB>rating:float)")
        floats = [i for i, f in enumerate(fields) if f.rpartition(":")[2] == "float"]
        for number, line in enumerate(handle, start=2):
            if rows is not None and number > rows + 1:
                break
            values = line.rstrip("\r\n").split(separator)
            if len(values) != len(fields) and line.strip():
                return f"line {number} has {len(values)} columns, the header {len(fields)}"
            for i in floats:
                if i < len(values) and values[i].strip():
                    try:
                        float(values[i])
                    except ValueError:
                        return f"line {number}: {fields[i]} is a float column, but holds {values[i]!r}"
    return None
