"""Vectorised reading of a block of request-state trace frame lines (``pyarrow.json``).

:func:`fast_frames` turns a block of whole lines, each one v1 frame record, into exactly the
columns the per-frame builder of :mod:`forensics.ingest.trace_v1` would make, or returns None so
that builder takes the block (and every error names its file and line). It declines whatever it
cannot reproduce exactly, checked on the whole block before any row is made:

- a line that is not one object from its first byte to its last (blank lines, text around it,
  two objects on a line), a backslash anywhere (escapes), text that is not UTF-8, or anything
  ``pyarrow.json`` refuses with the explicit schema (bad JSON, a float/bool/string where an int
  is due, an int beyond int64, a key given twice, a request that is not an object, an int state);
- a record whose ``kind`` is not ``"frame"`` (run, note, unknown kinds, missing kind);
- a missing or null ``iter``/``rank``/``requests``, a null request, request id or state, an
  ``iter`` < 0, a rank outside ``[0, tp_size)``, a frame key ``iter * tp_size + rank`` that would
  not fit int64;
- a state that is not an exact known name (``NAME`` or ``LlmRequestState.NAME``): odd spellings
  and unknown names are the per-frame parser's to accept or refuse;
- a null ``dummy`` when the block has ``null`` anywhere (an absent dummy is false, a null one an
  error; Arrow reads both as null).

Duplicate ``(iter, rank)`` frames are not checked here: the caller adds the keys to the builder,
whose one duplicate check covers both paths (and names the line of the repeat).
"""
from __future__ import annotations

import dataclasses
import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from forensics.dataset.schema import FRAMES
from forensics.ingest.json_object_lines import DeclineBlock, object_line_ends
from replay.states import RequestState

#: Bytes of whole lines per vectorised block (~40k frames of a 32-rank fleet trace).
BLOCK_BYTES = 8 << 20

_FIXED = ("run", "source", "line", "iter", "rank", "num_requests", "num_dummies")
#: Optional recorded decisions, in ``FRAMES`` order (the same tuple the per-frame builder uses).
OPTIONAL = tuple(f.name for f in FRAMES if f.name not in _FIXED)
_REQUEST = pa.struct([("id", pa.int64()), ("state", pa.string()), ("dummy", pa.bool_())])
_SCHEMA = pa.schema([("kind", pa.string()), ("iter", pa.int64()), ("rank", pa.int64()),
                     ("requests", pa.list_(_REQUEST)),
                     *((n, FRAMES.field(n).type) for n in OPTIONAL)])
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(block_size=1 << 24)

# Exact state spellings only (the builder's fast lookup); the rest goes to ``parse_state``.
_STATE_CODES: dict[str, int] = {}
for _s in RequestState:
    _STATE_CODES[_s.name] = int(_s)
    _STATE_CODES[f"LlmRequestState.{_s.name}"] = int(_s)


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
    except (DeclineBlock, pa.ArrowInvalid):
        return None


def _int_values(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A required int64 column as numpy; declines on any null (missing or null field)."""
    if col.null_count:
        raise DeclineBlock()
    return np.asarray(col.to_numpy(), np.int64)


def _frames(block: bytes, line: int, tp_size: int) -> FrameColumns:
    n = int(object_line_ends(block).size)
    table = pj.read_json(io.BytesIO(block), read_options=_READ, parse_options=_PARSE)
    if table.num_rows != n:
        raise DeclineBlock()
    table = table.combine_chunks()
    kind = table.column("kind")
    if kind.null_count or not pc.all(pc.equal(kind, "frame")).as_py():
        raise DeclineBlock()
    it = _int_values(table.column("iter"))
    rank = _int_values(table.column("rank"))
    if (it < 0).any() or (rank < 0).any() or (rank >= tp_size).any():
        raise DeclineBlock()
    if n and int(it.max()) > ((1 << 63) - 1 - tp_size) // tp_size:
        raise DeclineBlock()   # the frame key would overflow: the builder words that error
    reqs = table.column("requests").chunk(0) if table.column("requests").num_chunks == 1 \
        else pa.concat_arrays(table.column("requests").chunks)
    if reqs.null_count:
        raise DeclineBlock()
    offsets = np.asarray(reqs.offsets.to_numpy(), np.int64)
    counts = np.diff(offsets)
    items = reqs.values.slice(offsets[0], offsets[-1] - offsets[0]) if n else reqs.values
    if items.null_count:
        raise DeclineBlock()
    rid, state, dummy = items.field("id"), items.field("state"), items.field("dummy")
    if rid.null_count or state.null_count:
        raise DeclineBlock()
    if dummy.null_count and b"null" in block:
        raise DeclineBlock()
    enc = state.dictionary_encode()
    try:
        lut = np.array([_STATE_CODES[s] for s in enc.dictionary.to_pylist()], np.int16)
    except KeyError:
        raise DeclineBlock() from None
    codes = lut[np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.intp)] if len(items) \
        else np.zeros(0, np.int16)
    dummies = np.asarray(dummy.fill_null(False).to_numpy(zero_copy_only=False), bool)
    cum = np.zeros(len(items) + 1, np.int64)
    np.cumsum(dummies, out=cum[1:])
    rel = offsets - offsets[0]
    n_dummies = (cum[rel[1:]] - cum[rel[:-1]]).astype(np.int32)
    return FrameColumns(
        line=np.arange(line, line + n, dtype=np.int64), iter=it, rank=rank.astype(np.int32),
        num_requests=counts.astype(np.int32), num_dummies=n_dummies,
        optional={k: table.column(k).chunk(0) if table.column(k).num_chunks == 1
                  else pa.concat_arrays(table.column(k).chunks) for k in OPTIONAL},
        req_id=np.asarray(rid.to_numpy(), np.int64), req_state=codes, req_dummy=dummies)


__all__ = ["BLOCK_BYTES", "OPTIONAL", "FrameColumns", "fast_frames"]
