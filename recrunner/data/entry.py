"""The data cache's file format: one file per entry, a readable header, a small pickle, raw arrays.

    magic line | header length (8 bytes) | header (JSON) | payload length | payload (pickle)
    | arrays, each at a 64-byte boundary

The header (what the entry is: dataset, settings, sizes, when built) is read alone by
`recrunner cache list`. The payload refers to arrays by their index in the list given to `write`;
integer arrays are stored in the narrowest integer type that holds their values and widened
back on reading, so ids, indices and lengths cost 1-4 bytes instead of 8. Reading is one read
of the file; the arrays are views of it (or widened copies).
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import numpy as np

from ..core.files import atomic_file

MAGIC = b"recrunner data cache 2\n"
_ALIGN = 64
_NARROW = (np.int8, np.int16, np.int32)


class EntryError(Exception):
    """Not an entry of this format, or a damaged one."""


def write(path: Path, header: dict, payload, arrays: list[np.ndarray]) -> int:
    """Write the entry atomically (a crash leaves the old file or the new one); its size in bytes."""
    stored = [_narrowed(np.ascontiguousarray(a)) for a in arrays]
    layout, offset = [], 0
    for original, narrow in zip(arrays, stored):
        offset = _aligned(offset)
        layout.append((narrow.dtype.str, np.dtype(original.dtype).str, narrow.shape, offset))
        offset += narrow.nbytes
    header_bytes = json.dumps(header, sort_keys=True, default=str).encode()
    payload_bytes = pickle.dumps({"layout": layout, "payload": payload}, protocol=pickle.HIGHEST_PROTOCOL)
    with atomic_file(path) as f:
        f.write(MAGIC + struct.pack("<Q", len(header_bytes)) + header_bytes)
        f.write(struct.pack("<Q", len(payload_bytes)) + payload_bytes)
        start = f.tell()
        for (_, _, _, at), narrow in zip(layout, stored):
            f.write(b"\0" * (start + at - f.tell()))
            f.write(memoryview(narrow).cast("B") if narrow.nbytes else b"")
        return f.tell()


def read_header(path: Path) -> dict:
    with open(path, "rb") as f:
        return _header(f)


def read(path: Path) -> tuple[dict, object, list[np.ndarray]]:
    """(header, payload, arrays) of the entry; EntryError if it is not a whole entry of this format."""
    with open(path, "rb") as f:
        header = _header(f)
        (size,) = struct.unpack("<Q", _exactly(f, 8))
        try:
            content = pickle.loads(_exactly(f, size))
        except Exception as exc:
            raise EntryError(f"unreadable payload ({type(exc).__name__})") from None
        data = bytearray(f.read())  # writable: torch tensors made from these arrays may be written to
    arrays = []
    for stored_dtype, dtype, shape, at in content["layout"]:
        stored_dtype = np.dtype(stored_dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if at + count * stored_dtype.itemsize > len(data):
            raise EntryError("truncated")
        array = np.frombuffer(data, dtype=stored_dtype, count=count, offset=at).reshape(shape)
        arrays.append(array if stored_dtype == np.dtype(dtype) else array.astype(dtype))
    return header, content["payload"], arrays


def _header(f) -> dict:
    if f.read(len(MAGIC)) != MAGIC:
        raise EntryError("not a recrunner data cache entry of this version")
    (size,) = struct.unpack("<Q", _exactly(f, 8))
    try:
        return json.loads(_exactly(f, size))
    except ValueError:
        raise EntryError("unreadable header") from None


def _exactly(f, size: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise EntryError("truncated")
    return data


def _narrowed(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind not in "iu" or array.size == 0:
        return array
    low, high = int(array.min()), int(array.max())
    for dtype in _NARROW:
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max and np.dtype(dtype).itemsize < array.dtype.itemsize:
            return array.astype(dtype)
    return array


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN
