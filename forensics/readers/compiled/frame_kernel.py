"""The compiled frame builder of ``replay.frame_build`` (imports numba: imported only to compile
it, once per install; later processes load its saved object, :mod:`.loader`). The conventions
of :mod:`.json_kernel`: ``cfunc`` entry points over raw pointers that allocate nothing (the
caller passes every array) and raise nothing; the numpy path, ``replay.request_grids``, is the
specification of every array they fill.
"""
import numba
import numpy as np
from numba import types

from replay.frame_build import BAD_RANK, SELECTIONS, SHARED_IDS, SIGNATURES

_ARG_TYPES = {"i": types.int64, "q": types.CPointer(types.int64),
              "l": types.CPointer(types.int32), "h": types.CPointer(types.int16),
              "c": types.CPointer(types.int8)}
FIRST_SIG, BUILD_SIG = (types.int64(*(_ARG_TYPES[c] for c in SIGNATURES[name]))
                        for name in ("first", "build"))
_BIG = np.iinfo(np.int64).max


@numba.njit(cache=True, nogil=True, _nrt=False)
def first_seen(rid, rank, it, lo, R, owner, first):
    """Each id's (``rid - lo``) rank and first iteration (``_BIG``: absent); ``BAD_RANK`` as
    soon as a rank is outside ``[0, R)``, ``SHARED_IDS`` as soon as an id is on two ranks,
    else 0 (``build`` indexes the frames by these ranks)."""
    for c in range(first.size):
        owner[c] = -1
        first[c] = _BIG
    for i in range(rid.size):
        c = rid[i] - lo
        r = rank[i]
        if r < 0 or r >= R:
            return BAD_RANK
        if owner[c] < 0:
            owner[c] = r
        elif owner[c] != r:
            return SHARED_IDS
        first[c] = min(first[c], it[i])
    return 0


@numba.njit(cache=True, nogil=True, _nrt=False)
def build(it, rank, rid, state, pos, first_tab, lo, row_of, k0, it_span, R, first_iter,
          index_table, class_bits, S, before_bit, context_init, o_flat, o_first32, o_first64,
          wide, o_sidx, counts, mfs, out):
    """Per row its flat frame index (-1: not in a kept iteration, ``row_of``), first seen
    (into ``o_first64`` when ``wide``, else ``o_first32``) and state column; per frame the
    rows of each selection (``counts``, ``(frames, SELECTIONS)`` row-major: a row's nine
    counters in one cache line; a selection's row each, 3x slower, measured) and the latest
    first seen ``mfs``; ``out``: the rows kept, whether they are in frame order."""
    m = 0
    ordered = 1
    prev_flat = -1
    prev_pos = 0
    for i in range(it.size):
        t = it[i]
        at = t - (k0 - 1)
        if at < 0:
            at = 0
        elif at > it_span + 1:
            at = it_span + 1
        row = row_of[at]
        f = first_tab[rid[i] - lo]
        s = state[i]
        col = index_table[s + 32768]
        o_sidx[i] = col
        if wide:
            o_first64[i] = f
        else:
            o_first32[i] = f
        if row < 0:
            o_flat[i] = -1
            continue
        flat = row * R + rank[i]
        o_flat[i] = flat
        new = 1 if (f == t and t != first_iter) else 0
        bits = class_bits[2 * (S if col < 0 else col) + new]
        if col < 0 and s < context_init:
            bits |= np.int64(1) << before_bit
        base = flat * SELECTIONS
        for k in range(SELECTIONS):   # a constant count: unrolled (twice as fast, measured)
            counts[base + k] += (bits >> k) & 1
        mfs[flat] = max(mfs[flat], f)
        p = pos[i]
        if flat < prev_flat or (flat == prev_flat and p < prev_pos):
            ordered = 0
        prev_flat, prev_pos = flat, p
        m += 1
    out[0] = m
    out[1] = ordered
    return 0


@numba.cfunc(FIRST_SIG, cache=True, nogil=True, error_model="numpy")
def first_c(rid, rank, it, n, lo, span, R, owner, first):
    """:func:`first_seen` over raw pointers."""
    return first_seen(numba.carray(rid, (n,)), numba.carray(rank, (n,)), numba.carray(it, (n,)),
                      lo, R, numba.carray(owner, (span,)), numba.carray(first, (span,)))


@numba.cfunc(BUILD_SIG, cache=True, nogil=True, error_model="numpy")
def build_c(it, rank, rid, state, pos, n, first_tab, lo, row_of, k0, it_span, R, first_iter,
            index_table, class_bits, S, before_bit, context_init, o_flat, o_first32, o_first64,
            wide, o_sidx, counts, frames, mfs, out):
    """:func:`build` over raw pointers (``first_tab``: one entry per id from ``lo``, as many
    as the rows at most; the unused ``o_first`` may be any array)."""
    return build(numba.carray(it, (n,)), numba.carray(rank, (n,)), numba.carray(rid, (n,)),
                 numba.carray(state, (n,)), numba.carray(pos, (n,)),
                 numba.carray(first_tab, (n,)), lo, numba.carray(row_of, (it_span + 2,)), k0,
                 it_span, R, first_iter, numba.carray(index_table, (1 << 16,)),
                 numba.carray(class_bits, (2 * S + 2,)), S, before_bit, context_init,
                 numba.carray(o_flat, (n,)), numba.carray(o_first32, (n - n * wide,)),
                 numba.carray(o_first64, (n * wide,)), wide, numba.carray(o_sidx, (n,)),
                 numba.carray(counts, (frames * SELECTIONS,)), numba.carray(mfs, (frames,)),
                 numba.carray(out, (2,)))


#: The entry points, by the names ``replay.frame_build`` calls them.
ENTRY_POINTS = {"first": first_c, "build": build_c}
