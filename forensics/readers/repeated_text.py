"""One text repeated as a string column: a trace batch's ``run`` and ``source``, the ``source``
of a stats batch and of a log's iterations, events and unparsed lines.

Every batch of a trace repeats the run name once per request: building that column afresh
(``pa.repeat``) copied the name tens of millions of times at 32 ranks x 100k iterations
(~9 % of the trace reading's CPU, measured). The column of a text is built once, at the
longest length asked so far, and handed out as zero-copy slices of it.
"""
from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

#: Texts whose column is kept (a reader has a run name and a file name at a time; the ingest
#: reads two files at once).
KEEP_TEXTS = 8
#: A column holding more bytes than this is built for its caller only, not kept.
KEEP_BYTES = 64 << 20

_lock = threading.Lock()
_kept: dict[str, pa.StringArray] = {}


def repeated(text: str, n: int) -> pa.StringArray:
    """``text`` ``n`` times as a plain string array (a slice of one kept for the next call)."""
    with _lock:
        have = _kept.get(text)
    if have is not None and len(have) >= n:
        return have.slice(0, n)
    column = build(text, n)
    if n * len(text.encode()) <= KEEP_BYTES:
        with _lock:
            _kept.pop(text, None)
            while len(_kept) >= KEEP_TEXTS:
                _kept.pop(next(iter(_kept)))
            _kept[text] = column
    return column


def build(text: str, n: int) -> pa.StringArray:
    """``text`` ``n`` times as a new plain string array, built from its buffers."""
    raw = text.encode()
    if n * len(raw) >= 2 ** 31:         # past int32 offsets: a dictionary cast makes it
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                              pa.array([text])).cast(pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


__all__ = ["KEEP_BYTES", "KEEP_TEXTS", "build", "repeated"]
