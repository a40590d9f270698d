import pytest

from recrunner.core.errors import ConfigError
from recrunner.core.errors import EnvironmentProblem
from recrunner.training.families.layers import NCLLayer, PretrainLayer, pretraining_stages
from recrunner.run.models import REQUIREMENTS, Requirement, available_models, check_requirements, exlib_models, failure_hint, resolve_model, trainer_class_for
from recrunner.training.loop.trainer import CustomTrainer


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


def test_every_recbole_trainer_has_a_trainer_under_the_custom_loop():
    """No model is refused: each RecBole trainer is layered (recrunner.training.families.layers)."""
    from recbole.utils import get_model

    for name in available_models():
        model_type = get_model(name).type if name not in exlib_models() else None
        if model_type is None:
            continue
        trainer = trainer_class_for(name, model_type, CustomTrainer)
        assert trainer.fit is CustomTrainer.fit, name


def test_ncl_keeps_its_epoch_and_adds_the_e_step_at_epoch_start():
    from recbole.trainer import NCLTrainer
    from recbole.utils import get_model

    trainer = trainer_class_for("NCL", get_model("NCL").type, CustomTrainer)
    assert trainer.__mro__[1:3] == (NCLLayer, CustomTrainer)
    assert trainer._train_epoch is NCLTrainer._train_epoch  # its warm-up of the prototype loss
    assert "user_centroids" in trainer.extra_state_names  # clusters of the last E-step survive a resume


def test_staged_models_get_the_pretrain_layer():
    from recbole.utils import get_model

    for name in ("S3Rec", "RaCT"):
        assert PretrainLayer in trainer_class_for(name, get_model(name).type, CustomTrainer).__mro__


def test_tree_models_are_known_without_their_packages_and_run_by_the_tree_trainer():
    assert set(exlib_models()) == {"LightGBM", "XGBoost"} <= set(available_models())
    assert resolve_model("xgboost") == "XGBoost"


def test_pretraining_stages_run_from_the_configured_stage_to_finetune():
    assert pretraining_stages("S3Rec", "pretrain") == ("pretrain",)
    assert pretraining_stages("RaCT", "actor_pretrain") == ("actor_pretrain", "critic_pretrain")
    assert pretraining_stages("RaCT", "critic_pretrain") == ("critic_pretrain",)
    assert pretraining_stages("S3Rec", "finetune") == ()
    assert pretraining_stages("SASRec", None) == ()
    with pytest.raises(ValueError, match="its stages: pretrain, finetune"):
        pretraining_stages("S3Rec", "warmup")


def test_a_missing_optional_package_names_what_to_install(monkeypatch):
    monkeypatch.setitem(REQUIREMENTS, "NCL", Requirement("no_such_module_xyz", "pip install 'recrunner[ncl]'"))
    with pytest.raises(EnvironmentProblem) as info:
        check_requirements("NCL")
    message = str(info.value)
    assert "NCL needs the package 'no_such_module_xyz'" in message and "recrunner[ncl]" in message
    assert "\n" not in message and info.value.exit_code == 2


def test_known_failures_name_the_setting_to_change():
    hint = failure_hint("FEARec", ZeroDivisionError("integer division or modulo by zero"))
    assert "set n_layers to 2 or more" in hint
    hint = failure_hint("ConvNCF", RuntimeError("Kernel size can't be greater than actual input size"))
    assert "embedding_size" in hint and "cnn_strides" in hint
    assert failure_hint("SASRec", ZeroDivisionError("by zero")) is None


def test_tree_models_get_recbole_defaults_its_config_cannot_find():
    from recrunner.seams.config import recbole_model_defaults

    assert recbole_model_defaults("XGBoost")["xgb_params"]["objective"] == "binary:logistic"
    assert recbole_model_defaults("LightGBM")["lgb_num_boost_round"] == 300
    assert recbole_model_defaults("SASRec") == {}
