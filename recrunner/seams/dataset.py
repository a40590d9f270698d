"""RecBole builds the dataset in every run; recrunner's data cache reuses a built one.

| RecBole 1.2.1                                        | recrunner                                     |
|------------------------------------------------------|-----------------------------------------------|
| `create_dataset(config)` picks the class by model    | `dataset_class_name`: the same choice, for    |
| name and type (recbole.data.utils)                   | the cache key (datacache.data_key)            |
| `data_preparation` calls `dataset.build()` (filter,  | `reuse_built`: `build` returns the cached     |
| remap, augment, split) before making the loaders     | split; the run's config is set on every part  |
| `SequentialDataset.data_augmentation` (in build):     | `history_base`, `history_columns`: the rows   |
| sorts by (user, time), then each row's `<field>_list` | and columns those lists are windows of, so    |
| holds the previous <= MAX_ITEM_LIST_LENGTH values     | the cache stores indices, not the lists       |
| after `build()`, the whole dataset's `inter_feat` is  | `lazy_interaction`: the cached whole          |
| only read for item ids (RepeatableSampler); its       | dataset's interactions are rebuilt on first   |
| history lists never (data/utils.py, sampler/)         | access (exactly), not on every load           |
"""

from __future__ import annotations

import functools


def reuse_built(config, dataset, built):
    """`dataset` whose `build()` returns `built` (the cached split) under this run's config."""
    for part in (dataset, *built):
        part.config = config  # same data settings by construction; the run's other settings apply
    dataset.build = lambda: built  # data_preparation then only makes this run's samplers and loaders
    return dataset


def history_base(dataset, inter):
    """The interactions a sequential dataset's history lists are windows of, in the order
    `data_augmentation` sorts them: `inter` (the dataset's `inter_feat` before `build()`) by user, then
    time. None for other datasets, and for benchmark files (their lists come from the files)."""
    from recbole.data.dataset import SequentialDataset
    from recbole.data.interaction import Interaction

    if not isinstance(dataset, SequentialDataset) or dataset.config["benchmark_filename"] is not None:
        return None
    base = Interaction(dict(inter.interaction)) if isinstance(inter, Interaction) else \
        dataset._dataframe_to_interaction(inter)
    base.sort(by=[dataset.uid_field, dataset.time_field], ascending=True)
    return base


def history_columns(dataset) -> tuple[dict[str, str], str | None]:
    """({history column: the column it lists}, the history-length column) of a sequential dataset."""
    field = getattr(dataset, "item_list_length_field", None)
    if field is None:
        return {}, None
    suffix = dataset.config["LIST_SUFFIX"]
    return {name + suffix: name for name in dataset.field2type if name + suffix in dataset.field2type}, field


def lazy_interaction(length: int, build):
    """An Interaction whose columns are `build()`, called on first access to any of them (and
    then kept). Pickled, it is a plain Interaction."""
    return _lazy_class()(length, build)


@functools.lru_cache(maxsize=1)
def _lazy_class():
    from recbole.data.interaction import Interaction

    class LazyInteraction(Interaction):
        def __init__(self, length, build):  # noqa: super().__init__ would build the columns
            self.__dict__["_build"] = build
            self.length = length

        @property
        def interaction(self):
            if "_columns" not in self.__dict__:
                self.__dict__["_columns"] = self.__dict__.pop("_build")()
            return self.__dict__["_columns"]

        @interaction.setter
        def interaction(self, columns):
            self.__dict__.pop("_build", None)
            self.__dict__["_columns"] = columns

        def __getattr__(self, item):  # Interaction's looks for "interaction" in __dict__
            if item.startswith("__") or item in ("_build", "_columns"):
                raise AttributeError(item)
            if item in self.interaction:
                return self.interaction[item]
            raise AttributeError(f"'Interaction' object has no attribute '{item}'")

        def __reduce__(self):
            return Interaction, (self.interaction,)

    return LazyInteraction


def dataset_class_name(config) -> str:
    """The class `recbole.data.create_dataset` would instantiate."""
    import importlib

    from recbole.utils import ModelType

    module = importlib.import_module("recbole.data.dataset")
    if hasattr(module, config["model"] + "Dataset"):
        return config["model"] + "Dataset"
    return {ModelType.SEQUENTIAL: "SequentialDataset", ModelType.KNOWLEDGE: "KnowledgeBasedDataset"}.get(
        config["MODEL_TYPE"], "Dataset")
