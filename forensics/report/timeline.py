"""A timeline a user can zoom: one replay as a Chrome trace-event file (``timeline.json``).

The file is the JSON object form of the trace-event format (``{"traceEvents": [...]}``) that
Perfetto UI (ui.perfetto.dev, "Open trace file") and ``chrome://tracing`` open:

- one process per rank (``pid`` = rank + 1, named ``rank R`` by ``M`` ``process_name`` events),
  and one ``fleet`` process (``pid`` = ranks + 1) above them;
- on each rank's ``iterations`` thread a complete slice (``ph: "X"``) per iteration, with the
  batch size, active/expected requests and the real requests per state as ``args``;
- a ``requests`` counter (``ph: "C"``) per rank: ``active`` and ``expected``;
- on each rank's ``dummies`` thread(s) a slice per dummy of the replay's ledger, from its birth
  to its removal, the crash, or the end of the recording;
- a flow arrow (``ph: "s"`` then ``"f"``, one ``id``, ``bp: "e"``) from each leaked dummy at
  the first fleet-wide skip it survived to its rank's next iteration;
- instant events (``ph: "i"``, scope ``g``) for every fleet-wide skip and for the crash.

There is no wall clock in a trace: the time axis is the iteration number, one iteration a
millisecond (``ts`` = iteration x 1000 us).

Thinning, as the figures do it (``forensics.report.windows``): a long run is drawn in detail
(one slice and one counter sample per iteration and rank) inside windows around the crash,
the leaks, the skips and the fleet's peak load; between them each rank gets one slice and one
counter sample per block of iterations, holding the block's maxima. ``otherData.thinning`` says which iterations
are in detail and how large the blocks are. Dummies, skips and the crash are never thinned.

Example:
    >>> trace = timeline(results["fix-16279"])        # doctest: +SKIP
    >>> write_timeline("report/timeline.json", trace)  # doctest: +SKIP
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from forensics.version import __version__
from forensics.output_dir import write_atomic
from forensics.report.windows import IterWindows, choose_windows
from replay.frame_windows import FrameWindows
from replay.results import ReplayResult
from replay.states import ALL_STATES, NUM_STATES

#: The file ``postmortem`` writes beside the report.
TIMELINE_FILE = "timeline.json"
#: Trace microseconds per iteration (the time axis is the iteration number, in ms).
US_PER_ITER = 1000
#: A run no longer than this many iterations is drawn whole, in detail.
DETAIL_MAX_FULL = 2000
#: Iterations drawn in detail either side of the crash, a leak or a skip.
DETAIL_RADIUS = 50
#: At most this many detail windows (the earliest interesting iterations win).
DETAIL_MAX_SEGMENTS = 12
#: Outside the detail windows, at most about this many blocks per rank over the run.
MAX_BLOCKS = 1000

#: Thread ids within a rank's process.
ITER_TID = 1
DUMMY_TID = 2        # the first dummy lane; overlapping dummies take further lanes

_DECISION_COLUMNS = ["iter", "rank", "active", "expected", "batch", "real", "padded",
                     "can_queue", "crash"]
_STATE_NAMES = [s.name for s in ALL_STATES]
#: Where :func:`story_timeline_json` splices the thinned events into the encoded document.
_SPLICE = "\x00thinned events\x00"


def timeline(result: ReplayResult, *, title: str | None = None) -> dict[str, Any]:
    """The trace-event document of one replay (a pure function of the result).

    Args:
        result: a replay (``replay.walk.run_all`` / ``replay_windows``) of one policy.
        title: shown in ``otherData``; default ``"RUN under POLICY"``.

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``.
    """
    thinned, at, doc = _document(result, title)
    if thinned:
        doc["traceEvents"][at:at] = json.loads(f"[{thinned}]")
    return doc


def _document(result: ReplayResult, title: str | None) -> tuple[str, int, dict[str, Any]]:
    """``(thinned, at, document)``: :func:`timeline`'s document without the thinned events,
    which come as JSON text (:func:`_block_events`) to go in at ``traceEvents[at]``."""
    R = int(result.config.tp_size)
    fleet_pid = R + 1
    iters = _iterations(result)
    crash = result.crash
    ledger = result.ledger
    focus = _focus(result, iters)
    win = choose_windows(iters, focus, radius=DETAIL_RADIUS, max_full=DETAIL_MAX_FULL,
                         max_segments=DETAIL_MAX_SEGMENTS)
    lo, hi = (int(iters.min()), int(iters.max())) if iters.size else (0, -1)
    block = max(1, math.ceil((hi - lo + 1) / MAX_BLOCKS))
    skips = np.asarray(result.skipped_iters, np.int64)

    events: list[dict] = [_meta("process_name", fleet_pid, ITER_TID, name="fleet"),
                          _meta("process_sort_index", fleet_pid, ITER_TID, sort_index=-1),
                          _meta("thread_name", fleet_pid, ITER_TID, name="skips and crash")]
    lane_of = _lane_of(ledger, crash, hi)
    lanes = _lanes_per_rank(ledger, lane_of)
    for r in range(R):
        events += [_meta("process_name", r + 1, ITER_TID, name=f"rank {r}"),
                   _meta("process_sort_index", r + 1, ITER_TID, sort_index=r),
                   _meta("thread_name", r + 1, ITER_TID, name="iterations")]
        for lane in range(lanes.get(r, 0)):
            events.append(_meta("thread_name", r + 1, DUMMY_TID + lane,
                                name="dummies" + (f" {lane + 1}" if lane else "")))

    events += _detail_events(result, win)
    thinned, at = _block_events(result, win, block, skips, lo, hi), len(events)
    events += _dummy_events(result, ledger, lane_of, crash, hi)
    for s in skips:
        events.append({"name": "fleet skip (can_queue False)", "cat": "skip", "ph": "i", "s": "g",
                       "ts": int(s) * US_PER_ITER, "pid": fleet_pid, "tid": ITER_TID,
                       "args": {"iter": int(s)}})
    if crash is not None:
        events.append({"name": f"crash on rank {crash.rank}: {crash.kind}", "cat": "crash",
                       "ph": "i", "s": "g", "ts": int(crash.iter) * US_PER_ITER,
                       "pid": fleet_pid, "tid": ITER_TID,
                       "args": {"iter": int(crash.iter), "ranks": [int(x) for x in crash.ranks],
                                "kind": crash.kind, "expected": int(crash.expected),
                                "active": int(crash.active), "message": crash.message}})
    detail = [[int(a), int(b)] for a, b in win.segments]
    whole = len(detail) == 1 and detail[0] == [lo, hi]
    return thinned, at, {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "tool": f"adp-forensics {__version__}",
            "title": title or f"{result.run} under {result.policy.name}",
            "run": result.run, "policy": result.policy.name, "ranks": R,
            "iterations": [lo, hi],
            "time_axis": f"ts = iteration x {US_PER_ITER} us (one iteration a millisecond; "
                         "a trace has no wall clock)",
            "pids": f"pid = rank + 1; pid {fleet_pid} is the fleet (skips, crash)",
            "thinning": {
                "thinned": not whole,
                "detail_iterations": detail,
                "block_iterations": block,
                "note": ("every iteration in detail" if whole else
                         "one slice and one counter sample per rank and iteration inside "
                         "detail_iterations (windows around the crash, the leaks, the skips "
                         "and the peak load, as the report's figures draw them); outside them one slice "
                         f"and one counter sample per rank per block of up to {block} "
                         "iterations, with the block's maxima. Dummies, skips and the crash "
                         "are never thinned."),
            },
        },
    }


def timeline_json(trace: Mapping[str, Any]) -> bytes:
    """The document as compact JSON bytes."""
    return (json.dumps(trace, separators=(",", ":")) + "\n").encode()


def write_timeline(path: str | os.PathLike, trace: Mapping[str, Any]) -> None:
    """Write the document to ``path`` atomically (the old file or the new one, never half)."""
    write_atomic(path, timeline_json(trace))


def story_timeline_json(results: Mapping[str, ReplayResult], policy: str | None) -> bytes:
    """``timeline.json`` of a post-mortem: the timeline of :func:`story_result` as bytes
    (:func:`timeline_json` of :func:`timeline`), the thinned events spliced in as the text
    they were written as, never made into dicts."""
    thinned, at, doc = _document(story_result(results, policy), None)
    if not thinned:
        return timeline_json(doc)
    # The events before ``at`` are this module's own (names, detail slices): the first
    # occurrence of the placeholder, which no JSON string of them can hold, is the one.
    doc["traceEvents"].insert(at, _SPLICE)
    text = timeline_json(doc).decode()
    return text.replace(json.dumps(_SPLICE), thinned, 1).encode()


def story_result(results: Mapping[str, ReplayResult], policy: str | None) -> ReplayResult | None:
    """The replay a post-mortem's timeline shows: ``policy`` (the one that tells the story)
    when given, else the first; None without replays."""
    if not results:
        return None
    return results.get(policy) if policy in results else next(iter(results.values()))


# --- pieces ---------------------------------------------------------------------------------------

def _meta(kind: str, pid: int, tid: int, **args: Any) -> dict:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _iterations(result: ReplayResult) -> np.ndarray:
    frames = result.frames
    if frames is not None and getattr(frames, "iters", None) is not None:
        return np.asarray(frames.iters, np.int64)
    parts = [_ints(b.column(0)) for b in result.decision_batches(["iter"])]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _focus(result: ReplayResult, iters: np.ndarray) -> list[int]:
    """Interesting iterations, most important first: the crash, the leaks, the skips, then the
    fleet's peak load (so a long clean run shows its busiest stretch, as the figures do)."""
    out: list[int] = []
    if result.crash is not None:
        out.append(int(result.crash.iter))
    for lk in sorted(result.leak_records, key=lambda lk: lk.iter_skipped):
        out += [int(lk.iter_skipped), int(lk.iter_created)]
    out += [int(s) for s in result.skipped_iters]
    if iters.size:
        lo = int(iters.min())
        load = np.zeros(int(iters.max()) - lo + 1)
        for b in result.decision_batches(["iter", "active"]):
            active = np.nan_to_num(_floats(b.column(1)), nan=0.0)
            load += np.bincount(_ints(b.column(0)) - lo, weights=active,
                                minlength=load.size)[:load.size]
        out.append(lo + int(load.argmax()))
    return out


def _num(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _text(v: Any) -> str | None:
    return None if v is None or pd.isna(v) else str(v)


def _state_counts(result: ReplayResult, iters: np.ndarray) -> dict[tuple[int, int], dict]:
    """``{(iter, rank): {state name: real requests}}`` of some iterations."""
    frames = result.frames
    if frames is None or not iters.size:
        return {}
    sub = frames.at(iters) if isinstance(frames, FrameWindows) else frames
    if getattr(sub, "req_frame", None) is None:
        return {}
    R = sub.num_ranks
    sidx = sub.req_state_index
    ok = sidx >= 0
    hist = np.bincount(sub.req_frame[ok].astype(np.int64) * NUM_STATES + sidx[ok],
                       minlength=sub.iters.size * R * NUM_STATES).reshape(-1, R, NUM_STATES)
    wanted = np.isin(sub.iters, iters)
    out: dict[tuple[int, int], dict] = {}
    for i in np.flatnonzero(wanted):
        it = int(sub.iters[i])
        for r in range(R):
            nz = np.flatnonzero(hist[i, r])
            out[it, r] = {_STATE_NAMES[k]: int(hist[i, r, k]) for k in nz}
    return out


def _detail_events(result: ReplayResult, win: IterWindows) -> list[dict]:
    """A slice and a counter sample per rank and iteration inside the detail windows."""
    parts = [result.read_decisions([("iter", ">=", int(a)), ("iter", "<=", int(b))],
                                   columns=_DECISION_COLUMNS) for a, b in win.segments]
    parts = [p for p in parts if len(p)]
    if not parts:
        return []
    d = pd.concat(parts, ignore_index=True)
    states = _state_counts(result, np.unique(d["iter"].to_numpy(np.int64)))
    out = []
    for row in d.itertuples(index=False):
        it, r = int(row.iter), int(row.rank)
        ts = it * US_PER_ITER
        args: dict[str, Any] = {"iter": it, "batch": _num(row.batch), "active": _num(row.active),
                                "expected": _num(row.expected), "real": _num(row.real)}
        if (it, r) in states:
            args["states"] = states[it, r]
        flags = [name for name in ("padded", "crash") if _num(getattr(row, name))]
        if _num(row.can_queue) == 0:
            flags.append("skipped")
        if flags:
            args["flags"] = flags
        name = f"iter {it}" + (" (crash)" if "crash" in flags else
                               " (skipped)" if "skipped" in flags else "")
        out.append({"name": name, "cat": "iteration", "ph": "X", "ts": ts, "dur": US_PER_ITER,
                    "pid": r + 1, "tid": ITER_TID, "args": args})
        counter = {k: args[k] for k in ("active", "expected") if args[k] is not None}
        if counter:
            out.append({"name": "requests", "ph": "C", "ts": ts, "pid": r + 1, "tid": ITER_TID,
                        "args": counter})
    return out


def _block_events(result: ReplayResult, win: IterWindows, block: int, skips: np.ndarray,
                  lo: int, hi: int) -> str:
    """Outside the detail windows: one slice and one counter sample per rank per block of
    ``block`` iterations (blocks never straddle a detail window), with the block's maxima;
    the decisions' iterations lie within ``lo``..``hi``. The events as compact JSON text,
    comma-separated (:func:`timeline` parses it, :func:`story_timeline_json` splices it)."""
    starts = np.array([a for a, _ in win.segments], np.int64)
    ends = np.array([b for _, b in win.segments], np.int64)
    n_ranks = int(result.config.tp_size)
    groups = _BlockMaxima(starts, block, lo, hi, n_ranks, 3)
    for b in result.decision_batches(["iter", "rank", "active", "expected", "batch"]):
        it, rank = _ints(b.column(0)), _ints(b.column(1))
        # a streamed replay's row group is a window: whole iterations, ranks in order
        grid = _whole_iterations(it, rank, n_ranks)
        if grid:
            it = it[::n_ranks]
        seg = np.searchsorted(starts, it, side="right") - 1
        inside = (seg >= 0) & (it <= ends[np.maximum(seg, 0)]) if starts.size else \
            np.zeros(it.size, bool)
        if inside.all():
            continue
        keep = ~inside
        values = [_floats(b.column(k)) for k in (2, 3, 4)]
        if grid:
            groups.add_iterations(seg[keep] + 1, it[keep],
                                  [v.reshape(-1, n_ranks)[keep] for v in values])
        else:
            groups.add(seg[keep] + 1, it[keep], rank[keep], [v[keep] for v in values])
    ranks, first, last, n, (act, exp, bat) = groups.result()
    # One slice (and counter sample) per group, from plain lists: a fleet hour has ranks x
    # MAX_BLOCKS groups, and per-row pandas and NumPy calls cost most of the timeline
    # (measured on fleet-1h 32x10000: 0.9 s of its 2.6 s CPU).
    ordered = np.sort(skips)
    n_skips = (np.searchsorted(ordered, last, side="right")
               - np.searchsorted(ordered, first, side="left")).tolist()
    columns = zip(ranks.tolist(), first.tolist(), last.tolist(), n.tolist(), _json_ints(act),
                  _json_ints(exp), _json_ints(bat), n_skips)
    # Written as JSON text, not dicts: a fleet hour has ~30k of these events, and building
    # and encoding them as dicts cost ~0.5 s CPU of the post-mortem's timeline (measured on
    # fleet-1h 32x100k); the keys are in the order json.dumps would write a dict's.
    out = []
    for r, a, b, n, active, expected, batch, skipped in columns:
        ts, pid = a * US_PER_ITER, r + 1
        out.append(f'{{"name":"iters {a}-{b} (thinned)","cat":"thinned","ph":"X","ts":{ts},'
                   f'"dur":{(b - a + 1) * US_PER_ITER},"pid":{pid},"tid":{ITER_TID},'
                   f'"args":{{"iterations":[{a},{b}],"frames":{n},"max_active":{active},'
                   f'"max_expected":{expected},"max_batch":{batch},"fleet_skips":{skipped}}}}}')
        counter = ",".join(f'"{k}":{v}' for k, v in (("active", active), ("expected", expected))
                           if v != "null")
        if counter:
            out.append(f'{{"name":"requests","ph":"C","ts":{ts},"pid":{pid},'
                       f'"tid":{ITER_TID},"args":{{{counter}}}}}')
    return ",".join(out)


class _BlockMaxima:
    """Per (gap, block, rank) group of decision rows: the first and last iteration, the rows,
    and the largest value of some columns (missing values left out; none: NaN), accumulated
    row group by row group into arrays over the groups that can occur: what a pandas
    ``groupby(...).agg`` of each row group and again of their concatenation gave, in the same
    (sorted) order, without the frames.

    A block of iterations lies in the gaps between the detail windows that its first and
    last iterations are in (``starts``: the windows' first iterations), so the groups are
    numbered block by block, gap by gap within a block: a few more than blocks x ranks."""

    def __init__(self, starts: np.ndarray, block: int, lo: int, hi: int, ranks: int,
                 columns: int):
        self.starts, self.block, self.ranks = starts, block, ranks
        self.lo = lo // block
        blocks = np.arange(self.lo, hi // block + 1, dtype=np.int64)
        self.gap0 = np.searchsorted(starts, blocks * block, side="right")
        spans = np.searchsorted(starts, (blocks + 1) * block - 1, side="right") - self.gap0 + 1
        self.offset = np.concatenate([[0], np.cumsum(spans)])
        size = int(self.offset[-1]) * ranks
        self.first = np.full(size, np.iinfo(np.int64).max, np.int64)
        self.last = np.full(size, np.iinfo(np.int64).min, np.int64)
        self.rows = np.zeros(size, np.int64)
        self.maxima = [np.full(size, np.nan) for _ in range(columns)]

    def _group(self, gap: np.ndarray, it: np.ndarray) -> np.ndarray:
        """The (gap, block) group of iterations ``it`` in gaps ``gap``, ascending with them."""
        b = it // self.block - self.lo
        return self.offset[b] + gap - self.gap0[b]

    def add(self, gap: np.ndarray, it: np.ndarray, rank: np.ndarray,
            values: list[np.ndarray]) -> None:
        key = self._group(gap, it) * self.ranks + rank
        np.minimum.at(self.first, key, it)
        np.maximum.at(self.last, key, it)
        self.rows += np.bincount(key, minlength=self.rows.size)
        for out, v in zip(self.maxima, values):
            np.fmax.at(out, key, v)

    def add_iterations(self, gap: np.ndarray, it: np.ndarray, values: list[np.ndarray]) -> None:
        """:meth:`add` of whole iterations (``it`` ascending, each with one row per rank in
        rank order: ``values`` are ``(iterations, ranks)``): the groups of consecutive
        iterations are runs, reduced along them instead of scattered row by row with
        ``ufunc.at``: the timeline of 64 ranks x 100k iterations took 0.81-0.88 s CPU instead of
        1.01-1.04 s (3 alternating runs each, measured), the same bytes."""
        group = self._group(gap, it)
        cut = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        end = np.r_[cut[1:], group.size]
        keys = (group[cut] * self.ranks)[:, None] + np.arange(self.ranks)
        self.first[keys] = np.minimum(self.first[keys], it[cut][:, None])
        self.last[keys] = np.maximum(self.last[keys], it[end - 1][:, None])
        self.rows[keys] += (end - cut)[:, None]
        for out, v in zip(self.maxima, values):
            out[keys] = np.fmax(out[keys], np.fmax.reduceat(v, cut, axis=0))

    def result(self):
        """``(ranks, first, last, rows, [maxima of each column])`` per group with rows, in
        (gap, block, rank) order."""
        used = np.flatnonzero(self.rows)
        rank = used % self.ranks
        pair = used // self.ranks
        b = np.searchsorted(self.offset, pair, side="right") - 1
        gap = self.gap0[b] + pair - self.offset[b]
        order = np.lexsort((rank, b, gap))
        used = used[order]
        return (rank[order], self.first[used], self.last[used], self.rows[used],
                [m[used] for m in self.maxima])


def _whole_iterations(it: np.ndarray, rank: np.ndarray, ranks: int) -> bool:
    """Whether rows ``it``, ``rank`` are whole iterations in ascending order, each one row per
    rank in rank order (what :meth:`_BlockMaxima.add_iterations` takes)."""
    if not it.size or it.size % ranks:
        return False
    its, rs = it.reshape(-1, ranks), rank.reshape(-1, ranks)
    return bool((rs == np.arange(ranks)).all() and (its == its[:, :1]).all()
                and (its[1:, 0] > its[:-1, 0]).all())


def _ints(values: pa.Array) -> np.ndarray:
    """An integer column (iterations, ranks) as int64, without a copy when it is one."""
    return np.asarray(values.to_numpy(zero_copy_only=False), np.int64)


def _floats(values: pa.Array) -> np.ndarray:
    """A numeric column as float64, NaN where missing (``pd.to_numeric(errors="coerce")``):
    a cast in Arrow for the numbers and flags a replay writes (no pandas Series per row
    group), pandas for anything else."""
    t = values.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    return pd.to_numeric(values.to_pandas(), errors="coerce").to_numpy(np.float64, na_value=np.nan)


def _json_ints(values: np.ndarray) -> list[str]:
    """Every value as JSON (floats holding ints; NaN where missing: ``null``), at once."""
    missing = np.isnan(values)
    ints = np.where(missing, 0, values).astype(np.int64).tolist()
    return ["null" if m else str(v) for v, m in zip(ints, missing.tolist())]


def _dummy_end(row: Any, crash, last: int) -> tuple[int, str]:
    """The iteration after a dummy's last one on its rank, and how its life ended."""
    removed = _num(row.iter_removed)
    if removed is not None:
        return removed + 1, "removed"
    if crash is not None and int(row.rank) in crash.ranks:
        return int(crash.iter) + 1, "crash"
    return last + 1, "alive when the recording ends"


def _lane_of(ledger: pd.DataFrame, crash, last: int) -> dict[int, int]:
    """Each dummy's lane on its rank: the first whose last dummy ended before it was born."""
    free: dict[int, list[int]] = {}
    lane: dict[int, int] = {}
    for row in ledger.sort_values(["rank", "iter_created", "dummy"], kind="stable").itertuples(
            index=False):
        end, _ = _dummy_end(row, crash, last)
        ends = free.setdefault(int(row.rank), [])
        born = int(row.iter_created)
        k = next((j for j, e in enumerate(ends) if e <= born), len(ends))
        if k == len(ends):
            ends.append(end)
        else:
            ends[k] = end
        lane[int(row.dummy)] = k
    return lane


def _lanes_per_rank(ledger: pd.DataFrame, lanes: dict[int, int]) -> dict[int, int]:
    """Lanes (dummy threads) each rank needs."""
    out: dict[int, int] = {}
    for dummy, rank in zip(ledger["dummy"], ledger["rank"]):
        out[int(rank)] = max(out.get(int(rank), 0), lanes[int(dummy)] + 1)
    return out


def _dummy_events(result: ReplayResult, ledger: pd.DataFrame, lanes: dict[int, int], crash,
                  last: int) -> list[dict]:
    """A slice per dummy of the ledger (on its lane), and a flow across the first skip each
    leaked one survived (from its slice at the skip to its rank's next iteration)."""
    first_skip = {int(lk.dummy): int(lk.iter_skipped) for lk in result.leak_records}
    out = []
    for row in ledger.itertuples(index=False):
        k, r, born = int(row.dummy), int(row.rank), int(row.iter_created)
        end, how = _dummy_end(row, crash, last)
        tid = DUMMY_TID + lanes[k]
        out.append({"name": f"dummy {k} ({row.role})", "cat": "dummy", "ph": "X",
                    "ts": born * US_PER_ITER, "dur": max(end - born, 1) * US_PER_ITER,
                    "pid": r + 1, "tid": tid,
                    "args": {"dummy": k, "origin": _text(row.origin), "role": _text(row.role),
                             "iter_created": born, "iter_removed": _num(row.iter_removed),
                             "end": how, "removal_path": _text(row.removal_path),
                             "skips_survived": _num(row.skips_survived),
                             "leaked": bool(_num(row.leaked))}})
        s = first_skip.get(k)
        if s is not None and born <= s < end - 1:
            common = {"name": "carried across the skip", "cat": "leak", "id": k, "pid": r + 1}
            out.append({**common, "ph": "s", "ts": s * US_PER_ITER + US_PER_ITER // 2,
                        "tid": tid})
            out.append({**common, "ph": "f", "bp": "e",
                        "ts": (s + 1) * US_PER_ITER + US_PER_ITER // 2, "tid": ITER_TID})
    return out


__all__ = ["TIMELINE_FILE", "story_result", "story_timeline_json", "timeline", "timeline_json",
           "write_timeline"]
