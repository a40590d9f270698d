"""Plain RecBole on a resolved config: what recrunner's numbers are compared with.

As `run_recbole` does it, one stage per RecBole command: seed, create_dataset, data_preparation,
seed, model, the model's own trainer (`get_trainer`), fit, then evaluate(load_best_model=True).
For S3Rec and RaCT each pre-training stage is its own such command and the next one reads the
file it saved (`pre_model_path`), as RecBole's documentation describes.

Needs the working directory to be disposable (RecBole writes log_tensorboard/ into it) and
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (RecBole's own torch.load calls; torch >= 2.6).
"""

from __future__ import annotations

import copy
import os

from recrunner.training.families.layers import pretraining_stages


def run_plain_recbole(config) -> dict:
    """{'best_valid': {...}, 'test': {...}, 'epochs': N, 'losses': [each epoch's loss]} from RecBole's own loop."""
    from recbole.utils import get_model

    config = copy.deepcopy(config)
    stages = pretraining_stages(config["model"], config["train_stage"])
    for stage in stages:
        config["train_stage"] = stage
        _one_command(config, get_model(config["model"]))
        config["pre_model_path"] = os.path.join(
            config["checkpoint_dir"], f"{config['model']}-{config['dataset']}-{config['pretrain_epochs']}.pth")
    if stages:
        config["train_stage"] = "finetune"
    return _one_command(config, get_model(config["model"]))


def _one_command(config, model_class) -> dict:
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_trainer, init_seed

    from recrunner.seams.models import repair_model

    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"], config["reproducibility"])
    model = repair_model(model_class(config, train_data._dataset).to(config["device"]))
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    _, best_valid = trainer.fit(train_data, valid_data, saved=True)
    if config["train_stage"] not in (None, "finetune"):  # a pre-training command ends here
        return {}
    test = trainer.evaluate(test_data, load_best_model=True)
    losses = getattr(trainer, "train_loss_dict", {})
    return {"best_valid": dict(best_valid or {}), "test": dict(test), "epochs": len(losses),
            "losses": [losses[epoch] for epoch in sorted(losses)]}
