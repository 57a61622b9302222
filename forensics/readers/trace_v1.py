"""Reader of request-state traces, formats v1 and v2 (``traces/FORMAT.md``).

A trace file is JSON Lines: one run record first, then frame records (a rank's
``active_requests`` at entry to the pad step) and optional note records. The reader streams the
file (plain, gzip or zstd) and returns the ``runs``, ``frames``, ``requests``, ``events`` and
``unparsed`` tables in the exact schemas of ``forensics.dataset.schema``.

:func:`iter_trace` yields those tables in batches of at most ``batch_frames`` frames, so ingest
memory stays flat as a trace grows (a fleet-hour trace is gigabytes); :func:`read_trace` is the
same reader concatenated. Batch boundaries do not change the rows: duplicate ``(iter, rank)``
frames are checked against every earlier batch (a byte per frame key kept, see
:mod:`forensics.readers.frame_keys`), and every error names
the same file and line as an unbatched read would. Blocks of plain frame lines are read
read by a compiled byte scanner (:mod:`forensics.readers.json_scan`) when the input is big
enough and the scanner is ready; any other block, and any block it declines, is read line by
line here (the specification of the scanner), so the rows and errors are the same whichever
path reads a block.

Example:
    >>> t = read_trace("run.jsonl", "run.jsonl")          # doctest: +SKIP
    >>> t.frames.num_rows, t.requests.num_rows             # doctest: +SKIP
    >>> for batch in iter_trace("big.jsonl.zst", batch_frames=100_000):  # doctest: +SKIP
    ...     writer.write("requests", batch.requests)
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.errors import TraceFormatError
from forensics.readers import json_scan
from forensics.readers.event_kinds import INPUT_TRUNCATED
from forensics.readers.json_object_lines import LineBlocks
from forensics.readers.sources import (DecompressionError, compression_of, content_size,
                                       decompressed_chunks, open_raw)
from forensics.readers.trace_tables import (FORMAT_NAME, FORMAT_VERSION, NOTE_EVENT_KIND,
                                            TraceBuilder, TraceTables, decode_line)
from forensics.readers.zstd_into import ZstdInto

#: Frames per batch of :func:`iter_trace`: ~100 MB peak at 16 requests a frame; larger batches
#: are no faster (measured by benchmarks/trace_ingest.py).
DEFAULT_BATCH_FRAMES = 1 << 15
#: A batch is also cut at this many requests per frame of ``batch_frames`` (huge frames).
_REQUESTS_PER_FRAME_CAP = 16
_HEAD_RE = re.compile(r'"kind"\s*:\s*"run"')
_FORMAT_RE = re.compile(r'"format"\s*:\s*"adp-trace"')
_READ_BYTES = 1 << 20
#: Bytes of whole lines per block read line by line (the scanner's blocks: ``json_scan``).
BLOCK_BYTES = 2 << 20


def is_trace(head_text: str) -> bool:
    """True when the text starts (after blank lines) with a trace run record (any version)."""
    for line in head_text.splitlines():
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            # The head may cut a long first line; fall back to the two key markers.
            return s.startswith("{") and bool(_HEAD_RE.search(s)) and bool(_FORMAT_RE.search(s))
        return isinstance(obj, dict) and obj.get("kind") == "run" and obj.get("format") == FORMAT_NAME
    return False


def read_trace(path: str | os.PathLike, source: str | None = None) -> TraceTables:
    """Read one trace file (plain, .gz or .zst) whole: :func:`iter_trace` concatenated.

    Args:
        path: the file.
        source: the name recorded in the ``source`` columns (default: the path as given).

    Raises:
        TraceFormatError: naming the file and line, for any break of the format.
    """
    batches = list(iter_trace(path, source))
    return TraceTables(*(pa.concat_tables([getattr(b, f.name) for b in batches]).combine_chunks()
                         for f in dataclasses.fields(TraceTables)))


def iter_trace(path: str | os.PathLike, source: str | None = None, *,
               batch_frames: int = DEFAULT_BATCH_FRAMES,
               progress: Callable[[int], None] | None = None) -> Iterator[TraceTables]:
    """Stream one trace file as batches of tables; memory is bounded by ``batch_frames``.

    The first batch holds the ``runs`` row; later ones have an empty ``runs``. Concatenated,
    the batches are exactly :func:`read_trace`'s tables whatever ``batch_frames`` is. An error
    stops the iteration after earlier batches were yielded, so a consumer writing them must
    discard its output on an exception (``DatasetWriter`` does).

    Args:
        path: the file (plain, gzip or zstd, sniffed by content).
        source: the name recorded in the ``source`` columns (default: the path as given).
        batch_frames: frames per batch (a batch is also cut at 16 requests per such frame).
        progress: called with on-disk (compressed) bytes consumed since its last call; the
            calls add up to the file size.

    Raises:
        TraceFormatError: naming the file and line, for any break of the format.
    """
    if batch_frames < 1:
        raise ValueError(f"batch_frames must be >= 1, got {batch_frames}")
    src = str(path) if source is None else source
    builder = TraceBuilder(src, str(path))
    max_requests = batch_frames * _REQUESTS_PER_FRAME_CAP
    lineno = 1
    stop: dict[str, Any] = {}
    native = json_scan.enabled(content_size(path))   # decompressed: zstd JSON is ~1/60
    for block in _blocks(path, progress, stop, json_scan.BLOCK_BYTES if native else BLOCK_BYTES,
                         lent=native):
        # Lines up to the run record one by one; then the block by the compiled scanner when
        # it takes it, else line by line (exact errors naming file and line). A lent block
        # (a view of the reader's buffer) is copied for anything but the scanner.
        if not builder.first_record_seen:
            block = bytes(block)
        while block and not builder.first_record_seen:
            cut = block.find(b"\n") + 1 or len(block)
            builder.add_line(decode_line(block[:cut]), lineno)
            lineno += 1
            block = block[cut:]
        if not block:
            continue
        fast = None
        if native and builder.run is not None:
            fast = json_scan.frames(block, lineno, builder.tp_size)
        if fast is not None:
            lineno += fast.n_frames
            while fast.n_frames:
                # cut where the per-line loop below would: after the frame that fills the batch
                room = batch_frames - builder.n_frames
                reqs = np.cumsum(fast.num_requests, dtype=np.int64) + builder.n_requests
                full = np.flatnonzero(reqs >= max_requests)
                take = min(room, int(full[0]) + 1 if full.size else fast.n_frames)
                if take >= fast.n_frames:
                    builder.add_frames(fast)
                    if builder.n_frames >= batch_frames or builder.n_requests >= max_requests:
                        yield builder.flush()
                    break
                builder.add_frames(fast.slice(0, take))
                yield builder.flush()
                fast = fast.slice(take, fast.n_frames)
            continue
        parts = bytes(block).split(b"\n")
        if parts[-1] == b"":
            parts.pop()
        for p in parts:
            builder.add_line(decode_line(p), lineno)
            lineno += 1
            if builder.n_frames >= batch_frames or builder.n_requests >= max_requests:
                yield builder.flush()
    if "error" in stop:
        yield builder.stopped(stop["error"], stop.get("tail"), lineno)
        return
    yield builder.finish()


def tables_from_records(records: Iterable[dict], source: str) -> TraceTables:
    """Tables from in-memory records (record ``n`` is treated as line ``n``, 1-based)."""
    builder = TraceBuilder(source, source)
    for lineno, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            builder.raise_pending_duplicate()
            raise TraceFormatError(f"record is not a JSON object: {rec!r:.80}", path=source, line=lineno)
        builder.add_record(rec, lineno, None)
    return builder.finish()


def _blocks(path: str | os.PathLike, progress: Callable[[int], None] | None,
            stop: dict[str, Any] | None = None, block_bytes: int = BLOCK_BYTES,
            lent: bool = False) -> Iterator[bytes | memoryview]:
    """The decompressed bytes of ``path`` in blocks of whole lines (about ``block_bytes``, each
    ending in a newline), the last block being the tail after the last newline, if any.
    ``lent``: the blocks read straight into a buffer (zstd and plain files) are views of it
    (:meth:`LineBlocks.lend`), valid until the next block is asked for: a copy of 3 GB saved
    on a fleet-hour trace (0.05-0.2 s CPU in three paired rounds, measured).

    When decompression stops early, ``stop["error"]`` is the
    :class:`~forensics.readers.sources.DecompressionError` and the cut line after the last newline
    is not yielded but left in ``stop["tail"]`` (it is kept verbatim, never parsed as a record).
    """
    stop = {} if stop is None else stop
    comp = compression_of(path)
    if comp == "zstd":                 # decompressed straight into the blocks' buffer
        with open_raw(path) as raw:
            reader = ZstdInto(path, raw, progress)
            yield from _cut(LineBlocks(reader=reader, read_bytes=block_bytes, lent=lent),
                            block_bytes, stop, reader)
        return
    if comp is not None:
        yield from _cut(LineBlocks(_chunks(path, progress, stop)), block_bytes, stop)
        return
    left = os.path.getsize(path)       # progress adds up to the size, as in _chunks

    def report(n: int) -> None:
        nonlocal left
        step = min(n, left)
        if step and progress is not None:
            left -= step
            progress(step)
    with open_raw(path) as raw:        # read straight into the blocks' buffer
        yield from _cut(LineBlocks(reader=raw, progress=report, read_bytes=block_bytes,
                                   lent=lent), block_bytes, stop)
    if progress is not None and left:
        progress(left)


def _cut(blocks: LineBlocks, block_bytes: int, stop: dict[str, Any],
         reader: ZstdInto | None = None) -> Iterator[bytes | memoryview]:
    """:func:`_blocks` of the bytes of ``blocks`` (read from ``reader``, if given)."""
    want = block_bytes
    while True:
        blocks.fill(want)
        if blocks.eof:
            break
        cut = blocks.cut(block_bytes)
        if cut:
            yield blocks.lend(cut) if blocks.lent else blocks.take(cut)
            want = block_bytes
        else:                 # a line longer than a block: read on to its end
            want = blocks.available() + 1
    if reader is not None and reader.error is not None:
        stop["error"] = reader.error
    cut = blocks.cut(blocks.available())
    if cut:
        yield blocks.take(cut)
    tail = blocks.rest()
    if tail:
        if "error" not in stop and tail.strip() and not _whole_record(tail):
            # The file ends inside a line that is no record: its writer stopped mid-line.
            stop["error"] = DecompressionError(
                "the file ends inside a line (no newline after an incomplete record)",
                INPUT_TRUNCATED, -1)
        if "error" in stop:
            stop["tail"] = tail
        else:
            yield tail


def _whole_record(line: bytes) -> bool:
    """Whether a last line without its newline holds a whole JSON value (a cut one does not)."""
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _chunks(path: str | os.PathLike, progress: Callable[[int], None] | None,
            stop: dict[str, Any]) -> Iterator[bytes]:
    """The decompressed bytes of ``path`` in chunks; ``progress`` gets the on-disk bytes.
    Everything decompressed before a corrupt block or a cut is yielded; the error goes to
    ``stop["error"]``."""
    comp = compression_of(path)
    size = os.path.getsize(path)
    reported = 0
    with open_raw(path) as raw:
        for chunk, consumed, err in decompressed_chunks(raw, comp, _READ_BYTES):
            if progress is not None and consumed:
                step = min(consumed, max(size - reported, 0))
                if step:
                    progress(step)
                    reported += step
            if chunk:
                yield chunk
            if err is not None:
                stop["error"] = err
                break
    if progress is not None and size > reported:
        progress(size - reported)


__all__ = [
    "DEFAULT_BATCH_FRAMES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "NOTE_EVENT_KIND",
    "TraceTables",
    "is_trace",
    "iter_trace",
    "read_trace",
    "tables_from_records",
]
