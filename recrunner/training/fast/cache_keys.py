"""The compiler's cache: its folder (`share_compile_cache`: one per output folder), and why it compiled a
graph again: each compiled graph's key, component by component.

inductor finds a compiled graph in its cache by a key hashed from some 600 components: the graph's
code, its inputs' shapes and dtypes, each of inductor's settings, torch's deterministic-algorithms
and matmul settings, the CPU threads its C++ kernels were written for, the machine, torch's version.
One component that differs is a cache miss, and a run that should compile in seconds compiles for
a minute (a sweep's first fast cell on an H200: 35.9 s against 5.0 s for the run before it, with
its kernels in the cache). inductor logs every key's components at debug level
(`torch._inductor.codecache`: "FX graph cache hash details for key ..."), one line each:
`[hash] name: value`.

While a fast run compiles, `KeyListener` reads those records and lets through to the user's
handlers only what the logger's own level would have let through. At the run's end
(`CompileClock.read`) each graph the run compiled that the book did not know is compared with the
nearest one it knew, and the components that differ are the reason, in the run log and in
metrics.json's `compile_cache` ("compiled again for"):

    fast mode: compiling took 9.8s of this run (...); the compiler's cache held 0 of 2 graphs; it held
    them for other CPU threads (torch.set_num_threads): 1 here, 2 then

`KeyBook` keeps the keys beside the cache (`compiler-keys.json` in `TORCHINDUCTOR_CACHE_DIR`,
`<output>/.cache/compile/` for a run), the last `KEEP` graphs, each component's hash shortened
and its value cut short (not the graph's code, nor inductor's settings' values: their names say enough). A graph nearer to none than `NEAR` components is another graph (another
model or size), not a miss to explain.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from ...core.files import EntryFile

logger = logging.getLogger("recrunner")

FILE = "compiler-keys.json"
LOGGER = "torch._inductor.codecache"
HEADER = re.compile(r"FX graph cache hash details for key (\S+?):?\n")
COMPONENT = re.compile(r"^\[([0-9a-z]{16,})\] ([\w.]+(?:\[[^\]\n]*\])?): ?(.*)$")
KEEP = 16       # graphs the book keeps, the newest (about 35 KB each)
NEAR = 3        # at most this many components apart: the same graph, compiled again for them
HASH, VALUE = 8, 40  # characters kept of each component's hash and value
UNVALUED = ("gm", "inductor_config")  # components whose values are not kept: the code, and 600 settings
LABELS = {      # what a component is, for a reader (the rest keep torch's name)
    "gm": "the graph's code",
    "example_inputs": "inputs' shapes, strides or dtypes",
    "cpp_runtime_thread_count": "CPU threads (torch.set_num_threads)",
    "deterministic_algorithms_settings": "deterministic algorithms (deterministic)",
    "cuda_matmul_settings": "fp32 matrix products' precision (tf32)",
    "torch_version": "torch's version",
    "system_info": "machine (GPU, CUDA or Triton)",
    "inductor_config": "inductor setting",
    "fx_kwargs": "compile argument",
    "default_dtype": "default dtype",
}


class GraphKey(NamedTuple):
    key: str
    hashes: dict  # component -> its hash, shortened
    values: dict  # component -> its value, cut short (not the graph's code)


def parse(message: str) -> GraphKey | None:
    """One record of inductor's key details as a GraphKey, or None for any other message (pure)."""
    header = HEADER.match(message)
    if header is None:
        return None
    hashes, values = {}, {}
    for line in message[header.end():].splitlines():
        found = COMPONENT.match(line)
        if found:  # a line that does not match continues the value before it (the graph's code)
            digest, name, value = found.groups()
            hashes[name] = digest[:HASH]
            if not name.startswith(UNVALUED):
                values[name] = value if len(value) <= VALUE else value[:VALUE - 3] + "..."
    return GraphKey(header[1], hashes, values) if hashes else None


def differing(one: dict, other: dict) -> list[str]:
    """The components whose hashes differ, or that only one of two keys has (pure, sorted)."""
    return sorted(name for name in one.keys() | other.keys() if one.get(name) != other.get(name))


def label(name: str) -> str:
    """A component as a reader knows it: 'inductor setting fallback_random', 'CPU threads (...)' (pure)."""
    base, _, inner = name.partition("[")
    inner = inner.rstrip("]")
    if base in ("inductor_config", "fx_kwargs"):
        return f"{LABELS[base]} {inner}"
    return LABELS.get(base, name)


def compiled_again_for(new: list[GraphKey], known: dict[str, GraphKey]) -> list[str]:
    """Why each graph in `new` that `known` lacks was compiled, though a graph like it was in the cache
    (pure): for the nearest known graph, each component that differs, once, with both values where
    they are short ('CPU threads (torch.set_num_threads): 1 here, 2 then'). Nothing for a graph nearer
    to none than NEAR components."""
    reasons: dict[str, str] = {}
    for graph in new:
        if graph.key in known or not known:
            continue
        nearest = min(known.values(), key=lambda old: len(differing(graph.hashes, old.hashes)))
        names = differing(graph.hashes, nearest.hashes)
        if len(names) > NEAR:
            continue
        for name in names:
            here, then = graph.values.get(name), nearest.values.get(name)
            both = f": {here} here, {then} then" if here is not None and then is not None else ""
            reasons.setdefault(label(name), label(name) + both)
    return list(reasons.values())


def describe_reasons(reasons: list[str]) -> str:
    """The run log's clause (pure): '; it held them for other CPU threads (...): 1 here, 2 then', or ''."""
    return f"; it held them for other {'; other '.join(reasons)}" if reasons else ""


class KeyListener:
    """inductor's key details, read from its logger while attached (`start` ... `stop`); records the logger
    would have dropped stay dropped. One per process (LISTENER): a run that failed before `stop` leaves it
    attached, and the next run's `start` takes it over with the logger's level as it was found."""

    def __init__(self):
        self.keys: list[GraphKey] = []
        self._level: int | None = None  # the logger's own level, while attached
        self._shown = logging.WARNING   # the lowest level its records reached a handler at

    def start(self) -> None:
        log = logging.getLogger(LOGGER)
        self.keys.clear()
        if self._level is None:
            self._level, self._shown = log.level, log.getEffectiveLevel()
            log.addFilter(self)
            log.setLevel(logging.DEBUG)

    def stop(self) -> list[GraphKey]:
        """Detach; the keys read since `start`."""
        log = logging.getLogger(LOGGER)
        log.removeFilter(self)
        if self._level is not None:
            log.setLevel(self._level)
        self._level = None
        keys, self.keys = self.keys, []
        return keys

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.DEBUG and isinstance(record.msg, str):
            graph = parse(record.getMessage())
            if graph is not None:
                self.keys.append(graph)
        return self._level is None or record.levelno >= self._shown


LISTENER = KeyListener()


class KeyBook:
    """The keys of the graphs compiled into one cache folder: one JSON file, rewritten whole under a
    lock (cells of a sweep share the folder)."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder is not None else compile_cache_folder()
        self.file = EntryFile(self.folder / FILE, "graphs", unreadable=lambda exc: logger.warning(
            f"fast mode: {self.path} is unreadable ({type(exc).__name__}); it is written again"),
            unwritable=lambda exc: logger.warning(f"fast mode: could not keep the compiled graphs' keys in {self.path}: {exc}"))

    @property
    def path(self) -> Path:
        return self.folder / FILE

    def known(self) -> dict[str, GraphKey]:
        return {key: GraphKey(key, entry.get("hashes", {}), entry.get("values", {}))
                for key, entry in self.file.read().items() if isinstance(entry, dict)}

    def add(self, graphs: list[GraphKey]) -> None:
        """Keep `graphs`, then the newest KEEP; a folder that cannot be written only loses them (one line)."""
        if not graphs:
            return
        when = datetime.now(timezone.utc).isoformat(timespec="seconds")

        def kept(entries: dict) -> dict:
            for graph in graphs:
                entries.pop(graph.key, None)
                entries[graph.key] = {"when": when, "hashes": graph.hashes, "values": graph.values}
            return dict(list(entries.items())[-KEEP:])

        self.file.update(kept, separators=(",", ":"))


def share_compile_cache(folder: Path) -> None:
    """Let every run under one output folder share the compiler's cache, unless the user chose one.

    torch sets TORCHINDUCTOR_CACHE_DIR to its default (a folder in /tmp) as soon as it imports its
    compiler, so a value equal to that default is not the user's choice.
    """
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or current == _torch_default_cache_dir():
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)


def compile_cache_folder() -> Path:
    """The compiler's cache folder this process uses: `TORCHINDUCTOR_CACHE_DIR`, else torch's default."""
    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or _torch_default_cache_dir() or tempfile.gettempdir())


def _torch_default_cache_dir() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # another torch: only an unset variable is replaced
        return None
    return os.path.abspath(default_cache_dir())
