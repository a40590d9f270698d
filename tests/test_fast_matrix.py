"""bench/fast_matrix.py's verdict per model, read from a fast run's log lines (pure)."""

import importlib.util

from .conftest import REPO


def _matrix():
    spec = importlib.util.spec_from_file_location("fast_matrix", REPO / "bench" / "fast_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_is_read_from_the_plans_line_whatever_fast_mode_says_before_it():
    verdict = _matrix().verdict
    lines = ["fast mode: full-sort evaluation in batches of 256 users (61 a batch at eval_batch_size 65536)",
             "fast mode: bf16, compiled (this CPU has native bf16; fast_dropout: torch keeps them)",
             "fast mode: MultiVAE's loss changes self.update, compiled as a symbol (one graph, not one per value)"]
    assert verdict(None, None, lines) == ("compiled", "bf16, compiled", "this CPU has native bf16; fast_dropout: torch keeps them")
    eager = lines + ["fast mode: full_sort_predict runs eagerly, the compiler failed: TorchRuntimeError: ..."]
    assert verdict(None, None, eager)[:2] == ("eager", "bf16, eager")
    assert verdict(None, None, ["fast mode: exact (BPR runs exactly: measured slower)"])[0] == "exact"
    assert verdict("x", "y", [])[0] == "both fail" and verdict(None, "y", [])[0] == "fails"
