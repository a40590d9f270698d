"""Finding a dataset's atomic files, fetching a known one, and building RecBole's data."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

import yaml

from .errors import DatasetNotFoundError


def builtin_dataset_dir() -> Path:
    """Where the recbole package ships its example datasets (ml-100k)."""
    import recbole

    return Path(recbole.__file__).parent / "dataset_example"


def has_atomic_files(folder: Path, name: str) -> bool:
    return (folder / name / f"{name}.inter").is_file()


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
    """Each `additional_feat_suffix` file must exist before RecBole reads anything (KSR's .ent...)."""
    suffixes = config["additional_feat_suffix"] or []
    suffixes = [suffixes] if isinstance(suffixes, str) else list(suffixes)
    folder = Path(config["data_path"])
    missing = [folder / f"{config['dataset']}.{suffix}" for suffix in suffixes
               if not (folder / f"{config['dataset']}.{suffix}").is_file()]
    if missing:
        columns = config["load_col"].get(missing[0].suffix[1:]) if isinstance(config["load_col"], dict) else None
        described = f" with columns {', '.join(columns)}" if columns else ""
        raise DatasetNotFoundError(
            f"{config['model']} needs {', '.join(map(str, missing))} (additional_feat_suffix){described}: "
            "supply the file (README: Knowledge-aware sequential models) or point --data-path at a folder that has it")
