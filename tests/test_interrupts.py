"""recrunner.core.interrupts: a stop from outside is never a failure, and never cuts a record in half."""

import os
import signal

import pytest

from recrunner.core.errors import RunInterrupted
from recrunner.core.interrupts import deferred, sigterm_interrupts


def test_an_interrupt_passes_every_except_exception_on_its_way():
    with pytest.raises(RunInterrupted):
        try:
            raise RunInterrupted("received SIGTERM")
        except Exception:  # RecBole's, a library's, recrunner's own: none may turn a stop into a failure
            pytest.fail("RunInterrupted was caught as an Exception")
    assert issubclass(RunInterrupted, KeyboardInterrupt) and RunInterrupted.exit_code == 130


def test_sigterm_raises_inside_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted, match="SIGTERM"):
        with sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            [None for _ in range(1000)]  # Python runs the handler between bytecodes
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_inside_deferred_waits_for_its_end_then_reaches_the_handler_it_would_have_met():
    steps = []
    with pytest.raises(RunInterrupted):
        with sigterm_interrupts():
            with deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                [None for _ in range(1000)]
                steps.append("record written")  # not cut short by the signal
            steps.append("after")  # the deferred stop is raised at the block's end
    assert steps == ["record written"]


def test_deferred_without_a_stop_changes_nothing():
    with sigterm_interrupts():
        handler = signal.getsignal(signal.SIGTERM)
        with deferred():
            pass
        assert signal.getsignal(signal.SIGTERM) is handler


def test_a_stop_while_a_checkpoint_is_written_leaves_it_whole_and_is_still_a_stop(tmp_path, monkeypatch):
    import torch

    from recrunner.training.checkpoints import files as checkpoint

    real_save = torch.save

    def save_while_stopped(state, handle):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while torch's writer calls back into Python
        real_save(state, handle)

    monkeypatch.setattr(torch, "save", save_while_stopped)
    state = {"format_version": checkpoint.FORMAT_VERSION, "weights": torch.arange(10_000.0)}
    with pytest.raises(RunInterrupted):  # not torch's RuntimeError, not a CheckpointError
        with sigterm_interrupts():
            checkpoint.save_atomic(state, tmp_path / "last.pth")
    assert torch.equal(torch.load(tmp_path / "last.pth", weights_only=True)["weights"], state["weights"])
