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
| `Dataset._data_filtering` runs five filtering steps   | `counted`: a subclass recording what each    |
| in a row, reporting nothing                           | step leaves (`recrunner data describe`)       |
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


# RecBole's `Dataset._data_filtering` runs these in order; `counted` records what each one leaves.
FILTER_STEPS = {
    "_filter_nan_user_or_item": ("rows without a user or an item", ()),
    "_remove_duplication": ("repeated (user, item) pairs", ("rm_dup_inter",)),
    "_filter_by_field_value": ("value intervals", ("val_interval",)),
    "_filter_inter_by_user_or_item": ("ids missing from .user / .item", ("filter_inter_by_user_or_item",)),
    "_filter_by_inter_num": ("k-core: interactions per user and per item", ("user_inter_num_interval", "item_inter_num_interval")),
}


def counted(dataset_class, loaded=None):
    """A subclass of RecBole's `dataset_class` whose instances keep `filter_counts`: after loading
    and after each filtering step, (step, interactions, users, items) in the interactions; and
    `loaded_stats`, what `loaded(dataset)` returns on the interactions as the files held them."""

    def record(self, step):
        feat = self.inter_feat
        users = feat[self.uid_field].nunique() if self.uid_field in feat else 0
        items = feat[self.iid_field].nunique() if self.iid_field in feat else 0
        self.filter_counts.append((step, len(feat), int(users), int(items)))

    def data_filtering(self):
        self.filter_counts = []
        self.loaded_stats = loaded(self) if loaded else None
        record(self, "loaded")
        dataset_class._data_filtering(self)

    def step(name):
        def run(self, *args, **kwargs):
            result = getattr(dataset_class, name)(self, *args, **kwargs)
            record(self, name)
            return result
        return run

    members = {"_data_filtering": data_filtering, **{name: step(name) for name in FILTER_STEPS}}
    return type(f"Counted{dataset_class.__name__}", (dataset_class,), members)
