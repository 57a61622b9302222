"""Whole tracebacks and C++ backtraces of a natively scanned block, read by the compiled scanner.

Why: fed line by line to :class:`~forensics.readers.traceback_event.Traceback` in Python, the
tracebacks of a log with many (the varied benchmark log: ~1 line in 40) cost the sequential
stage most of its time, and their rows more as Python dicts. The compiled pass
(:mod:`~forensics.readers.compiled.event_kernel`) finds the plainest ones among the lines the
iteration scan left, with where their frames' fields lie; here (in the worker thread) their
``events`` and ``traceback_frames`` columns are cut out of the block as Arrow arrays, each value
as :meth:`Traceback.events <forensics.readers.traceback_event.Traceback.events>` and
:meth:`~forensics.readers.traceback_event.Traceback.frame_rows` (or
:class:`~forensics.readers.log_events.CppBacktrace`) give it. The scanner
(:mod:`~forensics.readers.log_scanner`) claims their lines where the line-by-line reading would
open them, and gives them their rank and place (:class:`Taken`). A traceback ending in a typed
failure message, and every other shape, is still read line by line.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import TRACEBACK_FRAMES
from forensics.readers import event_kinds, log_events, traceback_event
from forensics.readers.line_prefix import spans
from forensics.readers.repeated_text import repeated

#: A block with fewer events read whole leaves them to the line-by-line reading: cutting their
#: columns out costs ~1.5 ms a block whatever their number (some 30 Arrow calls), the reading
#: ~30 us an event (measured on the varied benchmark log, ~200 a 16 MB block).
MIN_EVENTS = 48
#: event_kernel's EV_ROWS / FR_ROWS and kinds (that module imports numba)
EV_ROWS, FR_ROWS = 8, 8
TRACEBACK, ADP_ASSERT, CPP_BACKTRACE = range(3)


@dataclasses.dataclass
class Made:
    """The events the compiled pass read whole in one block, in line order.

    Fields: ``first`` (block index of an event's first line -> its event number, for the events
    to make), ``last`` (last line of each), ``columns`` (each event's ``events`` columns but
    ``line``, ``line_end``, ``rank``, ``source``), ``frames`` (their ``traceback_frames`` rows,
    ``line`` and ``at_line`` as block indices, ``source`` empty), ``frame_at`` (event ``e``'s
    frames are rows ``frame_at[e]:frame_at[e + 1]``).
    """

    first: dict[int, int]
    last: list[int]
    first_line: np.ndarray
    columns: dict[str, pa.Array]
    frames: pa.Table
    frame_at: np.ndarray


class Taken(NamedTuple):
    """A made event the scanner took: where the line-by-line reading would have finished it,
    with the rank it gives it (its rows stand there among the scanner's rows)."""

    made: Made
    event: int
    rank: int | None
    first_line: int   # the block's


def event_columns(taken: list[Taken]) -> tuple[int, dict[str, pa.Array]]:
    """(rows, ``events`` columns but ``source``) of made events of one block, in order."""
    made, base = taken[0].made, taken[0].first_line
    i = np.array([t.event for t in taken], np.int64)
    if len(i) == len(made.last) and (i == np.arange(len(i))).all():
        cols = dict(made.columns)   # every made event, in order (the common case)
    else:
        at = pa.array(i)
        cols = {k: v.take(at) for k, v in made.columns.items()}
    cols["line"] = pa.array(made.first_line[i] + base)
    cols["line_end"] = pa.array(np.array(made.last, np.int64)[i] + base)
    cols["rank"] = pa.array([t.rank for t in taken], pa.int32())
    return len(taken), cols


def frame_rows(taken: list[Taken], source: str) -> tuple[pa.Table, np.ndarray]:
    """(the ``traceback_frames`` rows of made events of one block, in order; rows of each)."""
    made, base = taken[0].made, taken[0].first_line
    fa = made.frame_at
    i = np.array([t.event for t in taken], np.int64)
    counts = fa[i + 1] - fa[i]
    idx = np.repeat(fa[i] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) \
        + np.arange(int(counts.sum()))
    t = made.frames if len(idx) == made.frames.num_rows and (idx == np.arange(len(idx))).all() \
        else made.frames.take(pa.array(idx, pa.int64()))
    for name in ("line", "at_line"):
        j = t.schema.get_field_index(name)
        t = t.set_column(j, t.schema.field(j), pc.add(t.column(j), base))
    j = t.schema.get_field_index("source")
    return t.set_column(j, t.schema.field(j), repeated(source, t.num_rows)), counts


def in_order(items: list[Any], of_dicts: Callable[[list[dict[str, Any]]], pa.Table],
             of_taken: Callable[[list[Taken]], tuple[pa.Table, np.ndarray]],
             ordered: bool = True) -> pa.Table | None:
    """Rows of ``items`` (dicts, and :class:`Taken` events) as one table in their order (not
    ``ordered``: dicts first): the dicts' table from ``of_dicts``, each block's taken events'
    from ``of_taken`` (with their rows each), then one ``take`` (tables of a few rows each cost
    more, measured); None when there are no items."""
    if not items:
        return None
    dicts: list[dict[str, Any]] = []
    groups: dict[int, list[Taken]] = {}
    where: list[tuple[int, int]] = []
    for it in items:
        if isinstance(it, dict):
            where.append((0, len(dicts)))
            dicts.append(it)
        else:
            g = groups.setdefault(id(it.made), [])
            where.append((id(it.made), len(g)))
            g.append(it)
    tables: list[pa.Table] = []
    starts: dict[int, np.ndarray] = {}
    off = 0
    if dicts:
        tables.append(of_dicts(dicts))
        starts[0] = np.arange(len(dicts) + 1)
        off = len(dicts)
    for key, g in groups.items():
        t, counts = of_taken(g)
        tables.append(t)
        starts[key] = off + np.concatenate([[0], np.cumsum(counts)])
        off += t.num_rows
    if len(tables) == 1 and (not dicts or not groups):
        return tables[0]   # one kind of rows: already in order
    if not ordered:
        return pa.concat_tables(tables)
    first = np.array([starts[k][j] for k, j in where], np.int64)
    end = np.array([starts[k][j + 1] for k, j in where], np.int64)
    n = end - first
    order = np.repeat(first - np.concatenate([[0], np.cumsum(n)[:-1]]), n) \
        + np.arange(int(n.sum()))
    return pa.concat_tables(tables).take(pa.array(order, pa.int64()))


def _texts(data: pa.Buffer, start: np.ndarray, end: np.ndarray) -> pa.Array:
    """The strings of the byte spans ``start:end`` (in order, not overlapping)."""
    if len(start) == 0:
        return pa.array([], pa.string())
    return spans(data, start, end).take(pa.array(np.arange(0, 2 * len(start), 2)))


class _Pieces:
    """Byte spans of a block cut out as strings by one Arrow array (``line_prefix.spans``):
    each output column is then one ``take`` of it (tens of small Arrow calls per block cost
    more than the work, measured)."""

    def __init__(self) -> None:
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.n = 0

    def add(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Add spans (not overlapping any other); returns their numbers."""
        self.starts.append(start)
        self.ends.append(end)
        self.n += len(start)
        return np.arange(self.n - len(start), self.n)

    def cut(self, data: pa.Buffer) -> None:
        start, end = np.concatenate(self.starts), np.concatenate(self.ends)
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
        if (e < s).any() or (s[1:] < e[:-1]).any():   # Arrow would read out of its buffer
            raise RuntimeError("the native scanner returned overlapping spans (a bug: please "
                               "report it)")
        self.place = np.empty(self.n, np.int64)
        self.place[order] = 2 * np.arange(self.n)
        self.array = spans(data, s, e) if self.n else None

    def take(self, numbers: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
        """The strings of spans ``numbers`` (null where not ``valid``)."""
        if len(numbers) == 0 or self.array is None:
            return pa.nulls(len(numbers), pa.string())
        at = self.place[np.maximum(numbers, 0)]
        return self.array.take(pa.array(at, pa.int64(), mask=None if valid is None else ~valid))


def read(entry: dict[str, Any], block: bytes | bytearray, n_lines: int, line: np.ndarray,
         starts: np.ndarray, ends: np.ndarray, shape: np.ndarray,
         boff: np.ndarray) -> Made | None:
    """The events the compiled pass reads whole among the block's other lines (``line``: their
    indices, ``starts``..``boff``: the scan's values for them), or None when there are fewer
    than :data:`MIN_EVENTS`."""
    m = len(line)
    if m == 0:
        return None
    buf = np.frombuffer(block, np.uint8)
    line, starts, ends, boff = (np.ascontiguousarray(a, np.int64)
                                for a in (line, starts, ends, boff))
    shape = np.ascontiguousarray(shape, np.uint8)
    cap_ev = m // 2 + 1
    ev = np.empty((EV_ROWS, cap_ev), np.int64)
    fr = np.empty((FR_ROWS, m), np.int64)
    out = np.zeros(2, np.int64)
    entry["events"](buf.ctypes.data, len(buf), n_lines, m, *(a.ctypes.data for a in (
        line, starts, ends, shape, boff, ev)), cap_ev, fr.ctypes.data, m, out.ctypes.data)
    if entry["failed"]():
        raise RuntimeError("the native scanner returned an error (a bug: please report it)")
    k, f = int(out[0]), int(out[1])
    if k < max(MIN_EVENTS, 1):
        return None
    ev, fr = ev[:, :k], fr[:, :f]
    first, last, kind = ev[0], ev[1], ev[2]
    first_at, last_at = np.searchsorted(line, first), np.searchsorted(line, last)
    data = pa.py_buffer(block)
    string = pa.string()

    # the spans cut out: each traceback's exception type and message, each frame's file,
    # function and source, each C++ backtrace's first line
    pieces = _Pieces()
    tb = kind != CPP_BACKTRACE
    type_no = np.full(k, -1, np.int64)
    type_no[tb] = pieces.add(starts[last_at[tb]], ev[3, tb])
    has_msg = ev[4] >= 0
    msg_no = np.full(k, -1, np.int64)
    msg_no[has_msg] = pieces.add(ev[4, has_msg], ends[last_at[has_msg]])
    cpp = np.flatnonzero(~tb)
    first_no = np.full(k, -1, np.int64)
    first_no[cpp] = pieces.add(starts[first_at[cpp]], ends[first_at[cpp]])
    file_no = pieces.add(fr[2], fr[3])
    has_fn, has_code, has_no = fr[5] >= 0, fr[6] >= 0, fr[4] >= 0
    fn_no = np.full(f, -1, np.int64)
    fn_no[has_fn] = pieces.add(fr[5, has_fn], ends[np.searchsorted(line, fr[1, has_fn])])
    code_no = np.full(f, -1, np.int64)
    code_no[has_code] = pieces.add(fr[6, has_code], fr[7, has_code])
    pieces.cut(data)

    # a C++ backtrace whose first line reads as something else first, and a traceback ending
    # in a typed failure message, are left to the line-by-line reading
    keep = ev[5] == 0
    for j, body in zip(cpp.tolist(), pieces.take(first_no[cpp]).to_pylist()):
        keep[j] = (log_events.match_single(body) is None
                   and traceback_event.opens(body) is None)

    fe = fr[0]
    frame_at = np.searchsorted(fe, np.arange(k + 1))
    nos = pa.array(fr[4], pa.int64(), mask=~has_no)
    frames = pa.Table.from_arrays([
        pa.nulls(f, string), pa.array(first[fe]), pa.array(np.zeros(f, np.int32)),
        pa.array((np.arange(f) - frame_at[fe]).astype(np.int32)), pieces.take(file_no), nos,
        pieces.take(fn_no, has_fn), pieces.take(code_no, has_code), pa.array(fr[1])],
        schema=TRACEBACK_FRAMES)

    inner, exe = ev[6], ev[7]
    has_inner, has_exe = inner >= 0, exe >= 0
    inner_fn = np.where(has_inner, fn_no[np.maximum(inner, 0)], -1) if f else inner
    exe_fn = np.where(has_exe, fn_no[np.maximum(exe, 0)], -1) if f else exe
    fr_no = fr[4] if f else np.zeros(1, np.int64)
    kinds = pa.array([event_kinds.TRACEBACK, event_kinds.ADP_ASSERT, event_kinds.CPP_BACKTRACE])
    columns = {
        "severity": repeated("E", k),
        "kind": kinds.take(pa.array(kind)),
        "message": pieces.take(np.where(tb, msg_no, first_no), np.where(tb, has_msg, True)),
        "exception_type": pieces.take(type_no, tb),
        "innermost_file": pieces.take(file_no[inner] if f else inner, has_inner),
        "innermost_line": pa.array(fr_no[np.maximum(inner, 0)], pa.int64(),
                                   mask=~(has_inner & (fr_no[np.maximum(inner, 0)] >= 0))),
        "innermost_function": pieces.take(inner_fn, inner_fn >= 0),
        "executor_file": pieces.take(file_no[exe] if f else exe, has_exe),
        "executor_line": pa.array(fr_no[np.maximum(exe, 0)], pa.int64(),
                                  mask=~(has_exe & (fr_no[np.maximum(exe, 0)] >= 0))),
        "executor_function": pieces.take(exe_fn, exe_fn >= 0),
        "text": _texts(data, starts[first_at], ends[last_at]),
    }
    use = np.flatnonzero(keep).tolist()
    firsts = first.tolist()
    return Made(first={firsts[e]: e for e in use}, last=last.tolist(), first_line=first,
                columns=columns, frames=frames, frame_at=frame_at)
