"""Where a run's configuration layers come from, and in which order.

Layers, lowest to highest: RecBole's own defaults, base.yaml, the dataset's own settings
(<data_path>/<d>/dataset.yaml, written by `recrunner data import`), datasets/<d>.yaml,
models/<m>.yaml, then the run's overrides (grid parameters, --config-file, --set). Each YAML layer
is read from recrunner's packaged folder (`packaged_config_dir`: recrunner/configs, which the
checkout's top-level configs/ links to; read through importlib.resources, so an installed wheel
carries it) and then from the user's folder where there is one (./configs, or --config-dir), which
adds to or overrides it key by key (`layer_folders`). The installed command thus resolves the same
run from any folder. recrunner merges its layers into one dict and hands it to RecBole as
`config_dict`, RecBole's top layer, with sys.argv hidden (seams.config.recbole_argv_cleared).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ConfigError
from .params import load_yaml


def packaged_config_dir() -> Path:
    """recrunner's own layers, shipped inside the package (the checkout's configs/ links here)."""
    from importlib.resources import files

    return Path(str(files("recrunner") / "configs"))


def default_config_dir(cwd: Path | None = None) -> Path | None:
    """The CLI's user folder when --config-dir is not given: ./configs where there is one (it adds to
    or overrides the packaged layers), else None (the packaged layers alone)."""
    candidate = (cwd or Path.cwd()) / "configs"
    return candidate.resolve() if candidate.is_dir() else None


def layer_folders(config_dir: Path | None) -> list[Path]:
    """The folders a run's YAML layers are read from, lowest first: the packaged one, then the user's
    (left out where it is the packaged one itself, as ./configs is in a checkout)."""
    folders = [packaged_config_dir()]
    if config_dir is not None and Path(config_dir).resolve() != folders[0].resolve():
        folders.append(Path(config_dir))
    return folders


def config_file(name: Path | str, config_dir: Path | None = None, under: str = "") -> Path:
    """A --config-file or --grid: the path as given where it exists, else that name in the user's folder
    or the packaged one (`quick.yaml`, `protocols/global-temporal`, `configs/grids/smoke.yaml`), also
    in their folder `under` (a grid: `smoke` is grids/smoke.yaml). Not found: a ConfigError that lists
    the packaged files."""
    path = Path(name)
    if path.is_file():
        return path
    relative = Path(*path.parts[1:]) if path.parts[0] == "configs" and len(path.parts) > 1 else path
    for folder in [] if path.is_absolute() else reversed(layer_folders(config_dir)):
        for base in ((folder, folder / under) if under else (folder,)):
            for candidate in (base / relative, base / relative.with_name(relative.name + ".yaml")):
                if candidate.is_file():
                    return candidate
    raise ConfigError(f"{'grid' if under else 'config'} file not found: {path}; packaged: {', '.join(packaged(under))}")


def packaged(under: str = "") -> list[str]:
    """The packaged YAML files a --config-file (`under` ""; not the layers' models/ and datasets/) or a
    --grid (`under` "grids") can name, relative to the packaged folder (pure but for reading it)."""
    root = packaged_config_dir()
    if under:
        return sorted(str(p.relative_to(root)) for p in (root / under).glob("*.yaml"))
    return sorted(str(p.relative_to(root)) for p in [*root.glob("*.yaml"), *(root / "protocols").glob("*.yaml")]
                  if p.name != "base.yaml")  # the layer every run reads, not a file to name


def layered_params(config_dir: Path | None, model: str, dataset: str, overrides: Mapping,
                   dataset_settings: Mapping | None = None) -> dict:
    """Merge recrunner's YAML layers (`layer_folders`), the dataset's own settings and the run's
    overrides (later wins, key by key)."""
    merged: dict[str, Any] = {}
    folders = layer_folders(config_dir)
    layers = [*(folder / "base.yaml" for folder in folders), dict(dataset_settings or {}),
              *(folder / "datasets" / f"{dataset}.yaml" for folder in folders),
              *(folder / "models" / f"{model}.yaml" for folder in folders)]
    for layer in layers:
        if isinstance(layer, dict):
            merged.update(layer)
        elif layer is not None and layer.is_file():
            merged.update(load_yaml(layer))
    merged.update(overrides)
    return merged
