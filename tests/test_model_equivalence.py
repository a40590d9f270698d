"""Same numbers as plain RecBole for one model of every trainer family and every category.

tests/test_equivalence.py covers RecBole's plain Trainer (SASRec, BPR, early stopping); here
each other family: RecBole runs the model with its own trainer (tests/plain_recbole.py) on the
config recrunner resolved, and every best-validation and test metric must be equal (abs=0).
"""

import pytest

from recrunner import Experiment, prepare, run_experiment

from .plain_recbole import run_plain_recbole
from .tiny_models import model_keys, tiny_params

CASES = [
    # (model, what it covers, extra settings)
    ("DeepFM", "context-aware, labeled AUC/LogLoss", {"epochs": 2}),
    ("DIN", "sequential with a feature layer (ContextSeqEmbLayer in other_parameter)", {"epochs": 2}),
    ("CKE", "knowledge-aware, KGTrainer", {"epochs": 2}),
    ("MKR", "knowledge-aware, MKRTrainer (RS and KG steps)", {"epochs": 2}),
    ("RecVAE", "RecVAETrainer (alternating encoder/decoder)", {"epochs": 2}),
    ("ItemKNN", "TraditionalTrainer, scipy sparse state", {}),
    ("EASE", "TraditionalTrainer, numpy/scipy state", {}),
    ("NCEPLRec", "fitted while built, a placeholder loss: one epoch here, RecBole's Trainer runs all 3 (config/one_pass.py)",
     {"epochs": 3}),
    ("NCL", "NCLTrainer: E-step (faiss k-means) each epoch", {"epochs": 2}),
    ("SRGNN", "session graphs built by array operations (seams/host_loops.py)", {"epochs": 2}),
    ("GCSAN", "session graphs built by array operations, then a transformer", {"epochs": 2}),
    ("HRM", "sequences moved after their padding by one gather (seams/host_loops.py)", {"epochs": 2}),
    ("KGNNLS", "labels looked up in a table on the device (seams/host_loops.py)", {"epochs": 2}),
    ("RippleNet", "ripple sets gathered from one table on the device (seams/host_loops.py)", {"epochs": 2}),
    ("FEARec", "same-target sequences drawn as RecBole draws them, the batch on the host once (seams/same_target.py)",
     {"epochs": 1, "contrast": "us_x", "tau": 1.0, "sim": "dot", "fredom": True, "fredom_type": "us_x"}),
    ("S3Rec", "S3RecTrainer: pre-training then fine-tuning", {"epochs": 2, "pretrain_epochs": 2, "save_step": 2}),
    ("RaCT", "RaCTTrainer: actor and critic pre-training, then fine-tuning", {"epochs": 2}),
    ("XGBoost", "DecisionTreeTrainer (exlib), continued boosting", {"epochs": 2, "xgb_num_boost_round": 10}),
    ("LightGBM", "DecisionTreeTrainer (exlib), a booster fitted anew each epoch: one epoch here, RecBole fits all 3",
     {"epochs": 3, "lgb_num_boost_round": 20}),
]


@pytest.mark.parametrize("model, covers, extra", CASES, ids=[case[0] for case in CASES])
def test_recrunner_matches_plain_recbole(model, covers, extra, workspace, tmp_path, monkeypatch):
    pytest.importorskip({"NCL": "faiss", "XGBoost": "xgboost", "LightGBM": "lightgbm"}.get(model, "recbole"))
    monkeypatch.chdir(tmp_path)  # RecBole's trainers write log_tensorboard/ into the cwd
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # RecBole's own torch.load calls
    params = {**tiny_params(model, model_keys(model)), **extra}
    prepared = prepare(Experiment(model, "ml-100k", params), workspace)
    prepared.config["checkpoint_dir"] = str(tmp_path / "plain-recbole")
    expected = run_plain_recbole(prepared.config)

    result = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    assert result.status == "ok", result.error
    assert result.best_valid == pytest.approx(expected["best_valid"], abs=0)
    assert result.test == pytest.approx(expected["test"], abs=0)
    assert expected["test"] and max(expected["test"].values()) > 0
