"""Scalar tags (recrunner.training.logging.tags): one definition for TensorBoard, the trackers and the HParams columns."""

import math

from recrunner.training.logging import tags


def test_a_tuple_loss_is_reported_whole_and_by_part():
    assert tags.train((1.5, 0.5), lr=0.01) == {"Train/Loss": 2.0, "Train/Loss_0": 1.5, "Train/Loss_1": 0.5,
                                                 "Train/LR": 0.01}
    assert tags.train(3.0) == {"Train/Loss": 3.0}
    assert tags.train(None, lr=0.3) == {"Train/LR": 0.3}  # a booster: no loss


def test_validation_scalars_skip_a_score_that_is_not_finite():
    assert tags.validation({"ndcg@10": 0.2}, 0.2) == {"Valid/ndcg@10": 0.2, "Valid/score": 0.2}
    assert tags.validation({"ndcg@10": 0.2}, -math.inf, prefix="Best_Valid") == {"Best_Valid/ndcg@10": 0.2}


def test_hparam_columns_follow_the_reported_metrics():
    assert tags.hparam_metrics(["auc"]) == ["Best_Valid/auc", "Best_Valid/score", "Test/auc"]
    assert tags.hparam_metrics([]) == []
    assert tags.test({"auc": 0.7}) == {"Test/auc": 0.7}
