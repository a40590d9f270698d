"""recrunner/training/fast/cache_keys.py: why the compiler's cache compiled a graph again, from the components
of its key that inductor logs."""

import json
import logging

from recrunner.training.fast.cache_keys import (FILE, KEEP, LOGGER, GraphKey, KeyBook, KeyListener,
                                                compiled_again_for, describe_reasons, differing, label, parse)

DETAILS = """FX graph cache hash details for key fabc123:
[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa] gm: GraphModule()

def forward(self, primals_1):
    [x] = primals_1  # a line of code that looks like nothing else
    return (x,)
[bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=torch.Size([s77, 8]), stride=(8, 1))
[cccccccccccccccccccccccccccccc] deterministic_algorithms_settings: (False, False, True)
[dddddddddddddddddddddddddddddd] cpp_runtime_thread_count: 2
[eeeeeeeeeeeeeeeeeeeeeeeeeeeeee] inductor_config[fallback_random]: False"""


def graph(key, **hashes):
    base = {"gm": "g", "example_inputs[0]": "i", "cpp_runtime_thread_count": "2", "inductor_config[a]": "a",
            "inductor_config[b]": "b", "torch_version": "t"}
    values = {"cpp_runtime_thread_count": hashes.get("cpp_runtime_thread_count", "2"), "torch_version": "2.13"}
    return GraphKey(key, {**base, **hashes}, values)


def test_a_record_of_inductor_s_key_details_is_its_components_hashes_and_short_values():
    found = parse(DETAILS)
    assert found.key == "fabc123"
    assert found.hashes == {"gm": "aaaaaaaa", "example_inputs[0]": "bbbbbbbb", "deterministic_algorithms_settings": "cccccccc",
                            "cpp_runtime_thread_count": "dddddddd", "inductor_config[fallback_random]": "eeeeeeee"}
    # no code, no inductor setting's value; long values cut short
    assert found.values == {"example_inputs[0]": "TensorMetadata(dtype=torch.float32, s...",
                            "deterministic_algorithms_settings": "(False, False, True)", "cpp_runtime_thread_count": "2"}
    assert parse("fx graph cache miss for key fabc123") is None and parse("FX graph cache hash details for key f:\n") is None


def test_a_graph_compiled_again_is_explained_by_what_differs_from_the_nearest_graph_the_cache_held():
    known = {"f1": graph("f1"), "f2": graph("f2", gm="other", torch_version="x", **{"example_inputs[0]": "j"})}
    again = graph("f3", cpp_runtime_thread_count="1")
    assert differing(again.hashes, known["f1"].hashes) == ["cpp_runtime_thread_count"]
    assert compiled_again_for([again], known) == ["CPU threads (torch.set_num_threads): 1 here, 2 then"]
    setting = graph("f4", **{"inductor_config[a]": "changed"})  # a value not kept: named, not quoted
    assert compiled_again_for([again, setting, again], known) == [
        "CPU threads (torch.set_num_threads): 1 here, 2 then", "inductor setting a"]
    assert compiled_again_for([known["f1"]], known) == []  # found: nothing to explain
    assert compiled_again_for([again], {}) == []  # the first graph of a cache
    elsewhere = graph("f5", gm="x", torch_version="y", cpp_runtime_thread_count="3", **{"inductor_config[b]": "z"})
    assert compiled_again_for([elsewhere], known) == []  # another graph, not the same one missed
    assert describe_reasons(["inductor setting a", "torch's version: 2.13 here, 2.11 then"]) == \
        "; it held them for other inductor setting a; other torch's version: 2.13 here, 2.11 then"
    assert describe_reasons([]) == ""


def test_components_are_named_as_a_reader_knows_them():
    assert label("inductor_config[fallback_random]") == "inductor setting fallback_random"
    assert label("fx_kwargs[is_inference]") == "compile argument is_inference"
    assert label("example_inputs[3]") == "inputs' shapes, strides or dtypes"
    assert label("system_info[hash]") == "machine (GPU, CUDA or Triton)"
    assert label("something_new") == "something_new"


def test_the_book_keeps_the_newest_graphs_and_survives_a_bad_file(tmp_path, caplog):
    book = KeyBook(tmp_path)
    assert book.known() == {}
    book.add([graph(f"f{i}") for i in range(KEEP + 2)])
    known = book.known()
    assert list(known) == [f"f{i}" for i in range(2, KEEP + 2)] and known["f5"] == graph("f5")
    book.add([graph("f2")])  # seen again: now the newest
    assert list(book.known())[-1] == "f2"
    (tmp_path / FILE).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="recrunner"):
        assert book.known() == {}
    assert "unreadable" in caplog.text
    book.add([graph("f9")])
    assert list(json.loads((tmp_path / FILE).read_text())["graphs"]) == ["f9"]


def test_the_listener_reads_the_details_and_lets_through_only_what_the_logger_showed(caplog):
    log = logging.getLogger(LOGGER)
    level = log.level
    listener = KeyListener()
    with caplog.at_level(logging.INFO):  # a handler on the root: what reached it
        log.setLevel(logging.WARNING)
        listener.start()
        listener.start()  # a run that failed before stop: taken over, the logger's level as first found
        log.debug(DETAILS)
        log.info("an info line the logger did not show")
        log.warning("a warning it showed")
        keys = listener.stop()
        shown = [record.getMessage() for record in caplog.records if record.name == LOGGER]
        assert log.level == logging.WARNING and listener not in log.filters
        log.setLevel(level)
    assert [k.key for k in keys] == ["fabc123"] and shown == ["a warning it showed"]
    assert listener.stop() == []
