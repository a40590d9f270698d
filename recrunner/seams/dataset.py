"""RecBole builds the dataset in every run; recrunner's data cache reuses a built one.

| RecBole 1.2.1                                        | recrunner                                     |
|------------------------------------------------------|-----------------------------------------------|
| `create_dataset(config)` picks the class by model    | `dataset_class_name`: the same choice, for    |
| name and type (recbole.data.utils)                   | the cache key (data/cache.py: data_key)            |
| `data_preparation` calls `dataset.build()` (filter,  | `reuse_built`: `build` returns the cached     |
| remap, augment, split) before making the loaders     | split; the run's config is set on every part  |
| `SequentialDataset.data_augmentation` (in build):     | `history_columns`: which columns are history  |
| each row's `<field>_list` holds the previous <=       | lists of which, so the cache stores indices,  |
| MAX_ITEM_LIST_LENGTH values                           | not the lists (the build: seams.augmentation) |
"""

from __future__ import annotations


def reuse_built(config, dataset, built):
    """`dataset` whose `build()` returns `built` (the cached split) under this run's config."""
    for part in (dataset, *built):
        part.config = config  # same data settings by construction; the run's other settings apply
    dataset.build = lambda: built  # data_preparation then only makes this run's samplers and loaders
    return dataset


def history_columns(dataset) -> tuple[dict[str, str], str | None]:
    """({history column: the column it lists}, the history-length column) of a sequential dataset."""
    field = getattr(dataset, "item_list_length_field", None)
    if field is None:
        return {}, None
    suffix = dataset.config["LIST_SUFFIX"]
    return {name + suffix: name for name in dataset.field2type if name + suffix in dataset.field2type}, field


def dataset_class_name(config) -> str:
    """The class `recbole.data.create_dataset` would instantiate."""
    import importlib

    from recbole.utils import ModelType

    module = importlib.import_module("recbole.data.dataset")
    if hasattr(module, config["model"] + "Dataset"):
        return config["model"] + "Dataset"
    return {ModelType.SEQUENTIAL: "SequentialDataset", ModelType.KNOWLEDGE: "KnowledgeBasedDataset"}.get(
        config["MODEL_TYPE"], "Dataset")
