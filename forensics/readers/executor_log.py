"""Streaming parser of TensorRT-LLM executor text logs into iterations / events / unparsed rows.

Why this shape: post-mortem logs run to gigabytes and are almost all iteration lines, so the
work per line must be vectorised. A log is read in blocks of whole lines; each block is turned
into an Arrow string array and pushed through RE2 kernels (``pyarrow.compute``) in a worker
thread (Arrow releases the GIL, so two blocks are analysed at once). Only the rare candidate
lines (tracebacks, banners, known messages; see :data:`log_events.CANDIDATE_PATTERN`) are
looked at in Python, in order, by a scanner whose open multi-line events carry over from one
block to the next. Memory holds a bounded number of blocks, whatever the input size.
For big inputs, :mod:`native_scan` first reads the common iteration lines of each block in one
compiled pass; only the other lines take the Arrow path, and the rows are the same either way.
The stages: blocks of whole lines (:mod:`log_blocks`), the vectorised stage
(:mod:`analysed_block`), the sequential stage (:mod:`log_scanner`), then rows assembled here.

Line accounting: every line (1-based, of the decompressed text; a final line without newline
counts; a trailing ``\\r`` is dropped as part of the line end) is exactly one of: the ``line`` of
an ``iterations`` row, the ``line`` of a single-line event, inside ``line``..``line_end`` of one
multi-line event, or an ``unparsed`` row (verbatim, invalid UTF-8 replaced). Note events
(``event_kinds.NOTES``: ``nul_bytes``, ``input_truncated``) claim no line.

Wrappers (collector exports, launchers, logger prefixes: :mod:`line_prefix`) are recorded in
each row's ``collector``/``collector_time``/``host``; log times become timestamps
(:mod:`timestamps`). A line longer than :data:`MAX_LINE_BYTES` is never held whole.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import EVENTS as EVENTS_TYPED
from forensics.dataset.schema import ITERATIONS, TRACEBACK_FRAMES, UNPARSED
from forensics.readers import event_kinds, native_scan, sources, timestamps
from forensics.readers.analysed_block import Block, Scanned, Streams, analyse, finish_scanned
from forensics.readers.log_blocks import MAX_LINE_BYTES, LongLine, blocks
from forensics.readers.log_scanner import Scanner
from forensics.readers.native_events import Taken, event_columns, in_order
from forensics.readers.repeated_text import repeated

log = logging.getLogger(__name__)

#: Events as built here: ``log_time`` still the text the prefix held (:func:`_typed_events`
#: turns it into ``EVENTS_TYPED``, the dataset's schema).
EVENTS = pa.schema([f.with_type(pa.string()) if f.name == "log_time" else f
                    for f in EVENTS_TYPED])


def _typed_events(t: pa.Table) -> pa.Table:
    """Built events in the dataset's schema: ``log_time`` parsed, its text kept if it fails."""
    i = t.schema.get_field_index("log_time")
    times, rest = timestamps.parse(pa.concat_arrays(t.column(i).chunks) if t.num_rows
                                   else pa.array([], pa.string()))
    t = t.set_column(i, EVENTS_TYPED.field(i), times)
    j = t.schema.get_field_index("log_time_text")
    return t.set_column(j, EVENTS_TYPED.field(j), rest)

#: Default block size (decompressed bytes); a block is analysed as one Arrow array. 4 MB
#: measured faster than 16 MB (cache) and keeps peak RSS low.
BLOCK_BYTES = 4 << 20
#: Worker threads analysing blocks (the machine has 2 cores).
THREADS = 2
#: At most this many consecutive natively scanned blocks have their other lines read by the
#: reference path in one call (:func:`analysed_block.finish_scanned`): the blocks already read,
#: so no more are held than without it.
GROUP_BLOCKS = 3


@dataclasses.dataclass(frozen=True)
class LogBatch:
    """Rows parsed from one block of a log.

    Fields:
        iterations: schema ``forensics.dataset.schema.ITERATIONS`` exactly.
        events: schema ``EVENTS`` exactly (a multi-line event may arrive in a later batch than
            its first line).
        unparsed: schema ``UNPARSED`` exactly.
        traceback_frames: schema ``TRACEBACK_FRAMES`` exactly (with the batch of their event).
    """

    iterations: pa.Table
    events: pa.Table
    unparsed: pa.Table
    traceback_frames: pa.Table = dataclasses.field(
        default_factory=TRACEBACK_FRAMES.empty_table)



def _events_table(n: int, cols: dict[str, pa.Array], source: str) -> pa.Table:
    arrays = []
    for f in EVENTS:
        if f.name == "source":
            arrays.append(repeated(source, n))
        elif f.name in cols:
            arrays.append(cols[f.name].cast(f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=EVENTS)


def _rows_table(rows: list[dict[str, Any] | Taken], source: str, ordered: bool = True
                ) -> pa.Table:
    """The scanner's event rows (dicts, and events it took as the compiled scan made them:
    :class:`~forensics.readers.native_events.Taken`) as one table, in their order (not
    ``ordered``: in any order, for a caller that sorts them by line)."""
    for r in rows:
        if isinstance(r, dict):
            r["source"] = source

    def made(taken: list[Taken]) -> tuple[pa.Table, np.ndarray]:
        n, cols = event_columns(taken)
        return _events_table(n, cols, source), np.ones(n, np.int64)

    t = in_order(rows, lambda d: pa.Table.from_pylist(d, schema=EVENTS), made, ordered)
    return EVENTS.empty_table() if t is None else t


def _assemble(b: Block, claimed: np.ndarray, rows: list[dict[str, Any] | Taken],
              extra_unparsed: list[tuple[int, str]], source: str) -> LogBatch:
    n = len(b.lines)
    line_no = pa.array(np.arange(b.first_line, b.first_line + n, dtype=np.int64))
    taken = b.is_iter | claimed
    logm = b.pre.has_logger & ~taken
    coll = b.is_collector & ~taken
    unp = ~(taken | logm | coll)
    parts = []
    if rows:   # sorted by line below when other parts come (no two rows share a line)
        parts.append(_rows_table(rows, source, ordered=not (logm.any() or coll.any())))
    if logm.any():
        sel = pa.array(logm)
        body_sel = pa.array(logm[~b.is_iter])
        kind = pa.array(np.where(b.pre.is_cpp[logm], event_kinds.CPP_LOG, event_kinds.LOG))
        ln = pc.filter(line_no, sel)
        parts.append(_events_table(len(ln), source=source, cols={
            "line": ln, "line_end": ln, "rank": pc.filter(b.rank, sel),
            "severity": pc.filter(b.pre.severity, sel), "kind": kind,
            "message": pc.filter(b.body, body_sel), "text": pc.filter(b.body, body_sel),
            "log_time": pc.filter(b.pre.log_time, sel),
            **{k: pc.filter(v, sel) for k, v in b.wrappers.items()}}))
    if coll.any():
        sel = pa.array(coll)
        ln = pc.filter(line_no, sel)
        text = pc.filter(b.body, pa.array(coll[~b.is_iter]))
        ts = pc.utf8_trim_whitespace(text)
        parts.append(_events_table(len(ln), source=source, cols={
            "line": ln, "line_end": ln, "kind": pa.repeat(
                pa.scalar(event_kinds.COLLECTOR_TIMESTAMP), len(ln)), "log_time": ts,
            "text": text, **{k: pc.filter(v, sel) for k, v in b.wrappers.items()}}))
    events = _by_line(parts) if len(parts) > 1 else parts[0] if parts else EVENTS.empty_table()
    sel = pa.array(unp)
    un = pa.Table.from_arrays([repeated(source, int(unp.sum())),
                               pc.filter(line_no, sel), pc.filter(b.lines, sel)],
                              schema=UNPARSED)
    if extra_unparsed:
        un = pa.concat_tables([un, _unparsed_rows(extra_unparsed, source)])
    if b.nul is not None and b.nul.any():
        at = np.flatnonzero(b.nul)
        events = pa.concat_tables([events, pa.Table.from_pylist([
            {"source": source, "line": b.first_line + int(i), "line_end": b.first_line + int(i),
             "kind": event_kinds.NUL_BYTES, "severity": "W",
             "message": f"{int(b.nul[i])} NUL bytes removed from this line (a log rotated "
                        "with copytruncate leaves a NUL-filled hole)"} for i in at],
            schema=EVENTS)])
    return LogBatch(iterations=b.iterations, events=_typed_events(events), unparsed=un)


def _by_line(parts: list[pa.Table]) -> pa.Table:
    """``parts`` (each in line order) as one table in line order (ties keep their part's
    order). Most event columns are null in every part: those are made, not taken (measured on
    the varied benchmark log: ~3 ms per 16 MB block to take all 43 columns, ~1.4 ms so)."""
    events = pa.concat_tables(parts)
    order = pa.array(np.argsort(np.concatenate(
        [p.column("line").to_numpy() for p in parts]), kind="stable"))
    n = events.num_rows
    return pa.Table.from_arrays(
        [pa.nulls(n, c.type) if c.null_count == n else c.take(order) for c in events.columns],
        schema=events.schema)


def _unparsed_rows(rows: list[tuple[int, str]], source: str) -> pa.Table:
    return pa.Table.from_arrays([repeated(source, len(rows)),
                                 pa.array([r[0] for r in rows], pa.int64()),
                                 pa.array([r[1] for r in rows], pa.string())], schema=UNPARSED)


def parse_executor_log(path: str | os.PathLike, source: str, *,
                       progress: Callable[[int], None] | None = None,
                       block_bytes: int = BLOCK_BYTES, threads: int = THREADS,
                       max_line_bytes: int = MAX_LINE_BYTES,
                       native: bool | None = None) -> Iterator[LogBatch]:
    """Stream a plain/.gz/.zst executor log in blocks; memory stays flat whatever its size.

    Args:
        path: the log file (compression sniffed from its first bytes).
        source: the name recorded in every row's ``source`` column.
        progress: called with the compressed (on-disk) bytes consumed since its last call, so a
            caller can drive a progress bar whose total is the file size.
        block_bytes: decompressed bytes per block.
        threads: worker threads for the vectorised stage (1 analyses in the caller's thread).
        max_line_bytes: a longer line becomes a ``long_line`` event holding its first
            ``max_line_bytes`` bytes (memory stays bounded whatever the line).
        native: read the common iteration lines with :mod:`native_scan` (same rows); None
            decides by the file's size and ``native_scan.PATH_ENV``.

    Yields:
        One :class:`LogBatch` per block, plus a last one for events still open at the end
        (and the ``input_truncated`` event of a truncated .gz/.zst).
    """
    if native is None:
        native = native_scan.enabled(sources.content_size(path))
    elif native:
        native = native_scan.kernel() is not None
    if native and block_bytes == BLOCK_BYTES:
        block_bytes = native_scan.BLOCK_BYTES
    scanner = Scanner(source)
    streams = Streams()
    next_line = 1
    pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None
    pending: deque[concurrent.futures.Future[Block | Scanned] | Block | Scanned | LongLine]\
        = deque()
    ready: deque[Block] = deque()   # blocks finished with an earlier one's group, next out
    error: str | None = None

    def placed(b: Block) -> Block:
        nonlocal next_line
        if next_line != 1:
            b.first_line = next_line
            if b.iterations.num_rows:
                i = b.iterations.schema.get_field_index("line")
                b.iterations = b.iterations.set_column(
                    i, ITERATIONS.field(i), pc.add(b.iterations.column(i), next_line - 1))
        next_line += len(b.lines)
        return b

    def analysed(item: concurrent.futures.Future[Block | Scanned] | Block | Scanned
                 ) -> Block | Scanned:
        return item.result() if isinstance(item, concurrent.futures.Future) else item

    def drain_one() -> LogBatch:
        if ready:
            return batch_of(ready.popleft())
        item = pending.popleft()
        if isinstance(item, LongLine):
            return long_line(item)
        got = analysed(item)
        if isinstance(got, Scanned):
            # the other lines of the scanned blocks queued behind it too, in one call
            group = [got]
            while len(group) < GROUP_BLOCKS and pending and not isinstance(pending[0], LongLine):
                nxt = analysed(pending[0])
                if not isinstance(nxt, Scanned):
                    break
                group.append(nxt)
                pending.popleft()
            got, *rest = finish_scanned(group, source, streams)
            ready.extend(rest)
        return batch_of(got)

    def batch_of(got: Block) -> LogBatch:
        b = placed(got)
        claimed = scanner.process(b)
        rows, extra = scanner.take_rows()
        return dataclasses.replace(_assemble(b, claimed, rows, extra, source),
                                   traceback_frames=scanner.take_frames())

    def long_line(item: LongLine) -> LogBatch:
        nonlocal next_line
        scanner.finish_all()   # a multi-line event cannot run through a line not read
        rows, extra = scanner.take_rows()
        text = item.head.replace(b"\0", b"").decode("utf-8", errors="replace")
        rows.append({"source": source, "line": next_line, "line_end": next_line,
                     "kind": event_kinds.LONG_LINE, "severity": "W", "text": text,
                     "message": f"line of {item.length} bytes; its first {len(item.head)} "
                                "bytes kept in text"})
        next_line += 1
        return LogBatch(iterations=ITERATIONS.empty_table(),
                        events=_typed_events(_rows_table(rows, source)),
                        unparsed=_unparsed_rows(extra, source) if extra
                        else UNPARSED.empty_table(), traceback_frames=scanner.take_frames())

    try:
        for block, consumed, err in blocks(path, block_bytes, max_line_bytes,
                                            buffers_kept=2 * THREADS + 4):
            if progress is not None and consumed:
                progress(consumed)
            if err is not None:
                error = err
                break
            if isinstance(block, LongLine):
                pending.append(block)
            elif not block:
                continue
            elif pool is not None:
                pending.append(pool.submit(analyse, block, source, streams, native))
            else:
                pending.append(analyse(block, source, streams, native))
            while len(pending) > (threads if pool is not None else 0):
                yield drain_one()
        while pending or ready:
            yield drain_one()
    finally:
        for item in pending:
            if isinstance(item, concurrent.futures.Future):
                item.cancel()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    scanner.finish_all()
    rows, extra = scanner.take_rows()
    if error is not None:
        log.warning("%s: %s", source, error)
        rows.append({"line": next_line, "line_end": next_line, "severity": "E",
                     "kind": getattr(error, "kind", event_kinds.INPUT_TRUNCATED),
                     "message": f"{error}; kept {next_line - 1} lines, the rest is lost"})
    frames = scanner.take_frames()
    if rows or extra or frames.num_rows:
        events = _typed_events(_rows_table(rows, source))
        yield LogBatch(iterations=ITERATIONS.empty_table(), events=events,
                       unparsed=_unparsed_rows(extra, source) if extra
                       else UNPARSED.empty_table(), traceback_frames=frames)
