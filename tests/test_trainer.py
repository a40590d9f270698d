"""CustomTrainer used directly, the way RecBole code uses its Trainer."""

import numpy as np
import pytest
import torch


from .conftest import TINY_SASREC, trainer_and_data


def _trainer_and_data(workspace, params):
    return trainer_and_data(workspace, "SASRec", params)

def test_fit_keeps_recbole_signature_callback_fn_and_return_value(workspace):
    trainer, train, valid, test = _trainer_and_data(workspace, TINY_SASREC)
    calls = []

    best_score, best_result = trainer.fit(train, valid, saved=True, callback_fn=lambda e, s: calls.append((e, s)))

    assert [epoch for epoch, _ in calls] == [0, 1]
    assert best_score == max(score for _, score in calls)
    assert best_result["mrr@10"] == best_score  # valid_metric MRR@10
    # evaluate() loads best.pth (weights_only): on the validation data it gives the best epoch's metrics again
    assert trainer.evaluate(valid) == pytest.approx(best_result, abs=0)


def test_initial_validation_leaves_every_rng_as_it_found_it(workspace):
    trainer, train, valid, _ = _trainer_and_data(workspace, TINY_SASREC)
    trainer._generators = {"train": train.generator}
    original_valid_epoch = trainer._valid_epoch

    def valid_epoch_drawing_numbers(*args, **kwargs):  # as a model with sampling in eval would
        np.random.rand(5), torch.rand(5), torch.rand(5, generator=train.generator)
        return original_valid_epoch(*args, **kwargs)

    trainer._valid_epoch = valid_epoch_drawing_numbers
    trainer._call("on_fit_start")  # as fit does before epoch -1
    expected = (np.random.get_state()[1].copy(), torch.get_rng_state(), train.generator.get_state())
    trainer._initial_validation(valid, verbose=False, show_progress=False)
    assert np.array_equal(np.random.get_state()[1], expected[0])
    assert torch.equal(torch.get_rng_state(), expected[1])
    assert torch.equal(train.generator.get_state(), expected[2])
    assert trainer.initial_valid_result is not None
