"""Fast reading of a block of request-state trace frame lines (``msgspec`` typed decoding).

:func:`fast_frames` turns a block of whole lines, each one v1 frame record, into exactly the
columns the per-frame builder of :mod:`forensics.readers.trace_v1` would make, or returns None so
that builder takes the block (and every error names its file and line). Each line is decoded
straight into a typed ``msgspec`` struct (no dict per object; ``gc=False`` structs, so the
collector does not walk millions of requests), then the columns are gathered with ``map`` and
``numpy.fromiter``. ``benchmarks/trace_ingest.py`` measures it at 1.1-1.3x less CPU than the
``pyarrow.json`` path it replaced, which also crashed on deep nesting before any check (issue 13).

It declines whatever it cannot reproduce exactly, checked on the whole block before any row is
made:

- a line that is not one object from its first byte to its last (blank lines, text around it,
  two objects on a line), a backslash anywhere (escapes), text that is not UTF-8 (the shape
  check of :mod:`forensics.readers.json_object_lines`);
- anything ``msgspec`` refuses for the frame struct: bad JSON (it is as strict as ``json``:
  no NaN, no trailing comma, no control character in a string), a float/bool/string where an
  int is due, a missing ``kind``/``iter``/``rank``/``requests``, a request that is not an object
  or lacks ``id``/``state``, a ``dummy`` that is not true/false, a number beyond float range,
  nesting deeper than the interpreter's recursion limit (``RecursionError``, not a crash);
- a record whose ``kind`` is not ``"frame"`` (run, note, unknown kinds);
- an int beyond int64 anywhere, an ``iter`` < 0, a rank outside ``[0, tp_size)``, a frame key
  ``iter * tp_size + rank`` that would not fit int64;
- a state that is not an exact known name (``NAME`` or ``LlmRequestState.NAME``): odd spellings
  and unknown names are the per-frame parser's to accept or refuse.

A key given twice keeps its last value, as ``json.loads`` does; unknown keys are ignored by both.
Duplicate ``(iter, rank)`` frames are not checked here: the caller adds the keys to the builder,
whose one duplicate check covers both paths (and names the line of the repeat).
"""
from __future__ import annotations

import dataclasses
import itertools
from operator import attrgetter
from typing import Optional

import msgspec
import numpy as np
import pyarrow as pa

from forensics.dataset.schema import FRAMES
from forensics.readers.json_object_lines import DeclineBlock, object_line_ends
from replay.states import RequestState

#: Bytes of whole lines per vectorised block (~2,300 frames of a 32-rank fleet trace): the
#: decoded structs of a block are transient, 2 MB blocks peaked ~45 MB lower than 8 MB ones at
#: the same CPU (benchmarks/trace_ingest.py).
BLOCK_BYTES = 2 << 20

_FIXED = ("run", "source", "line", "iter", "rank", "num_requests", "num_dummies")
#: Optional recorded decisions, in ``FRAMES`` order (the same tuple the per-frame builder uses).
OPTIONAL = tuple(f.name for f in FRAMES if f.name not in _FIXED)

# Exact state spellings only (the builder's fast lookup); the rest goes to ``parse_state``.
_STATE_CODES: dict[str, int] = {}
for _s in RequestState:
    _STATE_CODES[_s.name] = int(_s)
    _STATE_CODES[f"LlmRequestState.{_s.name}"] = int(_s)


class _Request(msgspec.Struct, gc=False):
    id: int
    state: str
    dummy: bool = False


def _optional_type(t: pa.DataType) -> type:
    if pa.types.is_boolean(t):
        return Optional[bool]
    if pa.types.is_integer(t):
        return Optional[int]
    raise TypeError(f"no struct type for optional frame column of type {t}")


#: One frame record as decoded; optional decisions default to None (absent and null alike, as
#: the builder's ``rec.get(key)``).
_Frame = msgspec.defstruct(
    "_Frame",
    [("kind", str), ("iter", int), ("rank", int), ("requests", list[_Request]),
     *((n, _optional_type(FRAMES.field(n).type), None) for n in OPTIONAL)],
    gc=False)
_DECODER = msgspec.json.Decoder(_Frame)


@dataclasses.dataclass(frozen=True)
class FrameColumns:
    """The columns a run of frame lines contributes to a batch (see ``trace_v1._Builder``).

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


def fast_frames(block: bytes, line: int, tp_size: int) -> FrameColumns | None:
    """The frames of ``block`` (whole lines, the first being line ``line``), or None to decline."""
    try:
        return _frames(block, line, tp_size)
    except (DeclineBlock, msgspec.MsgspecError, RecursionError, OverflowError, KeyError,
            pa.ArrowInvalid):
        return None


def _ints(values, n: int) -> np.ndarray:
    """Python ints as int64; OverflowError (declined) for one beyond int64."""
    return np.fromiter(values, np.int64, n)


def _frames(block: bytes, line: int, tp_size: int) -> FrameColumns:
    n = int(object_line_ends(block).size)
    frames = _DECODER.decode_lines(block)
    if len(frames) != n:
        raise DeclineBlock()
    if any(k != "frame" for k in map(attrgetter("kind"), frames)):
        raise DeclineBlock()
    it = _ints(map(attrgetter("iter"), frames), n)
    rank = _ints(map(attrgetter("rank"), frames), n)
    if (it < 0).any() or (rank < 0).any() or (rank >= tp_size).any():
        raise DeclineBlock()
    if n and int(it.max()) > ((1 << 63) - 1 - tp_size) // tp_size:
        raise DeclineBlock()   # the frame key would overflow: the builder words that error
    lists = list(map(attrgetter("requests"), frames))
    counts = np.fromiter(map(len, lists), np.int64, n)
    reqs = list(itertools.chain.from_iterable(lists))
    m = len(reqs)
    rid = _ints(map(attrgetter("id"), reqs), m)
    codes = np.fromiter(map(_STATE_CODES.__getitem__, map(attrgetter("state"), reqs)), np.int16, m)
    dummies = np.fromiter(map(attrgetter("dummy"), reqs), bool, m)
    cum = np.zeros(m + 1, np.int64)
    np.cumsum(dummies, out=cum[1:])
    ends = np.cumsum(counts)
    n_dummies = (cum[ends] - cum[ends - counts]).astype(np.int32)
    optional = {}
    for k in OPTIONAL:
        # an int beyond int64 raises OverflowError here (declined)
        optional[k] = pa.array(list(map(attrgetter(k), frames)), FRAMES.field(k).type)
    return FrameColumns(
        line=np.arange(line, line + n, dtype=np.int64), iter=it, rank=rank.astype(np.int32),
        num_requests=counts.astype(np.int32), num_dummies=n_dummies, optional=optional,
        req_id=rid, req_state=codes, req_dummy=dummies)


__all__ = ["BLOCK_BYTES", "OPTIONAL", "FrameColumns", "fast_frames"]
