"""Tiny settings under which every RecBole model trains one epoch on ml-100k in seconds.

Used by the conformance test (tests/test_model_conformance.py) and by bench/model_matrix.py,
which writes docs/models.md's model table. Only keys a model has are set: RecBole's defaults otherwise.
"""

from __future__ import annotations

# the data: ml-100k users with 10-60 interactions (about a third of the file), one epoch
DATA = {"epochs": 1, "user_inter_num_interval": "[10,60]", "train_batch_size": 2048, "eval_batch_size": 65536,
        "MAX_ITEM_LIST_LENGTH": 10}

# sizes, applied to a model only where RecBole's yaml for it has the key
SIZES = {
    "embedding_size": 16, "hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1, "num_layers": 1,
    "mlp_hidden_size": [16], "latent_dimension": 16, "kg_embedding_size": 16,
    "num_clusters": 10, "pretrain_epochs": 1, "save_step": 1, "attention_size": 8, "n_factors": 2,
    "neighbor_sample_size": 4, "n_memory": 4, "encoder_hidden_size": [32], "dims_dnn": [32], "in_dims": [32],
}

# per model, where the generic sizes do not fit the model's own constraints
SPECIAL = {
    # its CNN needs embedding_size >= the product of cnn_strides
    "ConvNCF": {"embedding_size": 16, "cnn_channels": [1, 4, 4, 4, 4], "cnn_kernels": [2, 2, 2, 2], "cnn_strides": [2, 2, 2, 2]},
    "FEARec": {"n_layers": 2},                  # it shares frequency bands among n_layers - 1 layers
    "NCEPLRec": {"rank": 16},
    "NNCF": {"ui_embedding_size": 16, "neigh_embedding_size": 8, "num_conv_kernel": 8, "neigh_num": 10},
    "MCCLK": {"entity_kg_num_interval": "[20,inf)"},  # its k-NN graph is entities x entities
}


def tiny_params(model: str, known_keys) -> dict:
    """DATA, plus every SIZES key the model knows, plus its SPECIAL settings (pure)."""
    params = dict(DATA)
    params.update({key: value for key, value in SIZES.items() if key in known_keys})
    params.update(SPECIAL.get(model, {}))
    return params


def model_keys(model: str) -> set[str]:
    """The keys of RecBole's yaml for `model` (recbole/properties/model/<model>.yaml)."""
    from pathlib import Path

    import recbole
    import yaml

    path = Path(recbole.__file__).parent / "properties" / "model" / f"{model}.yaml"
    return set(yaml.safe_load(path.read_text()) or {}) if path.is_file() else set()


def write_ml100k_with_kg_embeddings(folder, dim: int = 16, seed: int = 0) -> None:
    """A copy of RecBole's ml-100k in `folder`/ml-100k plus the pretrained knowledge-graph
    embeddings KSR and GRU4RecKG read (configs/models/KSR.yaml): a deterministic random vector
    per entity of .kg/.link (ml-100k.ent) and per relation (ml-100k.rel). Random, not TransE:
    enough to exercise the models, not to judge them."""
    import shutil
    from pathlib import Path

    import numpy as np
    import recbole

    source = Path(recbole.__file__).parent / "dataset_example" / "ml-100k"
    target = Path(folder) / "ml-100k"
    target.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        shutil.copy2(file, target / file.name)
    entities, relations = set(), set()
    for line in (source / "ml-100k.kg").read_text().splitlines()[1:]:
        head, relation, tail = line.split("\t")
        entities |= {head, tail}
        relations.add(relation)
    entities |= {line.split("\t")[1] for line in (source / "ml-100k.link").read_text().splitlines()[1:]}
    rng = np.random.default_rng(seed)
    for suffix, field, names in (("ent", "ent", entities), ("rel", "rel", relations)):
        rows = [f"{name}\t{' '.join(f'{x:.5f}' for x in rng.normal(size=dim))}" for name in sorted(names)]
        (target / f"ml-100k.{suffix}").write_text(f"{field}_id:token\t{field}_emb:float_seq\n" + "\n".join(rows) + "\n")
