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
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import EVENTS as EVENTS_TYPED
from forensics.dataset.schema import ITERATIONS, TRACEBACK_FRAMES, UNPARSED
from forensics.readers import (
    event_kinds,
    iteration_line,
    line_prefix,
    log_events,
    native_scan,
    sources,
    timestamps,
)
from forensics.readers.traceback_event import Traceback
from forensics.readers.traceback_event import opens as traceback_opens

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

#: An iteration line: any wrappers, then the body starts with its ``iter`` field.
ITERATION_MATCH = line_prefix.PREFIX_MATCH + r"[ \t]*" + iteration_line.ITERATION_LINE[1:]

#: Default block size (decompressed bytes); a block is analysed as one Arrow array. 4 MB
#: measured faster than 16 MB (cache) and keeps peak RSS low.
BLOCK_BYTES = 4 << 20
#: Compressed bytes read per decompression step.
READ_BYTES = 1 << 20
#: Worker threads analysing blocks (the machine has 2 cores).
THREADS = 2
#: At most this many consecutive natively scanned blocks have their other lines read by the
#: reference path in one call (:func:`_finish_scanned`): the blocks already read, so no more
#: are held than without it.
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


# --------------------------------------------------------------------------- reading

def _decompressed(path: str | os.PathLike, read_bytes: int = READ_BYTES
                  ) -> Iterator[tuple[bytes, int, str | None]]:
    """Yield (decompressed bytes, compressed bytes consumed, error or None) of ``path``
    (:func:`sources.decompressed_chunks`: offsets for progress, truncation detected)."""
    comp = sources.compression_of(path)
    with sources.open_raw(path) as raw:
        yield from sources.decompressed_chunks(raw, comp, read_bytes)


#: A line longer than this is not held whole: its first bytes are kept (event ``long_line``)
#: and the rest is read past, so memory stays bounded and time linear whatever the line.
MAX_LINE_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class LongLine:
    """One line longer than the limit: its first bytes and its full length in bytes."""

    head: bytes
    length: int


def _skip_rest(first: bytes | bytearray | memoryview,
               chunks: Iterator[tuple[bytes | bytearray, int, str | None]], max_line: int
               ) -> tuple[LongLine, bytes, int, str | None, bool]:
    """Read past the rest of a long line whose bytes so far are ``first`` (no newline in them).

    Returns (the line, the bytes after its newline, bytes consumed, error, end of input)."""
    head = bytes(first[:max_line])
    length = len(first)
    consumed = 0
    for data, n, err in chunks:
        consumed += n
        j = data.find(b"\n")
        stop = j if j >= 0 else len(data)
        if len(head) < max_line:
            head += bytes(data[:min(stop, max_line - len(head))])
        length += stop
        if j >= 0:
            return LongLine(head, length), bytes(data[j + 1:]), consumed, err, False
        if err is not None:
            return LongLine(head, length), b"", consumed, err, True
    return LongLine(head, length), b"", consumed, None, True


def _split_long(block: bytes | bytearray, max_line: int
                ) -> Iterator[bytes | bytearray | LongLine]:
    """``block`` (whole lines) with every line longer than ``max_line`` cut out as a
    :class:`LongLine`. One ``rfind`` per ``max_line`` bytes: free for ordinary blocks, which
    come back as they are (not copied)."""
    if len(block) <= max_line:
        yield block
        return
    start = pos = 0
    n = len(block)
    while pos < n:
        if n - pos <= max_line:   # no line of the rest is long (a last one may lack "\n")
            break
        j = block.rfind(b"\n", pos, pos + max_line + 1)
        if j >= 0:
            pos = j + 1
            continue
        end = block.find(b"\n", pos)
        end = n if end < 0 else end
        if pos > start:
            yield block[start:pos]
        yield LongLine(bytes(block[pos:pos + max_line]), end - pos)
        start = pos = end + 1
    if start == 0:
        yield block
    elif start < n:
        yield block[start:]


def _file_chunks(raw: Any, step: int) -> Iterator[tuple[bytes, int, None]]:
    while data := raw.read(step):
        yield data, len(data), None


class _Buffers:
    """Block buffers handed out again once nothing but this pool refers to them.

    A fresh 16 MB ``bytearray`` per block is zeroed and then faulted in page by page; measured
    on a 538 MB log: 0.30 s system CPU to read it that way, ~0.1 s with the buffers reused. A
    buffer is reused only when its reference count says the pool holds the last reference (a
    worker's numpy or Arrow view of it holds one too), so no block is ever overwritten while
    anything can still read it; when every pooled buffer is busy a new one is made.
    """

    def __init__(self, keep: int, max_size: int):
        self.keep = keep
        self.max_size = max_size
        self.pool: list[bytearray] = []

    def get(self, size: int) -> bytearray:
        if size <= self.max_size:
            for buf in self.pool:
                # references: the pool's list, ``buf`` here, and getrefcount's argument
                if sys.getrefcount(buf) == 3:
                    if len(buf) < size:
                        buf.extend(bytes(size - len(buf)))
                    else:
                        del buf[size:]
                    return buf
        buf = bytearray(size)
        if size <= self.max_size and len(self.pool) < self.keep:
            self.pool.append(buf)
        return buf


def _plain_blocks(path: str | os.PathLike, block_bytes: int, max_line: int = MAX_LINE_BYTES
                  ) -> Iterator[tuple[bytearray | LongLine, int, str | None]]:
    """:func:`_blocks` of an uncompressed file: the same blocks (the same reads of
    ``min(READ_BYTES, block_bytes)`` bytes, cut at the same newlines), each read straight into
    its own buffer instead of being appended and copied out (two copies of every byte less).

    Each byte is searched for a newline once (the carry's last newline is remembered), so a
    line that spans many reads costs linear time; past ``max_line`` it is skipped through."""
    step = min(READ_BYTES, block_bytes)
    carry = bytearray()
    carry_nl = -1          # index of the carry's last newline, -1 if it has none
    consumed = 0
    buffers = _Buffers(keep=2 * THREADS + 4, max_size=block_bytes + 2 * step)
    with sources.open_raw(path) as raw:
        while True:
            c = len(carry)
            want = max(1, -(-(block_bytes - c) // step)) * step   # reads until a cut can happen
            if c >= block_bytes:   # a line longer than a block: grow geometrically (linear)
                want = -(-c // step) * step
            buf = buffers.get(c + want)
            buf[:c] = carry
            with memoryview(buf) as view, view[c:] as free:
                n = raw.readinto(free)
            consumed += n
            if n < want:
                del buf[c + n:]
            k = buf.rfind(b"\n", c)
            if k < 0:
                k = carry_nl
            if len(buf) - (k + 1) > max_line:
                if k >= 0:
                    for part in _split_long(buf[:k + 1], max_line):
                        yield part, consumed, None
                        consumed = 0
                with memoryview(buf) as view, view[k + 1:] as rest_of_line:
                    long, rest, used, _err, eof = _skip_rest(
                        rest_of_line, _file_chunks(raw, step) if n == want else iter(()),
                        max_line)
                yield long, consumed + used, None
                consumed = 0
                carry = bytearray(rest)
                carry_nl = carry.rfind(b"\n")
                if eof:
                    if carry:
                        yield from ((part, 0, None) for part in _split_long(carry, max_line))
                    return
                continue
            if len(buf) >= block_bytes and k >= 0:
                carry = buf[k + 1:]
                carry_nl = -1
                del buf[k + 1:]
                for part in _split_long(buf, max_line):
                    yield part, consumed, None
                    consumed = 0
            else:
                carry = buf
                carry_nl = k
            if n < want:   # end of file
                if carry or consumed:
                    for part in _split_long(carry, max_line):
                        yield part, consumed, None
                        consumed = 0
                    if consumed:
                        yield b"", consumed, None
                return


def _blocks(path: str | os.PathLike, block_bytes: int, max_line: int = MAX_LINE_BYTES
            ) -> Iterator[tuple[bytes | bytearray | LongLine, int, str | None]]:
    """Yield (whole lines, compressed bytes consumed, error); the last block may lack a
    newline. A line longer than ``max_line`` comes alone, as a :class:`LongLine`."""
    if sources.compression_of(path) is None:
        yield from _plain_blocks(path, block_bytes, max_line)
        return
    buf = bytearray()
    last_nl = -1           # index of buf's last newline, -1 if it has none
    consumed = 0
    chunks = _decompressed(path, min(READ_BYTES, block_bytes))
    for data, n, err in chunks:
        scanned = len(buf)
        buf += data
        consumed += n
        k = buf.rfind(b"\n", scanned)
        if k >= 0:
            last_nl = k
        if err is not None:
            if buf:
                for part in _split_long(bytes(buf), max_line):
                    yield part, consumed, None
                    consumed = 0
            yield b"", 0, err
            return
        if len(buf) - (last_nl + 1) > max_line:
            if last_nl >= 0:
                for part in _split_long(bytes(memoryview(buf)[:last_nl + 1]), max_line):
                    yield part, consumed, None
                    consumed = 0
            long, rest, used, err, eof = _skip_rest(memoryview(buf)[last_nl + 1:], chunks,
                                                    max_line)
            yield long, consumed + used, None
            consumed = 0
            buf = bytearray(rest)
            last_nl = buf.rfind(b"\n")
            if err is not None:
                if buf:
                    yield from ((part, 0, None) for part in _split_long(bytes(buf), max_line))
                yield b"", 0, err
                return
            if eof:
                break
            continue
        if len(buf) >= block_bytes and last_nl >= 0:
            for part in _split_long(bytes(memoryview(buf)[:last_nl + 1]), max_line):
                yield part, consumed, None
                consumed = 0
            del buf[:last_nl + 1]
            last_nl = -1
    if buf or consumed:
        for part in _split_long(bytes(buf), max_line):
            yield part, consumed, None
            consumed = 0
        if consumed:
            yield b"", consumed, None


def _lines(block: bytes | bytearray) -> tuple[pa.Array, np.ndarray | None]:
    """The block's lines as an Arrow string array (newlines removed, invalid UTF-8 replaced,
    NUL bytes removed) and, when the block held NULs, the count removed per line.

    NUL runs are what ``logrotate copytruncate`` leaves where the file was cut while the
    logger kept its offset: no text, so removed (and reported, event ``nul_bytes``)."""
    arr = _split_lines(block)
    if b"\0" not in block:
        return arr, None
    nul = pc.count_substring(arr, "\0").to_numpy(zero_copy_only=False)
    return pc.replace_substring(arr, "\0", ""), nul


def _split_lines(block: bytes | bytearray) -> pa.Array:
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
    nul: np.ndarray | None = None   # NUL bytes removed per line, None when the block had none
    wrappers: dict[str, pa.Array] = dataclasses.field(default_factory=dict)  # WRAPPER_FIELDS
    wrap_head: np.ndarray | None = None  # logger lines that may wrap onto the next lines

    # Python copies of what the sequential stage reads line by line, made once per block on
    # first use (an Arrow scalar per line cost the tracebacks of a log most of that stage):
    # the non-iteration lines' bodies and raw text, and whether any wrapper is set.
    _bodies: list[str] | None = dataclasses.field(default=None, repr=False)
    _raws: list[str] | None = dataclasses.field(default=None, repr=False)
    _no_wrappers: bool | None = dataclasses.field(default=None, repr=False)

    def wrappers_at(self, i: int) -> dict[str, Any]:
        if self._no_wrappers is None:
            self._no_wrappers = all(v.null_count == len(v) for v in self.wrappers.values())
        if self._no_wrappers:
            return dict.fromkeys(self.wrappers)
        return {k: v[i].as_py() for k, v in self.wrappers.items()}

    def body_at(self, i: int) -> str:
        """The body of non-iteration line ``i``."""
        if self._bodies is None:
            self._bodies = self.body.to_pylist()
        return self._bodies[self.body_index[i]]

    def raw_at(self, i: int) -> str:
        """The text of non-iteration line ``i`` as read (wrappers included)."""
        if self._raws is None:
            self._raws = (pc.filter(self.lines, pa.array(~self.is_iter)) if self.is_iter.any()
                          else self.lines).to_pylist()
        return self._raws[self.body_index[i]]


def _mask(a: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False), dtype=bool)


class _Streams:
    """Stream ids of pdsh hosts (``host`` or ``host`` + launcher rank), shared by the worker
    threads of one parse so that a host keeps its id from block to block. Launcher ranks are
    streams 0, 1, ...; lines without a launcher are stream -1; hosts take -2, -3, ..."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def of(self, keys: list[str]) -> list[int]:
        with self._lock:
            return [self._ids.setdefault(k, -2 - len(self._ids)) for k in keys]


def _wrapper_columns(pre: line_prefix.Prefixes, lines: pa.Array, docker_time: pa.Array | None,
                     is_collector: np.ndarray) -> dict[str, pa.Array]:
    """collector / collector_time / host per line: the prefixes' wrappers, Docker records, and
    the time of a collector timestamp line for the line just after it."""
    collector, ctime = pre.collector, pre.collector_time
    if docker_time is not None:
        is_docker = pc.is_valid(docker_time)
        collector = pc.if_else(is_docker, pc.binary_join_element_wise(
            "docker", pc.fill_null(collector, ""), "+"), collector)
        collector = pc.utf8_rtrim(collector, characters="+")
        ctime = pc.if_else(is_docker, pc.if_else(pc.equal(docker_time, ""), ctime, docker_time),
                           ctime)
    if is_collector.any():
        after = np.flatnonzero(is_collector[:-1]) + 1
        stamp = pc.utf8_trim(pc.replace_substring_regex(lines, r"^(?:> ?)*", ""),
                             characters=" \t")
        prev = np.arange(len(lines)) - 1
        use = np.zeros(len(lines), dtype=bool)
        use[after] = True
        use &= ~is_collector
        shifted = stamp.take(pa.array(np.maximum(prev, 0)))
        ctime = pc.coalesce(ctime, pc.if_else(pa.array(use), shifted, pa.scalar(None, pa.string())))
        collector = pc.if_else(pa.array(is_collector), pc.coalesce(collector, pa.scalar("tab")),
                               collector)
    return {"collector": collector, "collector_time": ctime, "host": pre.host}


@dataclasses.dataclass
class _Features:
    """What the reference path reads from each line on its own (no neighbour involved), for
    a subset of a block's lines: so lines the native scanner took need none of it."""

    pre: line_prefix.Prefixes
    is_iter: np.ndarray
    body: pa.Array              # bodies of the non-iteration lines only
    is_cand: np.ndarray         # before the wrapping logger lines are added
    is_collector: np.ndarray
    body_lead: np.ndarray       # body starts with white space then text
    iterations: pa.Table        # wrapper columns still null


def _features(lines: pa.Array, line_no: pa.Array, source: str,
              layouts: iteration_line.Layouts,
              known: line_prefix.Known | None = None) -> _Features:
    """The reference path's per-line work over ``lines`` (their numbers ``line_no``);
    ``known``: the prefixes a compiled scan already read (the same values, fewer patterns)."""
    n = len(lines)
    pre = line_prefix.strip(lines, known)
    is_iter = iteration_line.starts_iteration(lines, pre.body_offset)
    rest = pre.body_offset < 0
    if rest.any():   # prefixes the fast path did not read: the regex
        idx = np.flatnonzero(rest)
        is_iter[idx] = _mask(pc.match_substring_regex(lines.take(pa.array(idx)),
                                                      ITERATION_MATCH))
    other = ~is_iter
    other_lines = pc.filter(lines, pa.array(other)) if is_iter.any() else lines
    body = line_prefix.bodies(other_lines, None if known is None else
                              known.take(other) if is_iter.any() else known)
    is_cand = np.zeros(n, dtype=bool)
    is_cand[other] = _mask(pc.match_substring_regex(body, log_events.CANDIDATE_PATTERN))
    is_collector = np.zeros(n, dtype=bool)
    is_collector[other] = _mask(pc.match_substring_regex(
        other_lines, line_prefix.COLLECTOR_TIMESTAMP_LINE))
    is_collector &= ~pre.has_logger & ~is_cand
    body_lead = np.zeros(n, dtype=bool)
    body_lead[other] = _mask(pc.match_substring_regex(body, r"^\s+\S"))
    if is_iter.any():
        rank = pc.coalesce(pre.logger_rank, pre.launcher_rank)
        sel = pa.array(is_iter)
        iters = layouts.parse(pc.filter(lines, sel), source=source,
                              line=pc.filter(line_no, sel), rank=pc.filter(rank, sel),
                              log_time=pc.filter(pre.log_time, sel))
    else:
        iters = ITERATIONS.empty_table()
    return _Features(pre=pre, is_iter=is_iter, body=body, is_cand=is_cand,
                     is_collector=is_collector, body_lead=body_lead, iterations=iters)


def _finish(lines: pa.Array, f: _Features, nul: np.ndarray | None,
            docker_time: pa.Array | None, streams: _Streams | None) -> _Block:
    """The block from its lines' features: the work that looks at neighbouring lines
    (wrapping, collector times, the last rank seen) and the wrapper columns."""
    n = len(lines)
    pre, is_iter, is_cand = f.pre, f.is_iter, f.is_cand.copy()
    is_collector = f.is_collector
    # a logger line followed by an indented line without prefix may have wrapped onto it: the
    # scanner looks (and at a block's last line, which may wrap into the next block)
    may_continue = f.body_lead & ~pre.has_logger & ~is_collector
    wrap_head = pre.has_logger & ~is_iter
    if n:
        wrap_head[:-1] &= may_continue[1:]
    is_cand |= wrap_head
    stream = pc.fill_null(pre.launcher_rank, -1).to_numpy()
    if pre.host.null_count < n:   # pdsh: one stream per host (and launcher rank)
        key = pc.binary_join_element_wise(
            pre.host, pc.fill_null(pc.cast(pre.launcher_rank, pa.string()), ""), ":")
        uniq = pc.unique(pc.drop_null(key))
        ids = np.array((streams or _Streams()).of(uniq.to_pylist()), dtype=np.int64)
        at = pc.index_in(key, value_set=uniq)
        has = pc.is_valid(at).to_numpy(zero_copy_only=False)
        stream = stream.astype(np.int64)
        stream[has] = ids[pc.fill_null(at, 0).to_numpy()[has]]
    wrappers = _wrapper_columns(pre, lines, docker_time, is_collector)
    rank = pc.coalesce(pre.logger_rank, pre.launcher_rank)
    iters = f.iterations
    if iters.num_rows and any(w.null_count < n for w in wrappers.values()):
        sel = pa.array(is_iter)
        for name, values in wrappers.items():
            i = iters.schema.get_field_index(name)
            iters = iters.set_column(i, iters.schema.field(i), pc.filter(values, sel))
    return _Block(first_line=1, lines=lines, pre=pre, is_iter=is_iter, body=f.body,
                  body_index=np.cumsum(~is_iter) - 1, is_cand=is_cand,
                  is_collector=is_collector, stream=stream, rank=rank,
                  rank_ffill=pc.fill_null_forward(rank), iterations=iters, nul=nul,
                  wrappers=wrappers, wrap_head=wrap_head)


def _analyse(block: bytes | bytearray, source: str, layouts: iteration_line.Layouts,
             streams: _Streams | None = None, native: bool = False) -> "_Block | _Scanned":
    """The per-block vectorised work (runs in a worker thread).

    Its line numbers are not known yet (earlier blocks may still be in other threads), so
    they start at 1 and the caller moves the block into place (``placed`` in
    :func:`parse_executor_log`; counting lines in the reading thread cost it 1 ms per block).
    With ``native``, the lines :mod:`native_scan` reads are taken from its one pass and only
    the others go through the reference path's per-line work, later and for several blocks
    at once (a :class:`_Scanned` block, :func:`_finish_scanned`).
    """
    scan = native_scan.scan_block(block) if native else None
    if scan is not None:
        return _scanned(block, scan, source, streams)
    lines, nul = _lines(block)
    n = len(lines)
    docker_time = None
    # a Docker json-file log is all records: a block (cut at a line start) whose first line is
    # one is unwrapped (searching every block for the marker cost 5% of the whole parse)
    if block[:len(line_prefix.DOCKER_START) + 16].lstrip(b"\0").startswith(
            line_prefix.DOCKER_START.encode()):
        lines, docker_time = line_prefix.unwrap_docker(lines)
    line_no = pa.array(np.arange(1, n + 1, dtype=np.int64))
    return _finish(lines, _features(lines, line_no, source, layouts), nul, docker_time,
                   streams)


@dataclasses.dataclass
class _Scanned:
    """A block the native scanner read, before the reference path's per-line work on the lines
    it left (``other``): that work has a fixed cost per call (RE2 compiles its patterns each
    time, ~5 ms for the ~240 lines of a 16 MB block, measured), so it is done for several
    consecutive blocks at once (:func:`_finish_scanned`)."""

    n: int
    other: np.ndarray           # indices of the lines left to the reference path
    fast_line: np.ndarray       # indices of the fast lines (the scan's rows)
    lines: pa.Array             # every line; the fast ones empty (never read again)
    fast_rows: pa.Table
    prefix_ranks: pa.Array
    severities: pa.Array
    known: line_prefix.Known | None = None   # the other lines' prefixes the scan read


def _scanned(block: bytes | bytearray, scan: native_scan.Scan, source: str,
             streams: _Streams | None) -> "_Block | _Scanned":
    """:func:`_analyse` of a block the native scanner read: the :class:`_Block` when the scan
    took every line, else the :class:`_Scanned` block (the block's bytes are not kept)."""
    n = scan.n
    fast = np.zeros(n, dtype=bool)
    fast[scan.fast_line] = True
    other = np.flatnonzero(~fast)
    data = pa.py_buffer(block)
    # the fast lines' text is never read again (they are iteration rows): kept empty
    lines = line_prefix.spans(data, scan.starts, np.where(fast, scan.starts, scan.ends))\
        .take(pa.array(np.arange(0, 2 * n, 2))) if n else pa.array([], pa.string())
    fast_rows = native_scan.iterations(scan, block, source)
    if len(other) == 0:
        none = pa.nulls(n, pa.string())
        pre = line_prefix.Prefixes(
            launcher_rank=pa.nulls(n, pa.int32()),
            logger_rank=native_scan.prefix_ranks(scan),
            severity=native_scan.severities(scan), log_time=none, collector_time=none,
            collector=none, host=none, has_logger=np.ones(n, dtype=bool),
            is_cpp=np.zeros(n, dtype=bool), body_offset=np.full(n, -1, dtype=np.int64))
        f = _Features(pre=pre, is_iter=np.ones(n, dtype=bool), body=pa.array([], pa.string()),
                      is_cand=np.zeros(n, dtype=bool), is_collector=np.zeros(n, dtype=bool),
                      body_lead=np.zeros(n, dtype=bool), iterations=fast_rows)
        return _finish(lines, f, None, None, streams)
    known = native_scan.known_prefixes(scan)
    return _Scanned(n=n, other=other, fast_line=scan.fast_line, lines=lines,
                    fast_rows=fast_rows, prefix_ranks=native_scan.prefix_ranks(scan),
                    severities=native_scan.severities(scan),
                    known=None if known is None else known.take(other))


def _finish_scanned(parts: list[_Scanned], source: str, layouts: iteration_line.Layouts,
                    streams: _Streams | None) -> list[_Block]:
    """The blocks of consecutive :class:`_Scanned` ``parts``: the reference path's per-line
    work (:func:`_features`, which looks at no neighbour) done once over all their other lines,
    numbered apart (part ``j``'s lines after the ``n`` of the parts before it), then cut back
    into parts and merged with each part's fast lines by line."""
    base = np.cumsum([0] + [p.n for p in parts[:-1]])
    lines = pa.concat_arrays([p.lines.take(pa.array(p.other)) for p in parts])
    line_no = pa.array(np.concatenate([p.other + 1 + b for p, b in zip(parts, base)]))
    known = None if any(p.known is None for p in parts) else \
        line_prefix.Known.concat([p.known for p in parts])
    sub = _features(lines, line_no, source, layouts, known)
    body_at = np.concatenate([[0], np.cumsum(~sub.is_iter)])
    row_at = np.concatenate([[0], np.cumsum(sub.is_iter)])
    blocks = []
    a = 0
    for p, b in zip(parts, base):
        e = a + len(p.other)
        iters = sub.iterations.slice(row_at[a], row_at[e] - row_at[a])
        if b and iters.num_rows:
            i = iters.schema.get_field_index("line")
            iters = iters.set_column(i, iters.schema.field(i), pc.subtract(iters.column(i), b))
        piece = _Features(
            pre=line_prefix.Prefixes(**{
                f.name: (v.slice(a, e - a) if isinstance(v, pa.Array) else v[a:e])
                for f in dataclasses.fields(line_prefix.Prefixes)
                for v in [getattr(sub.pre, f.name)]}),
            is_iter=sub.is_iter[a:e], body=sub.body.slice(body_at[a], body_at[e] - body_at[a]),
            is_cand=sub.is_cand[a:e], is_collector=sub.is_collector[a:e],
            body_lead=sub.body_lead[a:e], iterations=iters)
        blocks.append(_merged(p, piece, streams))
        a = e
    return blocks


def _merged(part: _Scanned, sub: _Features, streams: _Streams | None) -> _Block:
    """The block of ``part`` from its other lines' features ``sub``: fast and other lines'
    values merged by line."""
    n, other = part.n, part.other
    k, m = len(part.fast_line), len(other)
    order = np.empty(n, dtype=np.int64)
    order[part.fast_line] = np.arange(k)
    order[other] = k + np.arange(m)
    order_a = pa.array(order)

    def merge(fast_values: pa.Array, other_values: pa.Array) -> pa.Array:
        if fast_values.null_count == k and other_values.null_count == m:
            return pa.nulls(n, other_values.type)
        return pa.concat_arrays([fast_values.cast(other_values.type), other_values])\
            .take(order_a)

    def spread(fast_value: bool | int, other_values: np.ndarray) -> np.ndarray:
        out = np.full(n, fast_value, dtype=other_values.dtype)
        out[other] = other_values
        return out

    p = sub.pre
    # a prefix's time text is read for event lines only (iteration rows carry their own
    # typed log_time), so the fast lines leave it null
    none = pa.nulls(k, pa.string())
    pre = line_prefix.Prefixes(
        launcher_rank=merge(pa.nulls(k, pa.int32()), p.launcher_rank),
        logger_rank=merge(part.prefix_ranks, p.logger_rank),
        severity=merge(part.severities, p.severity),
        log_time=merge(none, p.log_time), collector_time=merge(none, p.collector_time),
        collector=merge(none, p.collector), host=merge(none, p.host),
        has_logger=spread(True, p.has_logger), is_cpp=spread(False, p.is_cpp),
        body_offset=spread(-1, p.body_offset))
    iters = part.fast_rows
    if sub.iterations.num_rows:
        iters = pa.concat_tables([part.fast_rows, sub.iterations])
        iters = iters.take(pc.sort_indices(iters, [("line", "ascending")]))
    f = _Features(pre=pre, is_iter=spread(True, sub.is_iter), body=sub.body,
                  is_cand=spread(False, sub.is_cand),
                  is_collector=spread(False, sub.is_collector),
                  body_lead=spread(False, sub.body_lead), iterations=iters)
    return _finish(part.lines, f, None, None, streams)


# --------------------------------------------------------------------------- sequential stage

class _Scanner:
    """Claims candidate lines in order; keeps open multi-line events per launcher stream."""

    def __init__(self, source: str):
        self.source = source
        self.open: dict[int, Any] = {}
        self.last_rank: int | None = None
        self.events: list[dict[str, Any]] = []
        self.unparsed: list[tuple[int, str]] = []
        self.frames: list[dict[str, Any]] = []

    def _finish(self, stream: int, ev: Any) -> None:
        self.open.pop(stream, None)
        wrappers = getattr(ev, "wrappers", {})
        if ev.is_fragment:
            self.unparsed.append((ev.lines[0], ev.raw_first))
        else:
            self.events.extend({**r, **wrappers} for r in ev.events())
            if isinstance(ev, Traceback):
                self.frames.extend(ev.frame_rows())
        if isinstance(ev, Traceback):   # lines read past its end go back (fragments too)
            for line, body, raw, coll in ev.released():
                if coll:
                    self.events.append({"line": line, "line_end": line,
                                        "kind": event_kinds.COLLECTOR_TIMESTAMP,
                                        "log_time": body.strip() or None, "text": body,
                                        "collector": wrappers.get("collector")})
                else:
                    self.unparsed.append((line, raw))

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
                if isinstance(ev, Traceback):
                    coll = bool(b.is_collector[j])
                    if not ev.accepts(body, bool(has_logger[j]), coll):
                        self._finish(s, ev)
                        return
                    ev.add(b.first_line + j, body, b.raw_at(j), coll)
                else:
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
                header = has_logger[i] and row is None and traceback_opens(body) == "header"
                if row is None and has_logger[i] and b.wrap_head[i] and not header:
                    row = {"kind": event_kinds.CPP_LOG if b.pre.is_cpp[i] else event_kinds.LOG,
                           "message": body, "text": body}
                if row is not None:
                    row = self._single(b, int(i), row)
                    claimed[i] = True
                    if b.wrap_head[i]:
                        s = int(b.stream[i])
                        if s in self.open:
                            self._finish(s, self.open[s])
                        scan(s, log_events.Wrapped(row, body, b.raw_at(i)), int(i))
                    else:
                        self.events.append(row)
                    continue
                if has_logger[i] and not header:
                    continue
                s = int(b.stream[i])
                if s in self.open:
                    self._finish(s, self.open[s])
                rank = launcher[i].as_py()
                if rank is None:
                    rank = b.rank_ffill[i].as_py()
                    if rank is None:
                        rank = self.last_rank
                raw = b.raw_at(i)
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
                ev.wrappers = b.wrappers_at(int(i))
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
                "log_time": b.pre.log_time[i].as_py(), **b.wrappers_at(i)}

    def take_rows(self) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
        ev, un = self.events, self.unparsed
        self.events, self.unparsed = [], []
        return ev, un

    def take_frames(self) -> pa.Table:
        rows, self.frames = self.frames, []
        for r in rows:
            r["source"] = self.source
        return pa.Table.from_pylist(rows, schema=TRACEBACK_FRAMES) if rows \
            else TRACEBACK_FRAMES.empty_table()


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
            "message": pc.filter(b.body, body_sel), "text": pc.filter(b.body, body_sel),
            "log_time": pc.filter(b.pre.log_time, sel),
            **{k: pc.filter(v, sel) for k, v in b.wrappers.items()}}))
    if coll.any():
        sel = pa.array(coll)
        ln = pc.filter(line_no, sel)
        text = pc.filter(b.body, pa.array(coll[~b.is_iter]))
        ts = pc.utf8_trim_whitespace(text)
        parts.append(_events_table(len(ln), source, {
            "line": ln, "line_end": ln, "kind": pa.repeat(
                pa.scalar(event_kinds.COLLECTOR_TIMESTAMP), len(ln)), "log_time": ts,
            "text": text, **{k: pc.filter(v, sel) for k, v in b.wrappers.items()}}))
    events = pa.concat_tables(parts) if parts else EVENTS.empty_table()
    if len(parts) > 1:
        events = events.take(pc.sort_indices(events, [("line", "ascending")]))
    sel = pa.array(unp)
    un = pa.Table.from_arrays([pa.repeat(pa.scalar(source, pa.string()), int(unp.sum())),
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


def _unparsed_rows(rows: list[tuple[int, str]], source: str) -> pa.Table:
    return pa.Table.from_arrays([pa.array([source] * len(rows), pa.string()),
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
    scanner = _Scanner(source)
    layouts = iteration_line.Layouts()
    streams = _Streams()
    next_line = 1
    pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None
    pending: deque[concurrent.futures.Future[_Block | _Scanned] | _Block | _Scanned | LongLine]\
        = deque()
    ready: deque[_Block] = deque()   # blocks finished with an earlier one's group, next out
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

    def analysed(item: concurrent.futures.Future[_Block | _Scanned] | _Block | _Scanned
                 ) -> _Block | _Scanned:
        return item.result() if isinstance(item, concurrent.futures.Future) else item

    def drain_one() -> LogBatch:
        if ready:
            return batch_of(ready.popleft())
        item = pending.popleft()
        if isinstance(item, LongLine):
            return long_line(item)
        got = analysed(item)
        if isinstance(got, _Scanned):
            # the other lines of the scanned blocks queued behind it too, in one call
            group = [got]
            while len(group) < GROUP_BLOCKS and pending and not isinstance(pending[0], LongLine):
                nxt = analysed(pending[0])
                if not isinstance(nxt, _Scanned):
                    break
                group.append(nxt)
                pending.popleft()
            got, *rest = _finish_scanned(group, source, layouts, streams)
            ready.extend(rest)
        return batch_of(got)

    def batch_of(got: _Block) -> LogBatch:
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
        for r in rows:
            r["source"] = source
        return LogBatch(iterations=ITERATIONS.empty_table(),
                        events=_typed_events(pa.Table.from_pylist(rows, schema=EVENTS)),
                        unparsed=_unparsed_rows(extra, source) if extra
                        else UNPARSED.empty_table(), traceback_frames=scanner.take_frames())

    try:
        for block, consumed, err in _blocks(path, block_bytes, max_line_bytes):
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
                pending.append(pool.submit(_analyse, block, source, layouts, streams, native))
            else:
                pending.append(_analyse(block, source, layouts, streams, native))
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
        for r in rows:
            r["source"] = source
        events = pa.Table.from_pylist(rows, schema=EVENTS) if rows else EVENTS.empty_table()
        events = _typed_events(events)
        yield LogBatch(iterations=ITERATIONS.empty_table(), events=events,
                       unparsed=_unparsed_rows(extra, source) if extra
                       else UNPARSED.empty_table(), traceback_frames=frames)
