"""The vectorised stage of the executor-log parser: one block of lines to per-line arrays.

Runs in worker threads (Arrow releases the GIL). Each line's prefixes, whether it is an
iteration line (then its row, :func:`iteration_line.parse`), a candidate for the sequential
stage (:mod:`log_scanner`) or a collector timestamp are read with RE2 kernels; for big inputs
:mod:`native_scan` reads the common iteration lines first and only the other lines take this
path (:class:`Scanned`, several blocks per call: :func:`finish_scanned`); the rows are the same
either way. Nothing here depends on a block's place in the log: lines are numbered from 1 and
the parser moves the block into place.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import ITERATIONS
from forensics.readers import (
    iteration_line,
    line_prefix,
    log_blocks,
    log_events,
    native_events,
    native_scan,
)

#: An iteration line: any wrappers, then the body starts with its ``iter`` field.
ITERATION_MATCH = line_prefix.PREFIX_MATCH + r"[ \t]*" + iteration_line.ITERATION_LINE[1:]


@dataclasses.dataclass
class Block:
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
    # events the compiled scanner read whole, by their first line (native_events.read)
    made: native_events.Made | None = None

    # Python copies of what the sequential stage reads line by line, made once per block on
    # first use (an Arrow scalar per line cost the tracebacks of a log most of that stage):
    # the non-iteration lines' bodies and raw text, and whether any wrapper is set.
    _bodies: list[str] | None = dataclasses.field(default=None, repr=False)
    _raws: list[str] | None = dataclasses.field(default=None, repr=False)
    _no_wrappers: bool | None = dataclasses.field(default=None, repr=False)

    def no_wrappers(self) -> bool:
        """Whether no line of the block has a wrapper value."""
        if self._no_wrappers is None:
            self._no_wrappers = all(v.null_count == len(v) for v in self.wrappers.values())
        return self._no_wrappers

    def wrappers_at(self, i: int) -> dict[str, Any]:
        if self.no_wrappers():
            return dict.fromkeys(self.wrappers)
        return {k: v[i].as_py() for k, v in self.wrappers.items()}

    def texts(self) -> tuple[memoryview, list[str], list[str]]:
        """Per line, the index into the other two (valid for non-iteration lines); the
        non-iteration lines' bodies; their raw text (what :meth:`body_at` and :meth:`raw_at`
        read, for a loop over many lines: a memoryview and lists, indexed as Python ints)."""
        return memoryview(self.body_index), self._body_list(), self._raw_list()

    def _body_list(self) -> list[str]:
        if self._bodies is None:
            self._bodies = self.body.to_pylist()
        return self._bodies

    def _raw_list(self) -> list[str]:
        if self._raws is None:
            self._raws = (pc.filter(self.lines, pa.array(~self.is_iter)) if self.is_iter.any()
                          else self.lines).to_pylist()
        return self._raws

    def body_at(self, i: int) -> str:
        """The body of non-iteration line ``i``."""
        return self._body_list()[self.body_index[i]]

    def raw_at(self, i: int) -> str:
        """The text of non-iteration line ``i`` as read (wrappers included): one Arrow scalar
        until :meth:`texts` made the list of them all."""
        if self._raws is None:
            return self.lines[i].as_py()
        return self._raws[self.body_index[i]]


def _mask(a: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False), dtype=bool)


class Streams:
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
class Features:
    """What the reference path reads from each line on its own (no neighbour involved), for
    a subset of a block's lines: so lines the native scanner took need none of it."""

    pre: line_prefix.Prefixes
    is_iter: np.ndarray
    body: pa.Array              # bodies of the non-iteration lines only
    is_cand: np.ndarray         # before the wrapping logger lines are added
    is_collector: np.ndarray
    body_lead: np.ndarray       # body starts with white space then text
    iterations: pa.Table        # wrapper columns still null


def features(lines: pa.Array, line_no: pa.Array, source: str,
              known: line_prefix.Known | None = None) -> Features:
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
        iters = iteration_line.parse(pc.filter(lines, sel), source=source,
                                     line=pc.filter(line_no, sel), rank=pc.filter(rank, sel),
                                     log_time=pc.filter(pre.log_time, sel))
    else:
        iters = ITERATIONS.empty_table()
    return Features(pre=pre, is_iter=is_iter, body=body, is_cand=is_cand,
                     is_collector=is_collector, body_lead=body_lead, iterations=iters)


def _finish(lines: pa.Array, f: Features, nul: np.ndarray | None,
            docker_time: pa.Array | None, streams: Streams | None,
            made: native_events.Made | None = None) -> Block:
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
        ids = np.array((streams or Streams()).of(uniq.to_pylist()), dtype=np.int64)
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
    return Block(first_line=1, lines=lines, pre=pre, is_iter=is_iter, body=f.body,
                  body_index=np.cumsum(~is_iter) - 1, is_cand=is_cand,
                  is_collector=is_collector, stream=stream, rank=rank,
                  rank_ffill=pc.fill_null_forward(rank), iterations=iters, nul=nul,
                  wrappers=wrappers, wrap_head=wrap_head, made=made)


def analyse(block: bytes | bytearray, source: str,
             streams: Streams | None = None, native: bool = False) -> "Block | Scanned":
    """The per-block vectorised work (runs in a worker thread).

    Its line numbers are not known yet (earlier blocks may still be in other threads), so
    they start at 1 and the caller moves the block into place (``placed`` in
    :func:`parse_executor_log`; counting lines in the reading thread cost it 1 ms per block).
    With ``native``, the lines :mod:`native_scan` reads are taken from its one pass and only
    the others go through the reference path's per-line work, later and for several blocks
    at once (a :class:`Scanned` block, :func:`finish_scanned`).
    """
    scan = native_scan.scan_block(block) if native else None
    if scan is not None:
        return _scanned(block, scan, source, streams)
    lines, nul = log_blocks.block_lines(block)
    n = len(lines)
    docker_time = None
    # a Docker json-file log is all records: a block (cut at a line start) whose first line is
    # one is unwrapped (searching every block for the marker cost 5% of the whole parse)
    if block[:len(line_prefix.DOCKER_START) + 16].lstrip(b"\0").startswith(
            line_prefix.DOCKER_START.encode()):
        lines, docker_time = line_prefix.unwrap_docker(lines)
    line_no = pa.array(np.arange(1, n + 1, dtype=np.int64))
    return _finish(lines, features(lines, line_no, source), nul, docker_time,
                   streams)


@dataclasses.dataclass
class Scanned:
    """A block the native scanner read, before the reference path's per-line work on the lines
    it left (``other``): that work has a fixed cost per call (RE2 compiles its patterns each
    time, ~5 ms for the ~240 lines of a 16 MB block, measured), so it is done for several
    consecutive blocks at once (:func:`finish_scanned`)."""

    n: int
    other: np.ndarray           # indices of the lines left to the reference path
    fast_line: np.ndarray       # indices of the fast lines (the scan's rows)
    lines: pa.Array             # every line; the fast ones empty (never read again)
    other_lines: pa.Array       # the other lines alone (``lines`` at ``other``)
    fast_rows: pa.Table
    prefix_ranks: pa.Array
    severities: pa.Array
    known: line_prefix.Known | None = None   # the other lines' prefixes the scan read
    made: native_events.Made | None = None   # native_events.read


def _other_text(block: bytes | bytearray, starts: np.ndarray, ends: np.ndarray,
                other: np.ndarray, n: int) -> tuple[pa.Array, pa.Array]:
    """(every line of the block with only the ``other`` ones' text, the others empty; the
    ``other`` lines alone), one buffer for both: only the other lines' bytes are copied (a
    ``take`` over every line's span cost ~5 ms per 16 MB block, measured)."""
    m = len(other)
    alone = line_prefix.spans(pa.py_buffer(block), starts[other], ends[other])\
        .take(pa.array(np.arange(0, 2 * m, 2))) if m else pa.array([], pa.string())
    lengths = np.zeros(n + 1, dtype=np.int32)
    lengths[other + 1] = ends[other] - starts[other]
    every = pa.StringArray.from_buffers(n, pa.py_buffer(np.cumsum(lengths, dtype=np.int32)),
                                        alone.buffers()[2] or pa.py_buffer(b""))
    return every, alone


def _scanned(block: bytes | bytearray, scan: native_scan.Scan, source: str,
             streams: Streams | None) -> "Block | Scanned":
    """:func:`analyse` of a block the native scanner read: the :class:`Block` when the scan
    took every line, else the :class:`Scanned` block (the block's bytes are not kept)."""
    n = scan.n
    fast = np.zeros(n, dtype=bool)
    fast[scan.fast_line] = True
    other = np.flatnonzero(~fast)
    # the fast lines' text is never read again (they are iteration rows): kept empty
    lines, other_lines = _other_text(block, scan.starts, scan.ends, other, n)
    fast_rows = native_scan.iterations(scan, block, source)
    if len(other) == 0:
        none = pa.nulls(n, pa.string())
        pre = line_prefix.Prefixes(
            launcher_rank=pa.nulls(n, pa.int32()),
            logger_rank=native_scan.prefix_ranks(scan),
            severity=native_scan.severities(scan), log_time=none, collector_time=none,
            collector=none, host=none, has_logger=np.ones(n, dtype=bool),
            is_cpp=np.zeros(n, dtype=bool), body_offset=np.full(n, -1, dtype=np.int64))
        f = Features(pre=pre, is_iter=np.ones(n, dtype=bool), body=pa.array([], pa.string()),
                      is_cand=np.zeros(n, dtype=bool), is_collector=np.zeros(n, dtype=bool),
                      body_lead=np.zeros(n, dtype=bool), iterations=fast_rows)
        return _finish(lines, f, None, None, streams)
    known = native_scan.known_prefixes(scan).take(other)
    made = native_events.read(native_scan.kernel(), block, n, other, scan.starts[other],
                              scan.ends[other], known.shape, known.body_offset)
    return Scanned(n=n, other=other, fast_line=scan.fast_line, lines=lines,
                    other_lines=other_lines,
                    fast_rows=fast_rows, prefix_ranks=native_scan.prefix_ranks(scan),
                    severities=native_scan.severities(scan), known=known, made=made)


def finish_scanned(parts: list[Scanned], source: str,
                    streams: Streams | None) -> list[Block]:
    """The blocks of consecutive :class:`Scanned` ``parts``: the reference path's per-line
    work (:func:`features`, which looks at no neighbour) done once over all their other lines,
    numbered apart (part ``j``'s lines after the ``n`` of the parts before it), then cut back
    into parts and merged with each part's fast lines by line."""
    base = np.cumsum([0] + [p.n for p in parts[:-1]])
    lines = pa.concat_arrays([p.other_lines for p in parts])
    line_no = pa.array(np.concatenate([p.other + 1 + b for p, b in zip(parts, base)]))
    known = None if any(p.known is None for p in parts) else \
        line_prefix.Known.concat([p.known for p in parts])
    sub = features(lines, line_no, source, known)
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
        piece = Features(
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


def _merged(part: Scanned, sub: Features, streams: Streams | None) -> Block:
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
    f = Features(pre=pre, is_iter=spread(True, sub.is_iter), body=sub.body,
                  is_cand=spread(False, sub.is_cand),
                  is_collector=spread(False, sub.is_collector),
                  body_lead=spread(False, sub.body_lead), iterations=iters)
    return _finish(part.lines, f, None, None, streams, part.made)

