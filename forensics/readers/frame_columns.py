"""The frame columns a block of trace frame lines contributes to a batch: what the compiled
scanner (:func:`forensics.readers.json_scan.frames`) returns and what the per-frame builder of
:mod:`forensics.readers.trace_v1` seals its lists into, one definition for both."""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from forensics.dataset.schema import FRAMES

#: ``FRAMES`` columns every frame has (the rest are optional recorded decisions).
FIXED = ("run", "source", "line", "iter", "rank", "num_requests", "num_dummies")
#: Optional recorded decisions, in ``FRAMES`` order.
OPTIONAL = tuple(f.name for f in FRAMES if f.name not in FIXED)


@dataclasses.dataclass(frozen=True)
class FrameColumns:
    """The columns a run of frame lines contributes to a batch (see ``trace_tables.TraceBuilder``).

    Fields:
        line, iter: int64 per frame. rank, num_requests, num_dummies: int32 per frame.
        optional: the optional decision columns (``OPTIONAL``), Arrow arrays of ``FRAMES`` types.
        req_id: int64, req_state: int16, req_dummy: bool, one per request in frame order.
    """

    line: np.ndarray
    iter: np.ndarray
    rank: np.ndarray
    num_requests: np.ndarray
    num_dummies: np.ndarray
    optional: dict[str, pa.Array]
    req_id: np.ndarray
    req_state: np.ndarray
    req_dummy: np.ndarray

    @property
    def n_frames(self) -> int:
        return int(self.line.size)

    @classmethod
    def concat(cls, parts: list[FrameColumns]) -> FrameColumns:
        """The frames of ``parts`` in order, as single arrays (no frames when empty)."""
        if not parts:
            return cls(*(np.zeros(0, t) for t in (np.int64, np.int64, np.int32, np.int32, np.int32)),
                       {k: pa.array([], FRAMES.field(k).type) for k in OPTIONAL},
                       np.zeros(0, np.int64), np.zeros(0, np.int16), np.zeros(0, bool))
        arrays = {f.name: np.concatenate([getattr(p, f.name) for p in parts])
                  for f in dataclasses.fields(cls) if f.name != "optional"}
        return cls(**arrays, optional={k: pa.concat_arrays([p.optional[k] for p in parts])
                                       for k in OPTIONAL})

    def slice(self, lo: int, hi: int) -> FrameColumns:
        """Frames ``[lo, hi)`` with their requests."""
        starts = np.concatenate([[0], np.cumsum(self.num_requests, dtype=np.int64)])
        a, b = int(starts[lo]), int(starts[hi])
        return FrameColumns(self.line[lo:hi], self.iter[lo:hi], self.rank[lo:hi],
                            self.num_requests[lo:hi], self.num_dummies[lo:hi],
                            {k: v.slice(lo, hi - lo) for k, v in self.optional.items()},
                            self.req_id[a:b], self.req_state[a:b], self.req_dummy[a:b])


__all__ = ["FIXED", "OPTIONAL", "FrameColumns"]
