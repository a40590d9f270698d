import pytest

from recrunner.errors import ConfigError
from recrunner.models import available_models, resolve_model, trainer_class_for, unsupported_models
from recrunner.trainer import CustomTrainer


def test_model_names_resolve_case_insensitively():
    assert resolve_model("sasrec") == "SASRec"
    assert {"SASRec", "BPR", "LightGCN", "GRU4Rec", "KGAT"} <= set(available_models())


def test_unknown_model_lists_every_valid_one():
    with pytest.raises(ConfigError) as info:
        resolve_model("GRU4Recc")
    assert "Did you mean GRU4Rec" in str(info.value)
    assert all(name in str(info.value) for name in available_models())


def test_plain_trainer_models_use_custom_trainer():
    from recbole.utils import get_model

    assert trainer_class_for("SASRec", get_model("SASRec").type, CustomTrainer) is CustomTrainer


def test_model_trainers_that_change_the_epoch_are_layered_under_the_custom_loop():
    from recbole.trainer import KGATTrainer, RecVAETrainer
    from recbole.utils import get_model

    for name, base in (("KGAT", KGATTrainer), ("RecVAE", RecVAETrainer)):
        trainer = trainer_class_for(name, get_model(name).type, CustomTrainer)
        assert trainer.fit is CustomTrainer.fit
        assert trainer._train_epoch is base._train_epoch


def test_model_trainers_that_replace_fit_are_refused_by_name():
    from recbole.utils import get_model

    assert unsupported_models() == ("NCL", "RaCT", "S3Rec")
    with pytest.raises(ConfigError, match="NCL trains with RecBole's NCLTrainer"):
        trainer_class_for("NCL", get_model("NCL").type, CustomTrainer)
