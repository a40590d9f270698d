"""Compiler failures remembered beside the compiler's cache (recrunner.training.fast.failures): the
next run of the same model starts where the first ended, without failing again first."""

import json

import pytest
import torch

from recrunner.training.fast.apply import FastMethod
from recrunner.training.fast.failures import FILE, Failure, FailureBook, model_key
from recrunner.training.fast.plan import FastPlan


class _Attention(torch.nn.Module):
    def __init__(self, heads: int = 1, size: int = 4):
        super().__init__()
        self.n_heads, self.linear, self.update = heads, torch.nn.Linear(size, 3), 0

    def calculate_loss(self, x):
        self.update += 1
        return self.linear(x).sum()

    def full_sort_predict(self, x):
        return self.linear(x)


def _inductor_error():
    from torch._inductor.exc import InductorError

    return InductorError(RuntimeError("shape '[s85, s56, 16]' is invalid"), "")


def _method(model, book, failing):
    """`model.full_sort_predict` compiled as fast mode does, the compile replaced by `failing`, which
    gets inductor's pattern-rewrite setting at each call (the real failure is torch's own)."""
    import torch._inductor.config as inductor

    method = FastMethod(model.full_sort_predict, FastPlan("fp32", compile=True), scoring=True, book=book)
    calls = []
    if method.compiled is not None:
        def compiled(*args):
            calls.append(inductor.pattern_matcher)
            failing(inductor.pattern_matcher)
            return model.linear(*args)

        method.compiled = compiled
    return method, calls


def _fails_with_rewrites(rewrites):
    if rewrites:
        raise _inductor_error()


def test_a_pattern_rewrite_failure_is_not_paid_again_by_the_next_run_of_the_model(tmp_path, caplog):
    book = FailureBook(tmp_path)
    first, calls = _method(_Attention(), book, _fails_with_rewrites)
    x = torch.randn(2, 4)
    with torch.no_grad():
        first(x), first(x)
    assert calls == [True, False, False]  # failed with the rewrites, compiled without them
    stored = json.loads((tmp_path / FILE).read_text())["failures"]
    assert [entry["outcome"] for entry in stored.values()] == ["no rewrites"]
    assert list(stored.values())[0]["model"] == "_Attention.full_sort_predict"

    with caplog.at_level("INFO", logger="recrunner"):
        again, calls = _method(_Attention(), FailureBook(tmp_path), _fails_with_rewrites)  # the next run
    with torch.no_grad():
        assert torch.equal(again(x), again.method(x))
    assert calls == [False]  # straight to what worked
    assert "full_sort_predict compiled without inductor's pattern rewrites, which failed on this model in an " \
           f"earlier run: InductorError: RuntimeError: shape '[s85, s56, 16]' is invalid (remembered in {tmp_path / FILE})" \
           in caplog.text


def test_a_failed_trace_is_remembered_as_eager_and_the_machines_failures_are_not(tmp_path, caplog):
    from torch._dynamo.exc import TorchRuntimeError

    def traced_wrongly(rewrites):
        raise TorchRuntimeError("RuntimeError when making fake tensor call")

    def no_compiler(rewrites):  # with and without the rewrites: no C++ compiler, a full disk, ...
        raise _inductor_error()

    x = torch.randn(2, 4)
    with torch.no_grad():
        _method(_Attention(size=5), FailureBook(tmp_path), no_compiler)[0](torch.randn(2, 5))
    assert not (tmp_path / FILE).exists()  # tried again next time
    with torch.no_grad():
        _method(_Attention(), FailureBook(tmp_path), traced_wrongly)[0](x)
    with caplog.at_level("WARNING", logger="recrunner"):
        again, calls = _method(_Attention(), FailureBook(tmp_path), traced_wrongly)
    assert again.compiled is None and calls == []
    assert "full_sort_predict runs eagerly, the compiler failed on this model in an earlier run: TorchRuntimeError: " \
           "RuntimeError when making fake tensor call (remembered in" in caplog.text and "delete it to try again" in caplog.text
    with torch.no_grad():
        assert torch.equal(again(x), again.method(x))


def test_the_key_is_one_method_of_one_model_as_built():
    base = model_key(_Attention(), "full_sort_predict", "fp32, compiled")
    assert base == model_key(_Attention(), "full_sort_predict", "fp32, compiled")  # other weights, same model
    counted = _Attention()
    counted.update = 7  # a count its loss raises: not part of the model as built
    assert model_key(counted, "full_sort_predict", "fp32, compiled", ("update",)) == \
        model_key(_Attention(), "full_sort_predict", "fp32, compiled", ("update",))
    assert len({base,
                model_key(_Attention(heads=2), "full_sort_predict", "fp32, compiled"),  # an int attribute
                model_key(_Attention(size=5), "full_sort_predict", "fp32, compiled"),   # a tensor's shape
                model_key(_Attention(), "calculate_loss", "fp32, compiled"),            # another method
                model_key(_Attention(), "full_sort_predict", "bf16, compiled"),         # another plan
                model_key(_Attention().double(), "full_sort_predict", "fp32, compiled"),  # a dtype
                }) == 6


def test_the_book_keeps_every_writers_entries_and_survives_a_damaged_file(tmp_path, caplog):
    one, two = FailureBook(tmp_path), FailureBook(tmp_path)  # two cells of a sweep
    one.add("a", Failure("eager", "dynamo failed", "DMF.full_sort_predict"))
    two.add("b", Failure("no rewrites", "inductor failed", "SASRec.full_sort_predict"))
    assert one.get("a").outcome == "eager" and one.get("b").outcome == "no rewrites" and one.get("c") is None
    assert one.get("a").when  # stamped
    (tmp_path / FILE).write_text("{not json")
    with caplog.at_level("WARNING", logger="recrunner"):
        assert one.get("a") is None
    assert f"{tmp_path / FILE} is unreadable (JSONDecodeError)" in caplog.text
    one.add("c", Failure("eager", "x", "M.predict"))  # rewritten whole
    assert json.loads((tmp_path / FILE).read_text())["failures"].keys() == {"c"}
    with pytest.raises(ValueError, match="must be one of"):
        Failure("compiled", "x", "M.predict")


def test_a_method_without_a_book_or_compile_remembers_nothing(tmp_path):
    model = _Attention()
    eager = FastMethod(model.full_sort_predict, FastPlan("bf16", compile=False), scoring=True, book=FailureBook(tmp_path))
    assert eager.key is None and eager.compiled is None
    method, _ = _method(model, None, _fails_with_rewrites)
    with torch.no_grad():
        method(torch.randn(2, 4))
    assert not (tmp_path / FILE).exists()


def test_cache_list_shows_the_compilers_cache_and_what_it_remembers(tmp_path, capsys):
    from tests.conftest import run_cli

    output = ["--output", str(tmp_path / "runs")]
    code, out, _ = run_cli(capsys, ["cache", "list", *output])
    assert code == 0 and "compiler" not in out  # no fast run compiled here
    folder = tmp_path / "runs" / ".cache" / "compile"
    (folder / "ab").mkdir(parents=True)
    (folder / "ab" / "kernel.so").write_bytes(b"x" * 1_500_000)
    code, out, _ = run_cli(capsys, ["cache", "list", *output])
    assert f"{folder}: the compiler's cache of fast runs, 1.5 MB\n" in out
    FailureBook(folder).add("k1", Failure("no rewrites", "InductorError: shape", "SASRec.full_sort_predict", "2026-11-28T10:00"))
    FailureBook(folder).add("k2", Failure("eager", "TorchRuntimeError: fake", "DMF.full_sort_predict", "2026-11-28T09:00"))
    code, out, _ = run_cli(capsys, ["cache", "list", *output])
    assert code == 0
    assert f"; 2 compiler failures remembered (delete {folder / FILE} to try again):\n" \
           "  DMF.full_sort_predict: runs eagerly (TorchRuntimeError: fake), since 2026-11-28T09:00\n" \
           "  SASRec.full_sort_predict: compiled without inductor's pattern rewrites (InductorError: shape), " \
           "since 2026-11-28T10:00" in out
