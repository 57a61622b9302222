"""The set of frame keys a trace reader has seen, for its duplicate-frame checks.

A frame key is ``iter * tp_size + rank`` (a non-negative int64). Keys of a fleet trace are
dense (every rank of every iteration), so they are kept as one byte per possible key up to the
largest seen: 3.2 MB for an hour of 32 ranks (100,000 iterations), where the sorted int64 array
this replaced took 26 MB and a transient merge copy of it per batch, growing with the trace.
Sparse keys (a few frames of huge iterations) switch to the sorted array, so memory is never
more than about 8 bytes per key either way.
"""
from __future__ import annotations

import numpy as np

#: Bytes allowed per key seen before the dense form gives way to the sorted one.
_DENSE_BYTES_PER_KEY = 16
#: The dense form is always allowed up to this many possible keys (16 MB).
_DENSE_MIN = 1 << 24


class FrameKeys:
    """Frame keys seen so far (non-negative int64); ``add`` keys after checking ``hits``.

    The dense form covers ``[base, base + size)``: a trace recorded from a late iteration on
    starts dense at its first key.
    """

    def __init__(self) -> None:
        self._dense: np.ndarray | None = np.zeros(0, bool)
        self._base = 0
        self._sorted = np.zeros(0, np.int64)   # used once the keys are too sparse
        self.count = 0

    def hits(self, keys: np.ndarray) -> np.ndarray:
        """Which of ``keys`` are already in the set (bool per key)."""
        keys = np.asarray(keys, np.int64)
        if self._dense is not None:
            rel = keys - self._base
            inside = (rel >= 0) & (rel < self._dense.size)
            out = np.zeros(keys.size, bool)
            out[inside] = self._dense[rel[inside]]
            return out
        s = self._sorted
        if not s.size:
            return np.zeros(keys.size, bool)
        at = np.minimum(np.searchsorted(s, keys), s.size - 1)
        return s[at] == keys

    def add(self, keys: np.ndarray) -> None:
        """Add ``keys`` (none of them in the set already, no repeats among them)."""
        keys = np.asarray(keys, np.int64)
        if not keys.size:
            return
        first = self.count == 0
        self.count += keys.size
        if self._dense is not None:
            lo = int(keys.min()) if first else min(int(keys.min()), self._base)
            top = max(int(keys.max()) + 1, self._base + self._dense.size)
            if top - lo > max(_DENSE_MIN, _DENSE_BYTES_PER_KEY * self.count):
                self._sorted = np.flatnonzero(self._dense).astype(np.int64) + self._base
                self._dense = None
            else:
                if first:
                    self._base = lo
                if lo < self._base or top > self._base + self._dense.size:
                    room = top - lo if lo < self._base else max(top - lo, self._dense.size * 3 // 2)
                    grown = np.zeros(room, bool)
                    at = self._base - lo
                    grown[at:at + self._dense.size] = self._dense
                    self._dense, self._base = grown, lo
                self._dense[keys - self._base] = True
                return
        merged = np.concatenate([self._sorted, np.sort(keys)])
        merged.sort(kind="stable")       # two sorted runs: a linear merge
        self._sorted = merged

    @property
    def nbytes(self) -> int:
        return self._dense.nbytes if self._dense is not None else self._sorted.nbytes


__all__ = ["FrameKeys"]
