"""A window's request rows reduced to its frame grids by numpy: the specification of the
compiled builder (``replay.frame_build.build_requests``), and the path for small windows, for
the time before the kernel is built, and for the inputs the kernel declines (scattered ids, an
id on two ranks, a rank outside the run). ``RunFrames.from_parts`` (``replay.frames``) turns
the grids into its arrays; tests/replay/test_frame_counts.py holds both paths equal.
"""
from __future__ import annotations

import numpy as np

from replay.first_seen import ROW_SLICE, SeenBefore, first_seen, new_on_rank
from replay.frame_counts import counts, frame_counts
from replay.states import RequestState, state_index


def request_grids(requests: tuple[np.ndarray, ...], kept: np.ndarray, R: int, first_iter: int,
                  seen: SeenBefore | None, selections: list[tuple[np.ndarray, bool]],
                  before_selection: int):
    """``replay.frame_build.build_requests``' result by numpy (its specification): the rows in
    a kept iteration in frame order, their flat frame index, first seen and state column, per
    frame the rows of each selection and the latest first seen. ``before_selection``: which
    selection counts the rows before CONTEXT_INIT (an unknown state's row counts by its value)."""
    I = kept.size
    # Compact dtypes and in-place steps keep the peak near the arrays themselves (a fleet-hour
    # run holds tens of millions of requests).
    r_iter, r_rank, r_id, r_state, r_pos = requests
    # First iteration each request id appeared on its rank (over every frame of the run).
    first = first_seen(r_rank, r_id, r_iter, R, seen)
    # Flat frame index i * R + r: int32 when the grid allows (4 bytes a request, not 8).
    flat_dtype = np.int32 if I * R < 2 ** 31 else np.int64
    r_flat = np.zeros(r_iter.size, flat_dtype)
    rok = np.zeros(r_iter.size, bool)
    if I:
        # Row of each request's iteration: a table over the kept iterations' span when it is
        # no longer than the requests (a window's), else a binary search (measured on
        # fleet-1h 32x20000: 0.25 -> 0.03 s CPU over its 10 windows).
        span = int(kept[-1]) - int(kept[0]) + 1
        row_of = None
        if span <= max(r_iter.size, 1 << 16):
            row_of = np.full(span + 2, -1, flat_dtype)   # -1: not kept (either end: outside)
            row_of[kept - kept[0] + 1] = np.arange(I, dtype=flat_dtype)
        for a in range(0, r_iter.size, ROW_SLICE):  # slices: no int64 temporaries of N rows
            it = r_iter[a:a + ROW_SLICE]
            if row_of is not None:
                at = np.clip(it - (int(kept[0]) - 1), 0, span + 1)
                at = row_of[at]
                rok[a:a + it.size] = at >= 0
            else:
                at = np.minimum(np.searchsorted(kept, it), I - 1)
                rok[a:a + it.size] = kept[at] == it
            r_flat[a:a + it.size] = at
    if not rok.all():
        r_rank, r_id, r_state, r_pos, first, r_iter, r_flat = (
            a[rok] for a in (r_rank, r_id, r_state, r_pos, first, r_iter, r_flat))
    del rok
    r_flat *= R
    r_flat += r_rank
    del r_rank
    if not in_frame_order(r_flat, r_pos):  # usually already in order
        order = frame_order(r_flat, r_pos)
        r_flat, r_id, r_state, r_pos, first, r_iter = (a[order] for a in
                                                       (r_flat, r_id, r_state, r_pos, first, r_iter))
        del order
    n = I * R
    # Each row's state as a histogram column, once: every count below selects rows by state.
    sidx = state_index(r_state).astype(np.int8)
    is_new = new_on_rank(first, r_iter, first_iter)
    grids = frame_counts(r_flat, sidx, is_new, n, selections)
    del is_new
    if (sidx < 0).any():   # an unknown state: whether it is before CONTEXT_INIT is its value's
        grids[before_selection] = counts(
            r_flat, n, lambda a, b: r_state[a:b] < int(RequestState.CONTEXT_INIT))
    mfs = np.full(n, -1, np.int64)
    if r_flat.size:
        np.maximum.at(mfs, r_flat, first) if r_flat.size < 4096 else segment_max(mfs, r_flat, first)
    return r_flat, r_id, r_state, r_pos, first, sidx, grids, mfs, True


def frame_order(flat: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The permutation putting rows in (frame, list position) order, stable."""
    key = flat.astype(np.int64) * (int(pos.max()) + 1 if pos.size else 1) + pos
    return np.argsort(key, kind="stable")


def in_frame_order(flat: np.ndarray, pos: np.ndarray) -> bool:
    """True when rows are sorted by (frame, list position); checked in slices, no key array."""
    for a in range(0, flat.size - 1, ROW_SLICE):
        b = min(a + ROW_SLICE + 1, flat.size)
        f0, f1 = flat[a:b - 1], flat[a + 1:b]
        if not ((f1 > f0) | ((f1 == f0) & (pos[a + 1:b] >= pos[a:b - 1]))).all():
            return False
    return True


def segment_max(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``out[index] = max(out[index], values)`` for sorted ``index`` (vectorised ``maximum.at``)."""
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    mx = np.maximum.reduceat(values, starts)
    out[index[starts]] = np.maximum(out[index[starts]], mx)


__all__ = ["frame_order", "in_frame_order", "request_grids", "segment_max"]
