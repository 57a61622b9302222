"""Streaming parser of TensorRT-LLM executor text logs into iterations / events / unparsed rows.

Why this shape: post-mortem logs run to gigabytes and are almost all iteration lines, so the
work per line must be vectorised. A log is read in blocks of whole lines; each block is turned
into an Arrow string array and pushed through RE2 kernels (``pyarrow.compute``) in a worker
thread (Arrow releases the GIL, so two blocks are analysed at once). Only the rare candidate
lines (tracebacks, banners, known messages; see :data:`log_events.CANDIDATE_PATTERN`) are
looked at in Python, in order, by a scanner whose open multi-line events carry over from one
block to the next. Memory holds a bounded number of blocks, whatever the input size.

Line accounting: every line (1-based, of the decompressed text; a final line without newline
counts; a trailing ``\\r`` is dropped as part of the line end) is exactly one of: the ``line`` of
an ``iterations`` row, the ``line`` of a single-line event, inside ``line``..``line_end`` of one
multi-line event, or an ``unparsed`` row (verbatim, invalid UTF-8 replaced).
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

from forensics.dataset.schema import EVENTS, ITERATIONS, UNPARSED
from forensics.ingest import (
    event_kinds,
    iteration_line,
    line_prefix,
    log_events,
    sources,
)
from forensics.ingest.traceback_event import Traceback
from forensics.ingest.traceback_event import opens as traceback_opens

log = logging.getLogger(__name__)

#: An iteration line: any wrappers, then the body starts with its ``iter`` field.
ITERATION_MATCH = line_prefix.PREFIX_MATCH + iteration_line.ITERATION_LINE[1:]

#: Default block size (decompressed bytes); a block is analysed as one Arrow array. 4 MB
#: measured faster than 16 MB (cache) and keeps peak RSS low.
BLOCK_BYTES = 4 << 20
#: Compressed bytes read per decompression step.
READ_BYTES = 1 << 20
#: Worker threads analysing blocks (the machine has 2 cores).
THREADS = 2


@dataclasses.dataclass(frozen=True)
class LogBatch:
    """Rows parsed from one block of a log.

    Fields:
        iterations: schema ``forensics.dataset.schema.ITERATIONS`` exactly.
        events: schema ``EVENTS`` exactly (a multi-line event may arrive in a later batch than
            its first line).
        unparsed: schema ``UNPARSED`` exactly.
    """

    iterations: pa.Table
    events: pa.Table
    unparsed: pa.Table


# --------------------------------------------------------------------------- reading

def _decompressed(path: str | os.PathLike, read_bytes: int = READ_BYTES
                  ) -> Iterator[tuple[bytes, int, str | None]]:
    """Yield (decompressed bytes, compressed bytes consumed, error or None) of ``path``
    (:func:`sources.decompressed_chunks`: offsets for progress, truncation detected)."""
    comp = sources.compression_of(path)
    with sources.open_raw(path) as raw:
        yield from sources.decompressed_chunks(raw, comp, read_bytes)


def _plain_blocks(path: str | os.PathLike, block_bytes: int
                  ) -> Iterator[tuple[bytearray, int, str | None]]:
    """:func:`_blocks` of an uncompressed file: the same blocks (the same reads of
    ``min(READ_BYTES, block_bytes)`` bytes, cut at the same newlines), each read straight into
    its own buffer instead of being appended and copied out (two copies of every byte less)."""
    step = min(READ_BYTES, block_bytes)
    carry = bytearray()
    consumed = 0
    with sources.open_raw(path) as raw:
        while True:
            c = len(carry)
            want = max(1, -(-(block_bytes - c) // step)) * step   # reads until a cut can happen
            buf = bytearray(c + want)
            buf[:c] = carry
            with memoryview(buf) as view, view[c:] as free:
                n = raw.readinto(free)
            consumed += n
            if n < want:
                del buf[c + n:]
            k = buf.rfind(b"\n") if len(buf) >= block_bytes else -1
            if k >= 0:
                carry = buf[k + 1:]
                del buf[k + 1:]
                yield buf, consumed, None
                consumed = 0
            else:
                carry = buf
            if n < want:   # end of file
                if carry or consumed:
                    yield carry, consumed, None
                return


def _blocks(path: str | os.PathLike, block_bytes: int
            ) -> Iterator[tuple[bytes | bytearray, int, str | None]]:
    """Yield (whole lines, compressed bytes consumed, error); the last block may lack a newline."""
    if sources.compression_of(path) is None:
        yield from _plain_blocks(path, block_bytes)
        return
    buf = bytearray()
    consumed = 0
    for data, n, err in _decompressed(path, min(READ_BYTES, block_bytes)):
        buf += data
        consumed += n
        if err is not None:
            if buf:
                yield bytes(buf), consumed, None
            yield b"", 0, err
            return
        if len(buf) >= block_bytes:
            k = buf.rfind(b"\n")
            if k >= 0:
                yield bytes(memoryview(buf)[:k + 1]), consumed, None
                del buf[:k + 1]
                consumed = 0
    if buf or consumed:
        yield bytes(buf), consumed, None


def _lines(block: bytes | bytearray) -> pa.Array:
    """The block's lines as an Arrow string array (newlines removed, invalid UTF-8 replaced)."""
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            block = block.decode("utf-8", errors="replace").encode("utf-8")
    if not block:
        return pa.array([], pa.string())
    # one split kernel over the block as a single string (3x faster than finding the newlines
    # with numpy and rebuilding offsets)
    whole = pa.LargeStringArray.from_buffers(
        1, pa.py_buffer(np.array([0, len(block)], dtype=np.int64)), pa.py_buffer(block))
    arr = pc.split_pattern(whole, "\n").values
    if block.endswith(b"\n"):
        arr = arr.slice(0, len(arr) - 1)
    arr = arr.cast(pa.string())
    if b"\r" in block:
        arr = pc.replace_substring_regex(arr, r"\r$", "")
    return arr


# --------------------------------------------------------------------------- vectorised stage

@dataclasses.dataclass
class _Block:
    """A block after the vectorised stage (arrays of the block's length unless noted)."""

    first_line: int
    lines: pa.Array
    pre: line_prefix.Prefixes
    is_iter: np.ndarray
    body: pa.Array              # bodies of the non-iteration lines only (see body_index)
    body_index: np.ndarray      # line index -> index into body (valid for non-iteration lines)
    is_cand: np.ndarray
    is_collector: np.ndarray
    stream: np.ndarray          # launcher rank, -1 without a launcher prefix
    rank: pa.Array              # logger rank, else launcher rank
    rank_ffill: pa.Array        # last rank seen at or before each line (null before any)
    iterations: pa.Table

    def body_at(self, i: int) -> str:
        return self.body[int(self.body_index[i])].as_py()


def _mask(a: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False), dtype=bool)


def _analyse(block: bytes | bytearray, source: str, layouts: iteration_line.Layouts) -> _Block:
    """The per-block vectorised work (runs in a worker thread).

    Its line numbers are not known yet (earlier blocks may still be in other threads), so
    they start at 1 and the caller moves the block into place (``placed`` in
    :func:`parse_executor_log`; counting lines in the reading thread cost it 1 ms per block).
    """
    first_line = 1
    lines = _lines(block)
    n = len(lines)
    pre = line_prefix.strip(lines)
    is_iter = iteration_line.starts_iteration(lines, pre.body_offset)
    rest = pre.body_offset < 0
    if rest.any():   # prefixes the fast path did not read: the regex
        idx = np.flatnonzero(rest)
        is_iter[idx] = _mask(pc.match_substring_regex(lines.take(pa.array(idx)),
                                                      ITERATION_MATCH))
    other = ~is_iter
    other_lines = pc.filter(lines, pa.array(other)) if is_iter.any() else lines
    body = line_prefix.bodies(other_lines)
    body_index = np.cumsum(other) - 1
    is_cand = np.zeros(n, dtype=bool)
    is_cand[other] = _mask(pc.match_substring_regex(body, log_events.CANDIDATE_PATTERN))
    is_collector = np.zeros(n, dtype=bool)
    is_collector[other] = _mask(pc.match_substring_regex(
        body, line_prefix.COLLECTOR_TIMESTAMP_LINE))
    is_collector &= ~pre.has_logger & ~is_cand
    stream = pc.fill_null(pre.launcher_rank, -1).to_numpy()
    rank = pc.coalesce(pre.logger_rank, pre.launcher_rank)
    if is_iter.any():
        line_no = pa.array(np.arange(first_line, first_line + n, dtype=np.int64))
        sel = pa.array(is_iter)
        it_lines = pc.filter(lines, sel)
        it_no, it_rank, it_time = (pc.filter(line_no, sel), pc.filter(rank, sel),
                                   pc.filter(pre.log_time, sel))
        iters = layouts.parse(it_lines, source=source, line=it_no, rank=it_rank,
                              log_time=it_time)
    else:
        iters = ITERATIONS.empty_table()
    return _Block(first_line=first_line, lines=lines, pre=pre, is_iter=is_iter, body=body,
                  body_index=body_index, is_cand=is_cand, is_collector=is_collector,
                  stream=stream, rank=rank, rank_ffill=pc.fill_null_forward(rank),
                  iterations=iters)


# --------------------------------------------------------------------------- sequential stage

class _Scanner:
    """Claims candidate lines in order; keeps open multi-line events per launcher stream."""

    def __init__(self, source: str):
        self.source = source
        self.open: dict[int, Any] = {}
        self.last_rank: int | None = None
        self.events: list[dict[str, Any]] = []
        self.unparsed: list[tuple[int, str]] = []

    def _finish(self, stream: int, ev: Any) -> None:
        self.open.pop(stream, None)
        if ev.is_fragment:
            self.unparsed.append((ev.lines[0], ev.raw_first))
        else:
            self.events.extend(ev.events())

    def finish_all(self) -> None:
        for s, ev in sorted(self.open.items()):
            self._finish(s, ev)

    def process(self, b: _Block) -> np.ndarray:
        """Scan one block; returns the mask of lines claimed here."""
        n = len(b.lines)
        claimed = np.zeros(n, dtype=bool)
        positions: dict[int, np.ndarray] = {}
        has_logger = b.pre.has_logger

        def scan(s: int, ev: Any, after: int) -> None:
            pos = positions.get(s)
            if pos is None:
                pos = positions[s] = np.flatnonzero(b.stream == s)
            for j in pos[np.searchsorted(pos, after, side="right"):]:
                if b.is_iter[j]:
                    self._finish(s, ev)
                    return
                body = b.body_at(j)
                if not ev.accepts(body, bool(has_logger[j])):
                    self._finish(s, ev)
                    return
                ev.add(b.first_line + j, body)
                claimed[j] = True
                if ev.done:
                    self._finish(s, ev)
                    return
            self.open[s] = ev

        for s, ev in sorted(self.open.items()):
            scan(s, ev, -1)
        cand = np.flatnonzero(b.is_cand)
        if len(cand):
            launcher = b.pre.launcher_rank
            for i in cand:
                if claimed[i]:
                    continue
                body = b.body_at(i)
                row = log_events.match_single(body)
                if row is not None:
                    self.events.append(self._single(b, int(i), row))
                    claimed[i] = True
                    continue
                if has_logger[i]:
                    continue
                s = int(b.stream[i])
                if s in self.open:
                    self._finish(s, self.open[s])
                rank = launcher[i].as_py()
                if rank is None:
                    rank = b.rank_ffill[i].as_py()
                    if rank is None:
                        rank = self.last_rank
                raw = b.lines[i].as_py()
                line = b.first_line + int(i)
                how = traceback_opens(body)
                if how is not None:
                    ev: Any = Traceback(line, body, how, rank, raw)
                elif log_events.MPI_DASHES.match(body) or log_events.MPI_ABORT_LINE.match(body):
                    ev = log_events.MpiAbortBanner(line, body, rank, raw)
                elif log_events.CPP_FRAME.match(body):
                    ev = log_events.CppBacktrace(line, body, rank, raw)
                else:
                    continue
                claimed[i] = True
                scan(s, ev, int(i))
        if n:
            last = b.rank_ffill[n - 1].as_py()
            if last is not None:
                self.last_rank = last
        return claimed

    def _single(self, b: _Block, i: int, row: dict[str, Any]) -> dict[str, Any]:
        rank = b.rank[i].as_py()
        msg_rank = row.pop("msg_rank", None)
        default_sev = row.pop("default_severity", None)
        sev = b.pre.severity[i].as_py() or default_sev
        line = b.first_line + i
        return {**row, "line": line, "line_end": line,
                "rank": rank if rank is not None else msg_rank, "severity": sev,
                "log_time": b.pre.log_time[i].as_py()}

    def take_rows(self) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
        ev, un = self.events, self.unparsed
        self.events, self.unparsed = [], []
        return ev, un


# --------------------------------------------------------------------------- assembling

def _events_table(n: int, source: str, cols: dict[str, pa.Array]) -> pa.Table:
    arrays = []
    for f in EVENTS:
        if f.name == "source":
            arrays.append(pa.repeat(pa.scalar(source, pa.string()), n))
        elif f.name in cols:
            arrays.append(cols[f.name].cast(f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=EVENTS)


def _assemble(b: _Block, claimed: np.ndarray, rows: list[dict[str, Any]],
              extra_unparsed: list[tuple[int, str]], source: str) -> LogBatch:
    n = len(b.lines)
    line_no = pa.array(np.arange(b.first_line, b.first_line + n, dtype=np.int64))
    taken = b.is_iter | claimed
    logm = b.pre.has_logger & ~taken
    coll = b.is_collector & ~taken
    unp = ~(taken | logm | coll)
    parts = []
    if rows:
        for r in rows:
            r["source"] = source
        parts.append(pa.Table.from_pylist(rows, schema=EVENTS))
    if logm.any():
        sel = pa.array(logm)
        body_sel = pa.array(logm[~b.is_iter])
        kind = pa.array(np.where(b.pre.is_cpp[logm], event_kinds.CPP_LOG, event_kinds.LOG))
        ln = pc.filter(line_no, sel)
        parts.append(_events_table(len(ln), source, {
            "line": ln, "line_end": ln, "rank": pc.filter(b.rank, sel),
            "severity": pc.filter(b.pre.severity, sel), "kind": kind,
            "message": pc.filter(b.body, body_sel), "log_time": pc.filter(b.pre.log_time, sel)}))
    if coll.any():
        sel = pa.array(coll)
        ln = pc.filter(line_no, sel)
        ts = pc.utf8_trim_whitespace(pc.filter(b.body, pa.array(coll[~b.is_iter])))
        parts.append(_events_table(len(ln), source, {
            "line": ln, "line_end": ln, "kind": pa.repeat(
                pa.scalar(event_kinds.COLLECTOR_TIMESTAMP), len(ln)), "log_time": ts}))
    events = pa.concat_tables(parts) if parts else EVENTS.empty_table()
    if len(parts) > 1:
        events = events.take(pc.sort_indices(events, [("line", "ascending")]))
    sel = pa.array(unp)
    un = pa.Table.from_arrays([pa.repeat(pa.scalar(source, pa.string()), int(unp.sum())),
                               pc.filter(line_no, sel), pc.filter(b.lines, sel)],
                              schema=UNPARSED)
    if extra_unparsed:
        un = pa.concat_tables([un, _unparsed_rows(extra_unparsed, source)])
    return LogBatch(iterations=b.iterations, events=events, unparsed=un)


def _unparsed_rows(rows: list[tuple[int, str]], source: str) -> pa.Table:
    return pa.Table.from_arrays([pa.array([source] * len(rows), pa.string()),
                                 pa.array([r[0] for r in rows], pa.int64()),
                                 pa.array([r[1] for r in rows], pa.string())], schema=UNPARSED)


def parse_executor_log(path: str | os.PathLike, source: str, *,
                       progress: Callable[[int], None] | None = None,
                       block_bytes: int = BLOCK_BYTES, threads: int = THREADS
                       ) -> Iterator[LogBatch]:
    """Stream a plain/.gz/.zst executor log in blocks; memory stays flat whatever its size.

    Args:
        path: the log file (compression sniffed from its first bytes).
        source: the name recorded in every row's ``source`` column.
        progress: called with the compressed (on-disk) bytes consumed since its last call, so a
            caller can drive a progress bar whose total is the file size.
        block_bytes: decompressed bytes per block.
        threads: worker threads for the vectorised stage (1 analyses in the caller's thread).

    Yields:
        One :class:`LogBatch` per block, plus a last one for events still open at the end
        (and the ``input_truncated`` event of a truncated .gz/.zst).
    """
    scanner = _Scanner(source)
    layouts = iteration_line.Layouts()
    next_line = 1
    pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None
    pending: deque[concurrent.futures.Future[_Block] | _Block] = deque()
    error: str | None = None

    def placed(b: _Block) -> _Block:
        nonlocal next_line
        if next_line != 1:
            b.first_line = next_line
            if b.iterations.num_rows:
                i = b.iterations.schema.get_field_index("line")
                b.iterations = b.iterations.set_column(
                    i, ITERATIONS.field(i), pc.add(b.iterations.column(i), next_line - 1))
        next_line += len(b.lines)
        return b

    def drain_one() -> LogBatch:
        item = pending.popleft()
        b = placed(item.result() if isinstance(item, concurrent.futures.Future) else item)
        claimed = scanner.process(b)
        rows, extra = scanner.take_rows()
        return _assemble(b, claimed, rows, extra, source)

    try:
        for block, consumed, err in _blocks(path, block_bytes):
            if progress is not None and consumed:
                progress(consumed)
            if err is not None:
                error = err
                break
            if not block:
                continue
            if pool is not None:
                pending.append(pool.submit(_analyse, block, source, layouts))
            else:
                pending.append(_analyse(block, source, layouts))
            while len(pending) > (threads if pool is not None else 0):
                yield drain_one()
        while pending:
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
    if rows or extra:
        for r in rows:
            r["source"] = source
        events = pa.Table.from_pylist(rows, schema=EVENTS) if rows else EVENTS.empty_table()
        yield LogBatch(iterations=ITERATIONS.empty_table(), events=events,
                       unparsed=_unparsed_rows(extra, source) if extra
                       else UNPARSED.empty_table())
