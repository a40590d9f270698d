"""RecBole builds the dataset in every run; recrunner's data cache reuses a built one.

| RecBole 1.2.1                                        | recrunner                                     |
|------------------------------------------------------|-----------------------------------------------|
| `create_dataset(config)` picks the class by model    | `dataset_class_name`: the same choice, for    |
| name and type (recbole.data.utils)                   | the cache key (datacache.data_key)            |
| `data_preparation` calls `dataset.build()` (filter,  | `reuse_built`: `build` returns the cached     |
| remap, augment, split) before making the loaders     | split; the run's config is set on every part  |
"""

from __future__ import annotations


def reuse_built(config, dataset, built):
    """`dataset` whose `build()` returns `built` (the cached split) under this run's config."""
    for part in (dataset, *built):
        part.config = config  # same data settings by construction; the run's other settings apply
    dataset.build = lambda: built  # data_preparation then only makes this run's samplers and loaders
    return dataset


def dataset_class_name(config) -> str:
    """The class `recbole.data.create_dataset` would instantiate."""
    import importlib

    from recbole.utils import ModelType

    module = importlib.import_module("recbole.data.dataset")
    if hasattr(module, config["model"] + "Dataset"):
        return config["model"] + "Dataset"
    return {ModelType.SEQUENTIAL: "SequentialDataset", ModelType.KNOWLEDGE: "KnowledgeBasedDataset"}.get(
        config["MODEL_TYPE"], "Dataset")
