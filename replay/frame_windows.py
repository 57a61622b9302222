"""One run's frames read as consecutive iteration windows, one ``RunFrames`` at a time.

A long run is replayed window by window (``replay.streaming``); each window is what
``RunFrames.from_dataset`` holds for its iterations, the first-seen iterations of the windows
before it remembered (``replay.first_seen.SeenBefore``). A dataset whose run has a file of its own is read
by row group, others through ``Dataset.arrow`` filters.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replay.first_seen import SeenBefore
from replay.frame_schema import FRAMES
from replay.frames import RunFrames, iteration_runs, run_config
from replay.request_columns import REQUEST_COLUMNS, column_array, real_requests
from replay.stage_clock import CLOCK

#: Frames (iterations x ranks) per window of :class:`FrameWindows`: about 30 MB of arrays for a
#: fleet-hour mix of 16 requests a frame, whatever the run's length.
WINDOW_FRAMES = 1 << 16


class FrameWindows:
    """One run's frames read as consecutive iteration windows, one :class:`RunFrames` at a time.

    Iterating yields the windows in iteration order; each is what ``RunFrames.from_dataset``
    holds for those iterations (same arrays, same first-seen iterations: the windows before it
    are remembered, a few bytes per distinct request), so a replay that carries its state across
    the window edges (``replay.streaming.StreamReplay``) decides exactly what a whole-run replay
    decides while holding one window in memory. Windows split on iteration values, never inside
    an iteration; each reads its rows through ``Dataset.arrow(..., filters=...)``, which skips
    the row groups outside it.

    Fields:
        run, source, config: as :class:`RunFrames`.
        iters: every replayed iteration (every rank has a frame).
        dropped_iters: iterations some rank has no frame for.
        size: iterations (with a frame) per window.

    ``starts``: the iterations where windows begin, instead of every ``size`` iterations.
    """

    def __init__(self, ds: Any, run: str | None = None, size: int | None = None,
                 starts: Iterable[int] | None = None):
        self._ds = ds
        self.run, self.source, self.config, several = run_config(ds.arrow("runs"), run)
        self._run_filter = [("run", "==", self.run)] if several else []
        R = self.config.tp_size
        all_iters, per_iter = _frames_per_iteration(ds, self.run if several else None)
        self.iters = all_iters[per_iter == R]
        self.dropped_iters = tuple(int(x) for x in all_iters[per_iter != R])
        self.size = int(size) if size else max(1, WINDOW_FRAMES // max(R, 1))
        if self.size < 1:
            raise ValueError("window size must be at least one iteration")
        self._first_iter = int(all_iters[0]) if all_iters.size else 0
        self._all_iters = all_iters
        #: Start of each window (the first one also takes anything before it); ``starts``
        #: chooses them (tests put edges at a crash or inside a leak).
        self._starts = all_iters[::self.size] if starts is None else np.unique(
            np.r_[all_iters[:1], np.asarray(list(starts), np.int64)])

    @property
    def num_ranks(self) -> int:
        return int(self.config.tp_size)

    def __len__(self) -> int:
        return max(1, int(self._starts.size))

    def __iter__(self):
        seen = SeenBefore(self.num_ranks)
        starts = [int(x) for x in self._starts]
        role = False
        readers = self._range_readers()
        for k in range(len(self)):
            rng = []
            lo = starts[k] if k > 0 else None
            hi = starts[k + 1] if k + 1 < len(starts) else None
            if lo is not None:
                rng.append(("iter", ">=", lo))
            if hi is not None:
                rng.append(("iter", "<", hi))
            with CLOCK.stage("frames"):
                if readers is not None:
                    frames = self._build(readers[0].read(lo, hi), readers[1].read(lo, hi), seen)
                else:
                    frames = self._read(self._run_filter + rng, seen)
            object.__setattr__(frames, "role_before", role)
            yield frames
            # The role rule (Policy.dummy_role) keeps the last arrival's role: carry it over.
            events = np.flatnonzero(frames.ctx_arrived | frames.gen_arrived)
            if events.size:
                role = bool(frames.ctx_arrived[events[-1]])

    def at(self, iters: Iterable[int]) -> RunFrames:
        """The frames of some iterations only (for explanations: requests, states, ``alloc_ok``).

        Their first-seen fields (``new_real``, ``max_first_seen``, ``req_first``) count only
        these iterations; the replay never reads a frame built this way.
        """
        wanted = sorted({int(x) for x in iters})
        # A few stretches of the run's iterations that are all wanted (a timeline's detail
        # windows): one range read each, row groups chosen by their statistics. An ``in``
        # filter decodes every row group of the run (measured on fleet-1h 32x100k, 12
        # stretches of 101 iterations: 1.8 -> 0.2 s CPU); scattered iterations keep it.
        have = self._all_iters
        at = np.searchsorted(have, wanted)
        at = at[(at < have.size) & (have[np.minimum(at, have.size - 1)] == wanted)]
        stretches = np.split(at, np.flatnonzero(np.diff(at) != 1) + 1) if at.size else []
        readers = self._range_readers() if 0 < len(stretches) <= _RANGE_READS else None
        if readers is None:
            return self._read(self._run_filter + [("iter", "in", wanted)], None)
        frames, req = [], []
        for run in stretches:
            lo = int(have[run[0]])
            hi = int(have[run[-1] + 1]) if run[-1] + 1 < have.size else None
            frames.append(readers[0].read(lo, hi))
            req.append(readers[1].read(lo, hi))
        return self._build(pa.concat_tables(frames), pa.concat_tables(req), None)

    def _read(self, filters: list[tuple], seen: SeenBefore | None) -> RunFrames:
        ds = self._ds
        frames = ds.arrow("frames", columns=_FRAME_COLUMNS, filters=filters or None)
        req = ds.arrow("requests", columns=REQUEST_COLUMNS, filters=filters or None)
        return self._build(frames, req, seen)

    def _build(self, frames: pa.Table, req: pa.Table, seen: SeenBefore | None) -> RunFrames:
        parts = real_requests(req)
        del req
        return RunFrames.from_parts(self.run, self.source, self.config, frames, parts,
                                first_iter=self._first_iter, seen=seen)

    def _range_readers(self) -> tuple[_IterRangeReader, _IterRangeReader] | None:
        """Readers of the run's frames and requests files by row group, when the run has one
        file of each to itself with iteration statistics (a dataset of layout 2.x); else None
        (windows are read through ``Dataset.arrow`` filters)."""
        files_of = getattr(self._ds, "files", None)
        if files_of is None:
            return None
        out = []
        for table, columns in (("frames", _FRAME_COLUMNS), ("requests", REQUEST_COLUMNS)):
            files = files_of(table, run=self.run)
            if len(files) != 1 or (self._run_filter and len(files_of(table)) == 1):
                return None   # several files, or one file holding every run (layout 1.x)
            if not set(columns) <= set(pq.read_schema(files[0]).names):
                return None   # an older layout (requests.state_value was state)
            # The types Dataset.arrow gives (the dataset's schema), from an empty read.
            schema = self._ds.arrow(table, columns=columns, filters=[("iter", "<", -2 ** 62)]).schema
            reader = _IterRangeReader.open(files[0], columns, schema)
            if reader is None:
                return None
            out.append(reader)
        return out[0], out[1]


_FRAME_COLUMNS = [c for c in FRAMES.names if c not in ("run", "source")]
#: Most stretches of iterations :meth:`FrameWindows.at` reads by range (more: one filtered read).
_RANGE_READS = 16


class _IterRangeReader:
    """The rows of consecutive iteration ranges of one Parquet file, read by row group.

    The row groups a range needs are found by their ``iter`` statistics; a row group shared by
    two windows is read once (the last one is kept). Rows come in file order, as a filtered
    ``Dataset.arrow`` read gives them: a slice where the file is in iteration order (the
    usual case), else a filter. Measured on a 32x100k dataset: half the CPU of a filtered
    dataset read.
    """

    def __init__(self, pf: pq.ParquetFile, columns: list[str], schema: pa.Schema,
                 lo: np.ndarray, hi: np.ndarray):
        self.pf, self.columns, self.schema = pf, columns, schema
        self.lo, self.hi = lo, hi
        self._last: tuple[int, pa.Table] | None = None

    @classmethod
    def open(cls, path, columns: list[str], schema: pa.Schema) -> _IterRangeReader | None:
        """A reader, or None when some row group has no ``iter`` statistics."""
        pf = pq.ParquetFile(path)
        md = pf.metadata
        at = pf.schema_arrow.get_field_index("iter")
        lo, hi = [], []
        for i in range(md.num_row_groups):
            st = md.row_group(i).column(at).statistics
            if st is None or not st.has_min_max:
                return None
            lo.append(int(st.min))
            hi.append(int(st.max))
        return cls(pf, columns, schema, np.array(lo, np.int64), np.array(hi, np.int64))

    def _group(self, i: int) -> pa.Table:
        if self._last is None or self._last[0] != i:
            # A column added to the schema after the file was written reads as nulls.
            have = set(self.pf.schema_arrow.names)
            t = self.pf.read_row_group(i, columns=[c for c in self.columns if c in have])
            for c in self.columns:
                if c not in have:
                    t = t.append_column(self.schema.field(c), pa.nulls(t.num_rows,
                                                                        self.schema.field(c).type))
            self._last = (i, t.select(self.columns))
        return self._last[1]

    def read(self, lo: int | None, hi: int | None) -> pa.Table:
        """Rows with ``lo <= iter < hi`` (None: unbounded), in file order."""
        keep = np.ones(self.lo.size, bool)
        if lo is not None:
            keep &= self.hi >= lo
        if hi is not None:
            keep &= self.lo < hi
        parts = [self._group(int(i)) for i in np.flatnonzero(keep)]
        if not parts:
            return self.schema.empty_table()
        t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        # the iterations chunk by chunk, as Arrow holds them (no combined copy of ~1M rows)
        chunks = [c for c in (column_array(c, np.int64, copy=False)
                              for c in t.column("iter").chunks) if c.size]
        if all((c[1:] >= c[:-1]).all() for c in chunks) and all(
                x[-1] <= y[0] for x, y in itertools.pairwise(chunks)):
            a = 0 if lo is None else _sorted_position(chunks, lo)
            b = t.num_rows if hi is None else _sorted_position(chunks, hi)
            t = t.slice(a, b - a)
        else:
            it = column_array(t.column("iter"), np.int64)
            mask = np.ones(it.size, bool)
            if lo is not None:
                mask &= it >= lo
            if hi is not None:
                mask &= it < hi
            t = t.filter(pa.array(mask))
        return t.cast(self.schema) if t.schema != self.schema else t


def _sorted_position(chunks: list[np.ndarray], value: int) -> int:
    """``np.searchsorted(np.concatenate(chunks), value)`` of chunks in order, without the
    concatenation."""
    at = 0
    for c in chunks:
        if c.size and c[-1] >= value:
            return at + int(np.searchsorted(c, value, side="left"))
        at += c.size
    return at


def _frames_per_iteration(ds: Any, run: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Every frame iteration of the run and its number of frames, a row group at a time."""
    vals, counts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    batches = ds.batches("frames", ["iter"] + (["run"] if run is not None else [])) \
        if hasattr(ds, "batches") else ds.arrow("frames", columns=["iter", "run"]).to_batches()
    for b in batches:
        if run is not None:
            b = b.filter(pc.equal(b.column("run"), run))
        v, c = iteration_runs(column_array(b.column("iter"), np.int64))
        vals.append(v)
        counts.append(c)
    u, inv = np.unique(np.concatenate(vals), return_inverse=True)
    return u, np.bincount(inv, weights=np.concatenate(counts), minlength=u.size).astype(np.int64)


__all__ = ["WINDOW_FRAMES", "FrameWindows"]
