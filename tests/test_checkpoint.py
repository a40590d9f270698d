import pickle
import random

import numpy as np
import pytest
import torch

from recrunner.training.checkpoints import files as checkpoint, rng
from recrunner.core.errors import CheckpointError


def _state(value=1.0):
    return {"format_version": checkpoint.FORMAT_VERSION, "kind": "last", "epoch": 0, "w": torch.tensor([value])}


def test_saved_checkpoints_open_with_weights_only(tmp_path):
    path = tmp_path / "last.pth"
    checkpoint.save_atomic(_state(), path)
    assert torch.load(path, weights_only=True)["w"].item() == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["last.pth"]  # no tmp file left behind


def test_state_that_needs_unpickling_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match="numpy.float64"):
        checkpoint.save_atomic({**_state(), "score": np.float64(0.5)}, tmp_path / "x.pth")
    assert not list(tmp_path.iterdir())


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pth"
    checkpoint.save_atomic(_state(1.0), path)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match="No space left on device"):
        checkpoint.save_atomic(_state(2.0), path)
    assert checkpoint.load(path)["w"].item() == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["last.pth"]


def test_garbage_and_truncated_files_are_one_line_errors(tmp_path):
    good = tmp_path / "good.pth"
    checkpoint.save_atomic(_state(), good)
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(good.read_bytes()[:100])
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"\x00not a checkpoint" * 10)
    for path in (truncated, garbage):
        with pytest.raises(CheckpointError, match="corrupt or truncated") as info:
            checkpoint.load(path)
        assert "\n" not in str(info.value)


def test_a_checkpoint_needing_arbitrary_unpickling_is_refused(tmp_path):
    path = tmp_path / "foreign.pth"
    torch.save({"config": pickle.loads(pickle.dumps(np.random.RandomState(0)))}, path)
    with pytest.raises(CheckpointError, match="needs arbitrary unpickling"):
        checkpoint.load(path)


def test_rng_state_round_trips_every_generator():
    generator = torch.Generator().manual_seed(7)
    state = rng.capture({"train": generator})
    expected = (random.random(), np.random.rand(), torch.rand(1).item(), torch.rand(1, generator=generator).item())
    rng.restore(state, {"train": generator})
    assert (random.random(), np.random.rand(), torch.rand(1).item(), torch.rand(1, generator=generator).item()) == expected


def test_last_pth_is_written_after_the_points_logged_before_it(workspace, monkeypatch):
    """A run SIGKILLed after a checkpoint resumes from it and does not log the points before it again: they
    must be in their event files first (a resumed run's step curve missed some under load)."""
    from tests.conftest import TINY_BPR, trainer_and_data

    trainer, *_ = trainer_and_data(workspace, "BPR", TINY_BPR)
    done = []
    monkeypatch.setattr(trainer.tensorboard, "flush", lambda: done.append("events flushed"))
    monkeypatch.setattr(checkpoint, "save_atomic", lambda state, path: done.append(f"{path.name} written"))
    trainer.checkpoints.save_last(0)
    assert done == ["events flushed", "last.pth written"]
