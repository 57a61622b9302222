"""Per-frame counts of a run's requests: how many of a frame's real requests a selection of
states (and of new requests) holds, for the replay's ``(I, R)`` grids (``replay.frames``).

The requests are rows in frame order, each with its flat frame index ``i * R + r``, its state's
histogram column (``replay.states.state_index``) and whether it is new on its rank
(``replay.first_seen``). :func:`frame_counts` gives every count a window needs from one
histogram of its rows; :func:`counts` is one count of rows chosen by a mask.
"""
from __future__ import annotations

import numpy as np

from replay.first_seen import ROW_SLICE
from replay.states import NUM_STATES


def counts(flat: np.ndarray, n: int, select=None) -> np.ndarray:
    """``bincount(flat[mask], minlength=n)`` with ``mask = select(a, b)`` built slice by slice
    (bounded temporaries)."""
    out = np.zeros(n, np.int64)
    for a in range(0, flat.size, ROW_SLICE):
        f = flat[a:a + ROW_SLICE]
        out += np.bincount(f if select is None else f[select(a, a + f.size)], minlength=n)
    return out


def frame_counts(flat: np.ndarray, sidx: np.ndarray, is_new: np.ndarray, n: int,
                 selections: list[tuple[np.ndarray, bool]]) -> list[np.ndarray]:
    """Per frame, the rows of each selection ``(state mask, new only)``: what
    ``counts(flat, n, lambda a, b: mask[sidx[a:b]] & is_new[a:b])`` gives (without ``is_new``
    when not new only; ``mask[-1]`` for an unknown state, -1), for every selection at once.

    One histogram of the rows by (class, frame), a class being a state column and whether the
    row is new, then each selection a sum of class rows: one pass over the requests instead of
    one per count (measured on fleet-1h 32x20000: 0.44 -> 0.2 s CPU over its 10 windows).
    ``flat`` is sorted (frame order).
    """
    S = NUM_STATES
    outs = [np.zeros(n, np.int64) for _ in selections]
    if not flat.size:
        return outs
    masks = [(np.asarray(mask, bool), new_only) for mask, new_only in selections]
    # class = 2 * state column + new; an unknown state (-1) is column S
    column = np.full(256, 2 * S, np.uint8)
    column[:S] = 2 * np.arange(S, dtype=np.uint8)
    states = sidx.view(np.uint8)
    block = 1 << 16
    for f0 in range(0, n, block):
        f1 = min(n, f0 + block)
        a, b = (int(x) for x in np.searchsorted(flat, [f0, f1]))
        if a == b:
            continue
        code = column[states[a:b]]
        code += is_new[a:b]
        # only the classes present: a histogram of (class, frame), each class a row
        present = np.flatnonzero(np.bincount(code, minlength=2 * S + 2))
        compact = np.zeros(2 * S + 2, np.int64)
        compact[present] = np.arange(present.size)
        key = compact[code]
        del code
        key *= f1 - f0
        key += flat[a:b]
        key -= f0
        hist = np.bincount(key, minlength=present.size * (f1 - f0)).reshape(present.size, f1 - f0)
        del key
        cols, new = present // 2, (present % 2).astype(bool)
        for out, (m, new_only) in zip(outs, masks):
            pick = m[np.minimum(cols, m.size - 1)] if m.size > 1 else np.full(cols.size, m[0])
            pick[cols == S] = m[-1]
            if new_only:
                pick &= new
            rows = np.flatnonzero(pick)
            if rows.size:
                out[f0:f1] = hist[rows].sum(axis=0) if rows.size > 1 else hist[rows[0]]
    return outs


__all__ = ["counts", "frame_counts"]
