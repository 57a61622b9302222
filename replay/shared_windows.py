"""Windows of a streamed replay that several policies decide alike, written once.

A streamed replay (:mod:`replay.streaming`) writes each window's decisions as it is decided;
:class:`SharedWindows` finds the streams whose rows of a window are alike (by the XXH3-128
digests of their decision columns, :func:`column_digests`) so those rows are written once, and
rows alike but for a few columns have only those columns written.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import xxhash

from replay.table_storage import Piece


class SharedWindows:
    """The decisions of a window that several streams of one replay decide alike, written once.

    Policies often decide a window alike (on a fleet hour's run, 18 policy and model streams
    decide every window in one of 3 ways, measured): the first stream to decide a window's
    decisions writes them, and the others note where those rows are
    (``replay.table_storage.Piece``),
    so their results read the same rows. Alike means equal column arrays, compared by their
    XXH3-128 digests (:func:`column_digests`). A stream deciding a window otherwise in at most
    :attr:`PATCH_COLUMNS` columns writes those columns alone and reads the others from the
    stream that wrote them all (the 3 ways of a fleet hour differ in ``schedulable`` and
    ``expected_source`` only, measured on 64x100k). Safe across the threads of
    :func:`replay.streaming.replay_windows`.
    """

    #: Columns at most that a window's decisions may differ in from a written window's to be
    #: written alone: a column alone costs about what it costs in the whole table (a twentieth).
    PATCH_COLUMNS = 8

    def __init__(self):
        self._lock = threading.Lock()
        self._pieces: dict[bytes, Piece] = {}
        #: The windows written whole, of the window being decided: their column digests, piece.
        self._whole: tuple[Any, list[tuple[dict, Piece]]] = (None, [])
        #: The memos of the window being decided (:meth:`memo`), by digest.
        self._memos: tuple[Any, dict[bytes, dict]] = (None, {})

    def memo(self, window: tuple, memo: dict) -> dict:
        """The memo (``replay.streaming.StreamReplay``) of the rows of the window whose column
        digests ``memo["digest"]`` holds: that of the first stream to ask with these digests
        (``memo`` itself when none did). Streams ask one window after another, like
        :meth:`claim`."""
        key = window_digest(window, memo["digest"])
        with self._lock:
            if self._memos[0] != window:
                self._memos = (window, {})
            return self._memos[1].setdefault(key, memo)

    def claim(self, window: tuple, digests: dict[str, bytes], piece: Piece,
              patched: Callable[[Piece, tuple[str, ...]], Piece]
              ) -> tuple[Piece, tuple[str, ...] | None]:
        """Where the rows of ``digests`` (a window's column digests; ``window``: its first
        iteration, rows and ranks) are, and what the caller writes: ``(piece, None)``, none
        written yet, the caller writes them all; ``(patched(base, names), names)``, a piece
        holding all but a few columns ``names`` was written, the caller writes those; or
        ``(the piece of a stream that wrote them, ())``. Streams call it one window after
        another (every stream's window ``k`` before any stream's ``k + 1``)."""
        key = window_digest(window, digests)
        with self._lock:
            got = self._pieces.get(key)
            if got is not None:
                return got, ()
            if self._whole[0] != window:
                self._whole = (window, [])
            best = None
            for theirs, base in self._whole[1]:
                names = tuple(c for c, d in digests.items() if theirs.get(c) != d)
                if len(names) <= self.PATCH_COLUMNS and (best is None or len(names) < len(best[1])):
                    best = (base, names)
            if best is not None:
                got = self._pieces[key] = patched(*best)
                return got, best[1]
            self._pieces[key] = piece
            self._whole[1].append((digests, piece))
            return piece, None


#: Decision columns that are the window's frames' (``replay.decision_tables.decision_columns``):
#: alike in every stream taking a window, so its digest names the window instead.
FRAME_COLUMNS = frozenset({"iter", "rank", "real", "window_real"})


def column_digests(cols: dict) -> dict[str, bytes]:
    """XXH3-128 of each of a window's decision columns
    (``replay.decision_tables.decision_columns``) but those of
    :data:`FRAME_COLUMNS` (a third of the bytes, the window's): name, kind, dtypes, shapes and
    values, everything the written column is built from."""
    out = {}
    for name, (kind, *rest) in cols.items():
        if name in FRAME_COLUMNS:
            continue
        h = xxhash.xxh3_128()
        h.update(f"{name}:{kind};".encode())
        for x in rest:
            if isinstance(x, np.ndarray):
                h.update(f"{x.dtype.str}{x.shape};".encode())
                h.update(np.ascontiguousarray(x).data)
            else:
                h.update(repr(x).encode())
        out[name] = h.digest()
    return out


def window_digest(window: tuple, digests: dict[str, bytes]) -> bytes:
    """The digest of a window's decisions: its first iteration, rows and ranks (the frame
    columns), and every other column's (:func:`column_digests`)."""
    h = xxhash.xxh3_128()
    h.update("window:{}:{}:{};".format(*window).encode())
    for name, d in digests.items():
        h.update(name.encode())
        h.update(d)
    return h.digest()


__all__ = ["FRAME_COLUMNS", "SharedWindows", "column_digests", "window_digest"]
