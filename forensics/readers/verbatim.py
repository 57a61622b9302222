"""Reading a file kept verbatim: every line into ``unparsed``, nothing interpreted.

For JSON named explicitly that is neither iteration stats nor a trace
(:data:`forensics.readers.kinds.OTHER_JSON`): its bytes are kept, line for line, so nothing the
user gave is lost, and no row of another table is invented from it. Plain, gzip or zstd; a cut or
corrupt compressed stream keeps what decompressed and adds the ``input_corrupt`` /
``input_truncated`` event, as the other readers do.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pyarrow as pa

from forensics.dataset.schema import EVENTS, UNPARSED
from forensics.readers.repeated_text import repeated
from forensics.readers.sources import compression_of, decompressed_chunks, open_raw

#: Lines per ``unparsed`` batch.
BATCH_LINES = 65536
READ_BYTES = 1 << 20


def _table(source: str, first: int, lines: list[bytes]) -> pa.Table:
    text = [ln.rstrip(b"\r").decode("utf-8", errors="replace") for ln in lines]
    return pa.table({"source": repeated(source, len(text)),
                     "line": pa.array(range(first, first + len(text)), pa.int64()),
                     "text": pa.array(text, pa.string())}, schema=UNPARSED)


def read_verbatim(path: str | os.PathLike, source: str,
                  progress: Callable[[int], None] | None = None
                  ) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Yield ``(unparsed, events)`` tables of ``path``: one ``unparsed`` row per line (the last
    line without its newline included), an event only when decompression stopped early."""
    line = 1
    rest = b""
    error = None
    with open_raw(path) as raw:
        for data, consumed, err in decompressed_chunks(raw, compression_of(path), READ_BYTES):
            if progress is not None and consumed:
                progress(consumed)
            rest += data
            lines = rest.split(b"\n")
            rest = lines.pop()
            for i in range(0, len(lines), BATCH_LINES):
                part = lines[i:i + BATCH_LINES]
                yield _table(source, line, part), EVENTS.empty_table()
                line += len(part)
            if err is not None:
                error = err
                break
    if rest:
        yield _table(source, line, [rest]), EVENTS.empty_table()
        line += 1
    if error is not None:
        row = {n: None for n in EVENTS.names}
        row.update(source=source, line=line, line_end=line, severity="E", kind=error.kind,
                   message=f"{error}; kept {line - 1} lines, the rest is lost")
        yield UNPARSED.empty_table(), pa.Table.from_pylist([row], schema=EVENTS)


__all__ = ["read_verbatim"]
