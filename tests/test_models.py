import pytest

from recrunner import Experiment, run_experiment
from recrunner.core.errors import ConfigError
from recrunner.core.errors import EnvironmentProblem
from recrunner.training.families.layers import NCLLayer, PretrainLayer, pretraining_stages
from recrunner.run.models import REQUIREMENTS, Requirement, available_models, check_heads, check_negatives, check_requirements, exlib_models, failure_hint, resolve_model, trainer_class_for
from recrunner.training.loop.trainer import CustomTrainer

from .conftest import run_cli
from .tiny_models import model_keys, tiny_params


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


def test_what_a_model_prints_while_it_is_built_goes_to_its_run_log_not_stdout(workspace, capfd):
    result = run_experiment(Experiment("FEARec", "ml-100k", {**tiny_params("FEARec", model_keys("FEARec")), "epochs": 1}),
                            workspace, console=False)

    assert result.status == "ok", result.error
    assert capfd.readouterr().out == ""  # RecBole's FEARec prints its frequency bands while it is built
    log = (result.run_dir / "run.log").read_text()
    assert "FEARec printed: modes_q=" in log and "FEARec printed: 1>0.5:True" in log


def test_a_known_failure_is_one_line_on_the_console_and_its_traceback_is_in_the_run_log(workspace, capfd):
    params = {**tiny_params("FEARec", model_keys("FEARec")), "n_layers": 1, "epochs": 1}

    result = run_experiment(Experiment("FEARec", "ml-100k", params), workspace, console=True)

    assert result.status == "failed" and "set n_layers to 2 or more" in result.error
    console = capfd.readouterr().err
    assert "run failed: ZeroDivisionError: FEARec shares its frequency bands" in console and "Traceback" not in console
    assert "Traceback" in (result.run_dir / "run.log").read_text()


def test_a_model_that_calls_sys_exit_while_built_fails_its_run_and_the_sweep_goes_on(base_args, capsys):
    # RecBole's SASRecCPR prints "... does not support BPR loss" and calls sys.exit(0): before, the sweep ended there, exit 0
    settings = ["loss_type=BPR", "train_neg_sample_args={distribution: uniform, sample_num: 1}", "epochs=1", "n_layers=1",
                "hidden_size=8", "inner_size=16", "n_heads=1", "MAX_ITEM_LIST_LENGTH=10", "user_inter_num_interval=[10,60]"]
    code, out, _ = run_cli(capsys, ["--model", "SASRecCPR", "SASRec", "--set", *settings, *base_args, "--quiet"])

    assert code == 2
    assert "SASRecCPR on ml-100k: ConfigError: SASRecCPR refused its settings and called sys.exit(0) while it was " \
           "built: 'current softmax-cpr code does not support BPR loss'" in out
    assert "1 ok, 1 failed" in out


@pytest.mark.parametrize("model, loss, distribution, refused", [
    ("SASRec", "BPR", "none", True),
    ("SASRec", "BPR", "uniform", False),
    ("SASRec", "CE", "none", False),
    ("BERT4Rec", "BPR", "none", False),   # it draws its own negatives
    ("SASRecCPR", "BPR", "none", False),  # it refuses BPR itself (built_model says so)
])
def test_a_sequential_bpr_loss_needs_sampled_negatives(model, loss, distribution, refused):
    from recbole.utils import ModelType

    config = {"MODEL_TYPE": ModelType.SEQUENTIAL, "loss_type": loss, "train_neg_sample_args": {"distribution": distribution}}
    if refused:
        with pytest.raises(ConfigError, match="set train_neg_sample_args to"):
            check_negatives(model, config)
    else:
        check_negatives(model, config)
    check_negatives("BPR", {"MODEL_TYPE": ModelType.GENERAL, "train_neg_sample_args": {"distribution": "none"}})


def test_a_transformer_s_width_must_divide_among_its_heads():
    with pytest.raises(ConfigError, match=r"SASRec: hidden_size \(64\) must be a multiple of n_heads \(3\)"):
        check_heads("SASRec", {"hidden_size": 64, "n_heads": 3})
    check_heads("SASRec", {"hidden_size": 64, "n_heads": 4})
    check_heads("BPR", {"embedding_size": 64})
