"""A run replayed window by window in bounded memory, and the choice to stream a run at all.

:func:`replay_windows` walks every policy over a run's windows (:class:`replay.frames.
FrameWindows`) in one pass: each policy's :class:`StreamReplay` carries its dummies across the
window edges (``replay.walk.Carry``) so the result is the whole-run ``replay.walk.run``'s, a
window's decisions and ledger rows go to Parquet files as they are decided
(``replay.table_storage.TableWriter``), windows several policies decide alike are written once
(:class:`SharedWindows`), and threads decide the policies of a window while the next is read.
:func:`replay_input` replays a dataset or raw inputs, streamed when the run is long
(:func:`stream_windows`), in memory otherwise.
"""
from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from replay.config import RunConfig
from replay.decision_tables import (
    decisions_arrow,
    empty_tables,
    leak_record,
    ledger_frame,
)
from replay.feed import readers
from replay.frame_windows import FrameWindows
from replay.frames import RunFrames
from replay.heap import TrimPast, release_arrow, usable_cores
from replay.model_variants import combine_model_variants, model_variants
from replay.policy import Policy
from replay.resolve import resolve_policies, resolve_policy
from replay.results import Crash, Divergence, Leak, ReplayResult
from replay.shared_windows import SharedWindows, column_digests
from replay.stage_clock import CLOCK
from replay.step import REMOVAL_PATH_NAMES
from replay.table_storage import Piece, TableWriter
from replay.walk import (
    Carry,
    Rows,
    WalkState,
    crash_record,
    cut_rows,
    decides_alike,
    first_divergence,
    replay_notes,
    run_all,
    skipped_iters,
    walk_fast,
    walk_hooked,
)


def replay_input(inputs, policies: Iterable[Policy | str] | None = None, *, run: str | None = None,
                 cache_dir=None, directory: str | Path | None = None,
                 window: int | None = None) -> dict[str, ReplayResult]:
    """Replay a dataset or raw inputs (ingested on the fly) under several policies.

    A run of more than ``STREAM_MIN_FRAMES`` frames is streamed (:func:`replay_windows`):
    memory holds one window, decisions and ledgers go to Parquet files read when used; the
    results are the same as in memory.

    Args:
        inputs: a dataset directory, or files ``forensics ingest`` accepts.
        policies: policy names/specs (default: the whole catalogue).
        run: the run to replay when the input holds several.
        cache_dir: where raw inputs are ingested (default: a temporary directory).
        directory: where a streamed replay writes its files (default: a temporary directory
            removed once no result uses it); given, the replay is always streamed.
        window: iterations per window (default ``replay.frame_windows.WINDOW_FRAMES`` frames); a
            run longer than one window of this size is streamed.

    Raises:
        ReplayError: bad input (``forensics.errors.ForensicsError``, exit code 2 in the CLI);
            NoReaderError when no reader is installed (``replay.feed``).
    """
    pols = resolve_policies(list(policies) if policies else None)  # bad names fail before ingest
    ds = readers().as_dataset(inputs, cache_dir=cache_dir)
    windows = stream_windows(ds, run, window, always=directory is not None)
    if windows is not None:
        return replay_windows(windows, pols, directory)
    frames = RunFrames.from_dataset(ds, run=run)
    return run_all(frames, pols)


#: Runs of more frames than this are replayed in windows (:func:`replay_windows`) by
#: :func:`replay_input` and ``forensics fleet``: in memory a frame costs ~0.7 KB with its
#: decisions, so this bounds a replay to a few hundred MB; shorter runs stay in memory, where
#: a replay costs less CPU.
STREAM_MIN_FRAMES = 1 << 19


def stream_windows(ds: Any, run: str | None = None, window: int | None = None, *,
                   always: bool = False):
    """The run as :class:`replay.frame_windows.FrameWindows` when it should be streamed (more than
    ``STREAM_MIN_FRAMES`` frames, or a ``window`` smaller than the run, or ``always``), else
    None (replay it in memory). Datasets of other readers (no ``batches``) are not windowed."""
    if not hasattr(ds, "batches"):
        return None
    windows = FrameWindows(ds, run=run, size=window)
    frames = len(windows.iters) * windows.num_ranks
    if always or (window is not None and len(windows) > 1) or frames > STREAM_MIN_FRAMES:
        return windows
    return None


#: Growth of the resident size past which a streamed replay trims the heap between windows
#: (``replay.heap.TrimPast``): above what a window of ``WINDOW_FRAMES`` frames frees (40-115
#: MiB on fleet-1h 32x100k, measured), so most windows reuse the last one's pages.
TRIM_GROWTH_BYTES = 128 << 20


class StreamReplay:
    """One policy replayed window after window (:class:`replay.frame_windows.FrameWindows`).

    The dummies alive after a window's last row (:class:`Carry`) enter the next window's first
    row, and the ledger keeps the dummies not yet removed open across the edge, so the result
    is the whole-run :func:`run`'s, while memory holds one window. Decisions and ledger rows go
    to Parquet files as each window is decided (``replay.table_storage.TableWriter``).
    """

    def __init__(self, policy: Policy, config: RunConfig, directory: str | Path,
                 shared: SharedWindows | None = None):
        self.policy, self.config = policy, config
        R = config.tp_size
        directory = Path(directory)
        empty_dec, empty_led = empty_tables()
        self._shared = shared
        self._pieces: list[Piece] = []
        # Reads of the decisions filter row groups by iteration (windows of a figure, a chain).
        self._dec = TableWriter(directory / "decisions.parquet", empty_dec.copy(),
                                statistics=["iter"])
        self._led = TableWriter(directory / "ledger.parquet", empty_led.copy(), sort_by="dummy")
        self._columns: dict[str, TableWriter] = {}
        self._ledger = _LedgerStream(R)
        self._carry = Carry(R)
        self._skipped: list[int] = []
        self._div: Divergence | None = None
        self.crash: Crash | None = None
        #: The window last decided by :meth:`feed` (``frames, rows, state, crash row,
        #: digest``), for the streams that :meth:`follow` this one; None once they have.
        self.decided: tuple | None = None

    @property
    def stopped(self) -> bool:
        return self.crash is not None

    def feed(self, frames: RunFrames) -> None:
        """Decide one window (the next in iteration order); nothing once the run crashed."""
        if self.stopped or not frames.num_iters:
            return
        with CLOCK.stage("replay decide"):
            st = WalkState(*frames.n_real.shape)
            walk = walk_fast if self.policy.pad_hook is None else walk_hooked
            crash_row = walk(frames, self.policy, self.config, st, self._carry)
            rows = cut_rows(frames, st, crash_row)
        self.decided = (frames, rows, st, crash_row, {})
        self._take(*self.decided)

    def follow(self, frames: RunFrames, lead: StreamReplay) -> None:
        """Take the window ``lead`` has just decided (:meth:`feed`) as this stream's own: a
        stream whose policy decides alike (``replay.walk.decides_alike``) is not walked."""
        if self.stopped or not frames.num_iters:
            return
        got, rows, st, crash_row, memo = lead.decided
        assert got is frames, "follow() takes the window its lead has just decided"
        self._take(frames, rows, st, crash_row, memo)

    def _take(self, frames: RunFrames, rows: Rows, st: WalkState, crash_row: int | None,
              memo: dict) -> None:
        """Write, record and ledger a window's decided rows. ``memo``: what the streams taking
        these rows compute alike from them alone (their digest, skips, first divergence, the
        ledger's arrays), computed by the first and read by the others; with
        :class:`SharedWindows`, by every stream whose rows have the same digest (all of those
        are read from the decision columns alone)."""
        with CLOCK.stage("replay write"):
            if self._shared is not None:
                if "digest" not in memo:
                    memo["digest"] = column_digests(rows.columns)
                memo = self._shared.memo((int(frames.iters[0]), rows.n, frames.num_ranks), memo)
            self._write_decisions(frames, rows, memo)
        with CLOCK.stage("replay decide"):
            if "skipped" not in memo:
                memo["skipped"] = skipped_iters(frames, rows)
            self._skipped.extend(memo["skipped"])
            if self._div is None:
                if "divergence" not in memo:
                    memo["divergence"] = first_divergence(frames, rows.o, rows.n, rows.stopped,
                                                          rows.crashed_row)
                self._div = memo["divergence"]
        with CLOCK.stage("ledger"):
            if "ledger" not in memo:
                memo["ledger"] = _LedgerWindow(frames, rows)
            self._ledger.feed(frames, rows, memo["ledger"], self._led)
        if crash_row is not None:
            self.crash = crash_record(frames, rows, st)

    def _write_decisions(self, frames: RunFrames, rows: Rows, memo: dict) -> None:
        """Write the window's decisions, or, when another stream of the replay decided the
        window alike (:class:`SharedWindows`), only note where its rows are, and write alone
        the few columns it decided otherwise."""
        if self._shared is None:
            self._dec.write(decisions_arrow(rows.columns))
            return
        iters = frames.iters[:rows.n]
        lo, hi, count = int(iters[0]), int(iters[-1]), rows.n * frames.num_ranks
        mine = Piece(self._dec.path, self._dec.rows, count, lo, hi)

        def patched(base: Piece, names: tuple[str, ...]) -> Piece:
            return dataclasses.replace(base, patches=tuple(
                Piece(self._column(c).path, self._column(c).rows, count, lo, hi, columns=(c,))
                for c in names))

        piece, write = self._shared.claim((lo, rows.n, frames.num_ranks), memo["digest"], mine,
                                          patched)
        self._pieces.append(piece)
        if write is None:
            self._dec.write(decisions_arrow(rows.columns))
            return
        for name in write:
            self._column(name).write(decisions_arrow({name: rows.columns[name]}))
        if len(self._pieces) == 1:
            self._dec.describe(decisions_arrow(rows.columns))

    def _column(self, name: str) -> TableWriter:
        """The file of this stream's decisions of column ``name`` written alone (a window
        decided like another stream's but for a few columns, :class:`SharedWindows`)."""
        w = self._columns.get(name)
        if w is None:
            path = self._dec.path.with_name(f"decisions.{name}.parquet")
            w = self._columns[name] = TableWriter(path, empty_tables()[0][[name]], statistics=[])
        return w

    def finish(self, windows: Any) -> ReplayResult:
        """The result (decisions and ledger read from the files when used)."""
        with CLOCK.stage("ledger"):
            leaks = self._ledger.finish(self._led)
        with CLOCK.stage("replay write"):
            decisions = self._dec.close(self._pieces if self._shared is not None else None)
            for w in self._columns.values():
                w.close()
            ledger = self._led.close()
        return ReplayResult(policy=self.policy, config=self.config, run=windows.run,
                            decisions=decisions, ledger=ledger, leaks=leaks,
                            crash=self.crash, skipped_iters=tuple(self._skipped),
                            first_divergence=self._div, notes=replay_notes(self.policy, self.config, windows.dropped_iters),
                            frames=windows, dropped_iters=windows.dropped_iters)


class _LedgerWindow:
    """A window's dummies as the ledger pairs them, from its rows alone (every stream taking the
    same rows shares one): each dummy created in the window (row-major, by (iter, rank)), the
    row of its removal if in the window (-1: none), and the surviving rows in between.

    Only the ranks a dummy lives on are summed: a window holds a few dummies, and a cumulative
    sum over every (iter, rank) cost 0.65 ms a window, the 2-D ``nonzero`` 0.13-0.19 ms each
    (measured on fleet-1h 32x100k: the ledger's 0.55 s CPU, 735 windows decided)."""

    def __init__(self, frames: RunFrames, rows: Rows):
        o, n, survives, removed = rows.o, rows.n, rows.survives, rows.removed
        R = survives.shape[1]
        self.iters = frames.iters[:n]
        self.survives = survives
        new = o["padded"] | o["postpadded"]
        self.ci, self.cr = ci, cr = np.divmod(np.flatnonzero(new.ravel()), R)  # by (iter, rank)
        ri, rr = np.divmod(np.flatnonzero(removed.ravel() != 0), R)
        stride = n + 1
        rkey = np.sort(rr.astype(np.int64) * stride + ri)
        pos = np.searchsorted(rkey, cr.astype(np.int64) * stride + ci, side="left")
        pos_c = np.minimum(pos, max(rkey.size - 1, 0))
        self.has_rm = has_rm = (pos < rkey.size) & (rkey[pos_c] // stride == cr) if rkey.size \
            else np.zeros(ci.size, bool)
        self.rm_row = rm_row = np.where(has_rm, rkey[pos_c] % stride if rkey.size else 0, -1)
        end_row = np.where(has_rm, rm_row, n - 1)
        ranks = np.unique(cr)
        cs = np.cumsum(survives[:, ranks], axis=0)        # (n, ranks with a new dummy)
        j = np.searchsorted(ranks, cr)
        self.skips = cs[end_row, j] - np.where(ci > 0, cs[np.maximum(ci - 1, 0), j], 0)
        self.origin = np.where(o["postpadded"][ci, cr], "postpad", "pad")
        self.role = np.where(o["role_context"][ci, cr] & o["padded"][ci, cr], "context",
                             "generation")

    def survived(self, rank: int, row: int) -> int:
        """Surviving rows of ``rank`` from the window's first row to ``row``, included."""
        return int(np.count_nonzero(self.survives[:row + 1, rank]))


class _LedgerStream:
    """The dummy ledger built window by window: ``ledger_table``'s pairing (a dummy is removed at the
    first removal on its rank at or after its creation row; its skips are the surviving rows in
    between) with the dummies still alive at a window's end kept open into the next."""

    def __init__(self, R: int):
        self.seq = 0
        self.open: list[dict] = []        # per open dummy: its ledger fields so far and its leak
        self.leaks: list[Leak] = []

    def feed(self, frames: RunFrames, rows: Rows, win: _LedgerWindow, out: TableWriter) -> None:
        """The window's dummies into the ledger (``win``: its arrays, :class:`_LedgerWindow`)."""
        n, removed, iters = rows.n, rows.removed, win.iters
        done: list[dict] = []
        still: list[dict] = []
        for d in self.open:                                  # dummies from earlier windows
            q = np.flatnonzero(removed[:, d["rank"]])
            if q.size:
                d["skips"] += win.survived(d["rank"], int(q[0]))
                d["iter_removed"] = int(iters[q[0]])
                d["path"] = REMOVAL_PATH_NAMES[int(removed[q[0], d["rank"]])]
                done.append(d)
            else:
                d["skips"] += win.survived(d["rank"], n - 1)
                still.append(d)
        o = rows.o
        ci, cr, has_rm, rm_row, skips = win.ci, win.cr, win.has_rm, win.rm_row, win.skips
        origin, role = win.origin, win.role
        seq = self.seq + np.arange(ci.size)
        self.seq += int(ci.size)
        for k in np.flatnonzero(~has_rm | (skips > 0)):      # open ones, and leaks: need the frames
            d = {"dummy": int(seq[k]), "rank": int(cr[k]), "iter_created": int(iters[ci[k]]),
                 "origin": str(origin[k]), "role": str(role[k]), "skips": int(skips[k]),
                 "iter_removed": None, "path": None,
                 "leak": leak_record(frames, o, int(ci[k]), int(cr[k]), str(role[k]), int(seq[k]))}
            if has_rm[k]:
                d["iter_removed"] = int(iters[rm_row[k]])
                d["path"] = REMOVAL_PATH_NAMES[int(removed[rm_row[k], cr[k]])]
                done.append(d)
            else:
                still.append(d)
        plain = has_rm & (skips == 0)                        # created and removed here, no skip
        if plain.any():
            out.write(ledger_frame(seq[plain], cr[plain], iters[ci[plain]], origin[plain], role[plain],
                                    [int(iters[a]) for a in rm_row[plain]],
                                    [REMOVAL_PATH_NAMES[int(removed[a, b])]
                                     for a, b in zip(rm_row[plain], cr[plain])],
                                    skips[plain], np.zeros(int(plain.sum()), bool)))
        self._close(done, out)
        self.open = still

    def _close(self, done: list[dict], out: TableWriter) -> None:
        if not done:
            return
        done.sort(key=lambda d: d["dummy"])
        out.write(ledger_frame([d["dummy"] for d in done], [d["rank"] for d in done],
                                [d["iter_created"] for d in done], [d["origin"] for d in done],
                                [d["role"] for d in done], [d["iter_removed"] for d in done],
                                [d["path"] for d in done], [d["skips"] for d in done],
                                [d["skips"] > 0 for d in done]))
        self.leaks.extend(d["leak"] for d in done if d["skips"] > 0)

    def finish(self, out: TableWriter) -> tuple[Leak, ...]:
        """Close the dummies alive at the end (or at the crash); the leaks in ledger order."""
        self._close(self.open, out)
        self.open = []
        return tuple(sorted(self.leaks, key=lambda lk: lk.dummy))


def replay_windows(windows: Any, policies: Iterable[Policy | str], directory: str | Path | None,
                   progress=None, threads: int | None = None) -> dict[str, ReplayResult]:
    """Replay a run under several policies in one pass over its windows, in bounded memory.

    Args:
        windows: :class:`replay.frame_windows.FrameWindows` of the run.
        policies: policies or specs.
        directory: where each policy's ``decisions.parquet`` and ``ledger.parquet`` go (one
            subdirectory per policy, numbered in the order given); None: a temporary directory
            removed once no result (or view of one) uses its files. A window decided alike by
            several policies is written once, in the first one's file (:class:`SharedWindows`):
            a policy's ``decisions.parquet`` holds the windows it decided first, and its
            result reads its rows wherever they are.
        progress: called with ``(window, windows)`` before each window.
        threads: threads deciding the policies of a window at once (default: the usable cores;
            1 when a policy has a ``pad_hook``); the next window is read meanwhile. Each policy's stream is its own state, so the
            results do not depend on it; NumPy, Arrow and the Parquet writes release the GIL.

    Returns:
        Results by policy name, equal to :func:`run_all`'s on the whole run; their decisions
        and ledger are read from the files when used (``ReplayResult.read_decisions``).
    """
    pols = [resolve_policy(p) for p in policies]
    cfg = windows.config
    owner = None
    if directory is None:
        import tempfile
        owner = tempfile.TemporaryDirectory(prefix="adp-replay-")
        directory = owner.name
    # A policy whose gates read a model the run does not name is streamed once per model
    # (replay.model_variants.model_variants), like run()'s replay both ways.
    streams: dict[str, list[tuple[str | None, StreamReplay]]] = {}
    models_of = {p.name: p.model_dependent(cfg) for p in pols}
    shared = SharedWindows()
    for i, p in enumerate(pols):
        base = Path(directory) / f"{i:02d}-{_file_name(p.name)}"
        models = models_of[p.name]
        if models:
            streams[p.name] = [(m, StreamReplay(p, c, base / f"model-{j}", shared))
                               for j, (m, c) in enumerate(model_variants(cfg, models))]
        else:
            streams[p.name] = [(None, StreamReplay(p, cfg, base, shared))]
    every = [s for group in streams.values() for _, s in group]
    # Streams whose policies decide alike (replay.walk.decides_alike) are walked once: the
    # first walks, the others take its rows (on fleet-1h, 24 streams in 15 such groups).
    groups: dict[Any, list[StreamReplay]] = {}
    for s in every:
        key = decides_alike(s.policy, s.config)
        groups.setdefault(id(s) if key is None else key, []).append(s)
    leads = list(groups.values())
    total = len(windows)
    n = max(1, min(threads or usable_cores(), len(leads)))
    if any(s.policy.pad_hook is not None for s in every):
        # a hook is Python (it holds the GIL: no gain) and may keep state that the model
        # variants of one policy share (the stand-in executor of real code): never two at once
        n = 1
    trim_heap = TrimPast(TRIM_GROWTH_BYTES)
    if n == 1:
        for k, frames in enumerate(windows):
            if progress is not None:
                progress(k, total)
            for group in leads:
                _feed_group(group, frames)
            del frames
            trim_heap()
            if all(s.stopped for s in every):
                break
    else:
        _feed_threaded(windows, leads, n, progress, total, trim_heap)
    out = {}
    for p in pols:
        group = streams[p.name]
        if len(group) == 1:
            out[p.name] = group[0][1].finish(windows)
        else:
            out[p.name] = combine_model_variants(p, cfg, models_of[p.name],
                                                 [(m, s.finish(windows)) for m, s in group])
    if owner is not None:
        for r in out.values():
            r.keep_files_with(owner)
    return out


def _feed_group(group: list, frames: Any) -> None:
    """A window to a group of streams deciding alike: the first walks it, the others follow."""
    lead = group[0]
    lead.feed(frames)
    for s in group[1:]:
        s.follow(frames, lead)
    lead.decided = None


def _feed_share(todo: Any, lock: Any, frames: Any) -> None:
    """Feed a window to the groups taken from ``todo`` (the window's groups, shared by the
    threads deciding it) until none is left, then hand back this thread's freed Arrow pages,
    once a window (after every group, the next group faulted them in again)."""
    while True:
        with lock:
            group = next(todo, None)
        if group is None:
            break
        _feed_group(group, frames)
    release_arrow()


def _feed_threaded(windows: Any, groups: list, n: int, progress, total: int,
                   trim_heap: TrimPast) -> None:
    """:func:`replay_windows`' loop with ``n`` threads feeding the groups of streams of a
    window and one reading the next window."""
    from concurrent.futures import ThreadPoolExecutor

    it = iter(windows)
    end = object()
    streams = [s for group in groups for s in group]
    predicates = list(dict.fromkeys(s.policy.predicate(s.config) for s in streams))

    def read_next():
        release_arrow()   # this thread's share of the last window's Arrow buffers
        frames = next(it, end)
        if frames is not end:
            with CLOCK.stage("frames"):
                for p in predicates:   # shared per-window caches, filled before the threads
                    frames.sched_real(p)   # share them (here, beside the deciding, not between)
        return frames

    with ThreadPoolExecutor(max_workers=n) as pool, ThreadPoolExecutor(max_workers=1) as reader:
        ahead = reader.submit(read_next)
        k = 0
        while True:
            frames = ahead.result()
            if frames is end:
                break
            if progress is not None:
                progress(k, total)
            live = [group for group in groups if not group[0].stopped]
            ahead = reader.submit(read_next)
            todo, lock = iter(live), threading.Lock()
            for f in [pool.submit(_feed_share, todo, lock, frames) for _ in range(n)]:
                f.result()
            del frames
            trim_heap()
            k += 1
            if all(s.stopped for s in streams):
                break
        ahead.cancel()


def _file_name(name: str) -> str:
    """A policy name as a file name (``trtllm:PATH@REV`` and ``py:FILE:FN`` hold separators)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60]


__all__ = ["STREAM_MIN_FRAMES", "SharedWindows", "StreamReplay", "replay_input", "replay_windows",
           "stream_windows"]
