"""A window's request rows reduced to its frame grids in one compiled pass, when the pipeline
installed the compiled kernel (``replay.feed.frame_kernel``); else None and ``replay.frames``
takes the numpy path (``replay.request_grids``), which is the specification: the arrays are
equal value for value and dtype for dtype (tests/replay/test_frame_counts.py runs both).

Why: the numpy path makes a dozen passes over a window's million request rows (first seen,
frame index, state column, new on rank, a histogram per class of state, the latest first
seen): ~56 ms CPU a window on fleet-1h 32x100k, 2.7 s of its replay. The kernel makes two
(each request id's first iteration; then everything else), allocating nothing.

The kernel's entry points (:data:`SIGNATURES`) are compiled by the forensics pipeline's
machinery (``forensics.readers.compiled``: built once per machine in the background, loaded
with ``ctypes``), which this library does not import.
"""
from __future__ import annotations

import numpy as np

from replay.feed import frame_kernel
from replay.first_seen import SeenBefore
from replay.states import NUM_STATES

#: The C signatures of the kernel's entry points (``forensics.readers.compiled.frame_kernel``
#: builds both sides from them): each letter an argument, ``i`` an int64, the others pointers
#: to ``q`` int64, ``l`` int32, ``h`` int16, ``c`` int8; they return an int64.
SIGNATURES = {"first": "qlqiiiilq",
              "build": "qlqhliqilii" "iih" "qiii" "llqic" "qiqq"}

#: The selections ``build`` counts (``RunFrames.from_parts``' nine: a constant, so the compiled
#: loop over them is unrolled).
SELECTIONS = 9
#: Windows of fewer request rows take the numpy path without asking for the kernel (a few
#: milliseconds either way; a small run never loads it, nor starts its build).
MIN_ROWS = 1 << 16
#: ``first``'s status when some request id is on two ranks (the numpy path keys by rank then).
SHARED_IDS = 1
#: ``first``'s status when a request's rank is outside the run's (the numpy path takes it).
BAD_RANK = 2


def class_bits(selections: list[tuple[np.ndarray, bool]]) -> np.ndarray:
    """Per class of request row (``2 * state column + new``, an unknown state's column being
    ``NUM_STATES``), the selections counting it as bits: what ``frame_counts.frame_counts``
    picks for each class (an unknown state takes ``mask[-1]``)."""
    S = NUM_STATES
    bits = np.zeros(2 * S + 2, np.int64)
    for k, (mask, new_only) in enumerate(selections):
        m = np.asarray(mask, bool)
        for c in range(2 * S + 2):
            col, new = c // 2, bool(c % 2)
            pick = bool(m[-1]) if col == S else bool(m[min(col, m.size - 1)])
            if pick and (new or not new_only):
                bits[c] |= 1 << k
    return bits


def build_requests(requests: tuple[np.ndarray, ...], kept: np.ndarray, R: int, first_iter: int,
                   seen: SeenBefore | None, selections: list[tuple[np.ndarray, bool]],
                   before_bit: int, context_init: int, index_table: np.ndarray):
    """The request side of ``RunFrames.from_parts`` in the compiled kernel, or None (no kernel,
    fewer than :data:`MIN_ROWS` rows, request ids not dense or shared across ranks, a grid of
    2**31 frames or more: the numpy path then).

    Returns ``(flat, id, state, pos, first, sidx, counts, mfs, ordered)``: the rows in a kept
    iteration (in input order; ``ordered``: already in frame order), their flat frame index
    (int32), first-seen iteration (int32 when every value fits), state column (int8); per
    frame the rows of each selection (``counts[k]``, int64) and the latest first seen (-1:
    none). ``before_bit``: the selection of states before CONTEXT_INIT, which an unknown state
    joins by its value (below ``context_init``).
    """
    if len(selections) != SELECTIONS:
        raise ValueError(f"the compiled frame builder counts {SELECTIONS} selections")
    r_iter, r_rank, r_id, r_state, r_pos = requests
    n = int(r_iter.size)
    I = int(kept.size)
    if n < max(MIN_ROWS, 1) or not I or I * R >= 2 ** 31:
        return None
    k = frame_kernel()
    if k is None:
        return None
    lo, hi = int(r_id.min()), int(r_id.max())
    k0 = int(kept[0])
    it_span = int(kept[-1]) - k0 + 1
    # sparse ids (the numpy path hashes them) or iterations (it searches them)
    if hi - lo >= n or it_span > max(n, 1 << 16):
        return None
    # the kernel's dtypes (``real_requests``' already: no copy); the rows come back as given
    r_iter, r_rank, c_id, c_state, c_pos = (np.ascontiguousarray(a, dt) for a, dt in zip(
        requests, (np.int64, np.int32, np.int64, np.int16, np.int32)))
    span = hi - lo + 1
    owner = np.empty(span, np.int32)
    first = np.empty(span, np.int64)
    if _call(k, "first", c_id, r_rank, r_iter, n, lo, span, R, owner, first) != 0:
        return None   # SHARED_IDS or BAD_RANK
    big = np.iinfo(np.int64).max
    used = np.flatnonzero(first != big)
    if seen is not None:
        first[used] = seen.update(owner[used].astype(np.int64), used + np.int64(lo), first[used])
    it_lo, it_hi = int(r_iter.min()), int(r_iter.max())
    got = first[used]
    i32 = np.iinfo(np.int32)
    fits = it_lo >= i32.min and it_hi <= i32.max and int(got.min()) >= i32.min \
        and int(got.max()) <= i32.max
    row_of = np.full(it_span + 2, -1, np.int32)
    row_of[kept - k0 + 1] = np.arange(I, dtype=np.int32)
    frames = I * R
    o_flat = np.empty(n, np.int32)
    o_first = np.empty(n, np.int32 if fits else np.int64)
    o_sidx = np.empty(n, np.int8)
    counts = np.zeros(frames * SELECTIONS, np.int64)
    mfs = np.full(frames, -1, np.int64)
    out = np.zeros(2, np.int64)
    _call(k, "build", r_iter, r_rank, c_id, c_state, c_pos, n, first, lo, row_of, k0, it_span,
          R, first_iter, index_table, class_bits(selections), NUM_STATES, before_bit,
          context_init, o_flat, o_first, o_first, 0 if fits else 1, o_sidx, counts, frames,
          mfs, out)
    if int(out[0]) < n:   # rows outside the kept iterations (rare): dropped, in order
        keep = o_flat >= 0
        o_flat, r_id, r_state, r_pos, o_first, o_sidx = (
            a[keep] for a in (o_flat, r_id, r_state, r_pos, o_first, o_sidx))
    grids = np.ascontiguousarray(counts.reshape(frames, SELECTIONS).T)
    return o_flat, r_id, r_state, r_pos, o_first, o_sidx, list(grids), mfs, bool(out[1])


def _call(k, name: str, *args) -> int:
    """Entry point ``name`` with numpy arrays passed as pointers."""
    status = k[name](*(a.ctypes.data if isinstance(a, np.ndarray) else a for a in args))
    if k["failed"]():
        raise RuntimeError("the compiled frame builder returned an error (a bug: please report it)")
    return int(status)


__all__ = ["BAD_RANK", "MIN_ROWS", "SELECTIONS", "SHARED_IDS", "SIGNATURES", "build_requests",
           "class_bits"]
