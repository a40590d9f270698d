"""The training state is one dataclass: what last.pth stores and resume restores."""

import dataclasses
import io

import torch

from recrunner.training.checkpoints.state import TrainingState, state_attribute


def test_every_field_round_trips_through_a_weights_only_checkpoint():
    state = TrainingState(epoch=4, finished=True, best_epoch=2, best_valid_score=0.25,
                          best_valid_result={"ndcg@10": 0.25}, initial_valid_result={"ndcg@10": 0.01},
                          cur_step=2, train_loss_dict={0: 3.5, 1: 2.5})
    buffer = io.BytesIO()
    torch.save(state.to_checkpoint(), buffer)
    buffer.seek(0)
    assert TrainingState.from_checkpoint(torch.load(buffer, weights_only=True)) == state


def test_a_checkpoint_without_a_newer_field_gets_its_default():
    checkpoint = TrainingState(epoch=1, cur_step=1).to_checkpoint()
    del checkpoint["initial_valid_result"], checkpoint["finished"]
    restored = TrainingState.from_checkpoint(checkpoint)
    assert restored.finished is False and restored.initial_valid_result is None and restored.epoch == 1


def test_trainer_attributes_are_fields_of_its_state():
    class Holder:
        best_epoch = state_attribute("best_epoch")
        cur_step = state_attribute("cur_step")

    holder = Holder()
    holder.state = TrainingState()
    holder.best_epoch, holder.cur_step = 3, 2  # what RecBole's and recrunner's code assign
    assert (holder.state.best_epoch, holder.state.cur_step) == (3, 2)
    holder.state = TrainingState(best_epoch=7)  # resume replaces the state whole
    assert holder.best_epoch == 7 and holder.cur_step == 0


def test_the_trainer_exposes_every_state_field_under_its_name():
    from recrunner.training.loop.trainer import CustomTrainer

    for name in (f.name for f in dataclasses.fields(TrainingState)):
        assert isinstance(getattr(CustomTrainer, name), property), name
