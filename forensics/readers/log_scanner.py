"""The sequential stage of the executor-log parser: claims candidate lines in order.

Multi-line events (tracebacks, MPI abort banners, C++ backtraces, logger lines wrapped onto
the next lines) stay open per launcher stream from one block to the next; only a block's
candidate lines (:attr:`analysed_block.Block.is_cand`) are looked at in Python.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from forensics.dataset.schema import TRACEBACK_FRAMES
from forensics.readers import event_kinds, log_events
from forensics.readers.analysed_block import Block
from forensics.readers.native_events import Made, Taken, frame_rows, in_order
from forensics.readers.traceback_event import Traceback
from forensics.readers.traceback_event import opens as traceback_opens


class Scanner:
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

    def process(self, b: Block) -> np.ndarray:
        """Scan one block; returns the mask of lines claimed here."""
        n = len(b.lines)
        claimed = np.zeros(n, dtype=bool)
        positions: dict[int, np.ndarray] = {}
        has_logger = b.pre.has_logger
        # What the loop below reads per line, made on the first multi-line event: indexed as
        # Python objects (a numpy scalar per line cost the tracebacks of a log a third of this
        # stage), but not as lists of the block's every line (``tolist`` of a 16 MB block's
        # masks and line index cost ~5 ms, for the few lines a traceback reads): the masks'
        # bytes (0/1, read as booleans) and a memoryview of the index
        per_line: list[Any] = []
        one_stream = n == 0 or (b.stream[0] == b.stream).all()

        def scan(s: int, ev: Any, after: int) -> None:
            if not per_line:
                per_line.extend([b.is_iter.tobytes(), has_logger.tobytes(),
                                 b.is_collector.tobytes(), *b.texts()])
            is_iter, logger_line, collector, index, bodies, raws = per_line
            if one_stream:   # the lines of the stream: every line after ``after``
                following: Any = range(after + 1, n) if n and s == b.stream[0] else ()
            else:
                pos = positions.get(s)
                if pos is None:
                    pos = positions[s] = np.flatnonzero(b.stream == s)
                following = pos[np.searchsorted(pos, after, side="right"):].tolist()
            first = b.first_line
            took: list[int] = []   # claimed once the event stops (one numpy store, not one a line)
            try:
                if isinstance(ev, Traceback):
                    feed = ev.feed
                    for j in following:
                        if is_iter[j]:
                            self._finish(s, ev)
                            return
                        k = index[j]
                        if not feed(first + j, bodies[k], raws[k], logger_line[j], collector[j]):
                            self._finish(s, ev)
                            return
                        took.append(j)
                    self.open[s] = ev   # a traceback is never done: it ends at a line it refuses
                    return
                for j in following:
                    if is_iter[j]:
                        self._finish(s, ev)
                        return
                    body = bodies[index[j]]
                    if not ev.accepts(body, logger_line[j]):
                        self._finish(s, ev)
                        return
                    ev.add(first + j, body)
                    took.append(j)
                    if ev.done:
                        self._finish(s, ev)
                        return
                self.open[s] = ev
            finally:
                if one_stream and took:   # lines after ``after`` in a row: a slice
                    claimed[took[0]:took[-1] + 1] = True
                else:
                    claimed[took] = True

        for s, ev in sorted(self.open.items()):
            scan(s, ev, -1)
        cand = np.flatnonzero(b.is_cand)
        if len(cand):
            wrap_head = b.wrap_head
            # what the loop reads of a candidate, as Python values (an Arrow scalar a line cost
            # ~1 us each: a tenth of this stage on the varied benchmark log, measured)
            at = pa.array(cand)
            launcher, rank_ffill, ranks, severity, log_time = (
                a.take(at).to_pylist() for a in (b.pre.launcher_rank, b.rank_ffill, b.rank,
                                                 b.pre.severity, b.pre.log_time))
            bodies = b.body.take(pa.array(b.body_index[cand])).to_pylist()
            # events the compiled scan read whole, as lines of one stream without wrappers
            made = b.made if one_stream and b.made is not None and b.no_wrappers() else None
            first = made.first if made is not None else {}
            for j, i in enumerate(cand.tolist()):
                if claimed[i]:
                    continue
                if i in first:   # what the lines fed one by one would make, and when
                    e = first[i]
                    s = int(b.stream[i])
                    if s in self.open:
                        self._finish(s, self.open[s])
                    rank = launcher[j]
                    if rank is None:
                        rank = rank_ffill[j]
                        if rank is None:
                            rank = self.last_rank
                    claimed[i:made.last[e] + 1] = True
                    self._take(made, b.first_line, e, rank)
                    continue
                body = bodies[j]
                logger = has_logger[i]
                row = log_events.match_single(body)
                # a logger line opens a multi-line event only as a traceback's header
                how = traceback_opens(body) if logger and row is None else None
                header = how == "header"
                if row is None and logger and wrap_head[i] and not header:
                    row = {"kind": event_kinds.CPP_LOG if b.pre.is_cpp[i] else event_kinds.LOG,
                           "message": body, "text": body}
                if row is not None:
                    row = self._single(b, i, row, ranks[j], severity[j], log_time[j])
                    claimed[i] = True
                    if wrap_head[i]:
                        s = int(b.stream[i])
                        if s in self.open:
                            self._finish(s, self.open[s])
                        scan(s, log_events.Wrapped(row, body, b.raw_at(i)), i)
                    else:
                        self.events.append(row)
                    continue
                if logger and not header:
                    continue
                s = int(b.stream[i])
                if s in self.open:
                    self._finish(s, self.open[s])
                rank = launcher[j]
                if rank is None:
                    rank = rank_ffill[j]
                    if rank is None:
                        rank = self.last_rank
                line = b.first_line + i
                if not logger:
                    how = traceback_opens(body)
                if how is not None:
                    ev: Any = Traceback(line, body, how, rank, b.raw_at(i))
                elif log_events.MPI_DASHES.match(body) or log_events.MPI_ABORT_LINE.match(body):
                    ev = log_events.MpiAbortBanner(line, body, rank, b.raw_at(i))
                elif log_events.CPP_FRAME.match(body):
                    ev = log_events.CppBacktrace(line, body, rank, b.raw_at(i))
                else:
                    continue
                claimed[i] = True
                ev.wrappers = b.wrappers_at(i)
                scan(s, ev, i)
        if n:
            last = b.rank_ffill[n - 1].as_py()
            if last is not None:
                self.last_rank = last
        return claimed

    def _take(self, made: Made, first_line: int, e: int, rank: int | None) -> None:
        """Made event ``e`` finished here (its rows stand here among the others)."""
        taken = Taken(made, e, rank, first_line)
        self.events.append(taken)
        if made.frame_at[e] != made.frame_at[e + 1]:
            self.frames.append(taken)

    def _single(self, b: Block, i: int, row: dict[str, Any], rank: int | None,
                severity: str | None, log_time: str | None) -> dict[str, Any]:
        """The row of single-line event ``row`` at line ``i`` (``rank``, ``severity``,
        ``log_time``: the line's)."""
        msg_rank = row.pop("msg_rank", None)
        default_sev = row.pop("default_severity", None)
        line = b.first_line + i
        return {**row, "line": line, "line_end": line,
                "rank": rank if rank is not None else msg_rank,
                "severity": severity or default_sev, "log_time": log_time,
                **b.wrappers_at(i)}

    def take_rows(self) -> tuple[list[dict[str, Any] | Taken], list[tuple[int, str]]]:
        """The event rows so far (dicts, and :class:`Taken` made events), in order, and the
        unparsed lines."""
        ev, un = self.events, self.unparsed
        self.events, self.unparsed = [], []
        return ev, un

    def take_frames(self) -> pa.Table:
        rows, self.frames = self.frames, []
        for r in rows:
            if isinstance(r, dict):
                r["source"] = self.source
        t = in_order(rows, lambda d: pa.Table.from_pylist(d, schema=TRACEBACK_FRAMES),
                     lambda taken: frame_rows(taken, self.source))
        return TRACEBACK_FRAMES.empty_table() if t is None else t
