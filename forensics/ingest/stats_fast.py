"""Vectorised reading of a block of IterationStats JSON Lines (``pyarrow.json``).

:func:`fast_block` turns a block of whole lines, each one JSON object, into exactly the rows the
per-object reader (:mod:`forensics.ingest.stats_json`) would make, or returns None so that reader
takes the block (and its bad lines go to ``unparsed`` with their line numbers). It declines
whatever it cannot reproduce exactly, checked on the whole block before any row is made:

- a line that is not one object from its first byte to its last (blank lines, leading or trailing
  text, two objects on a line), a backslash anywhere (escapes), text that is not UTF-8, or
  anything ``pyarrow.json`` refuses (bad JSON, a value changing type, a key given twice);
- lists, key names other than ``[A-Za-z0-9_]+`` or a name used twice in the block's schema;
- a typed integer column that Arrow read as floats beyond 2**53 (an int literal there would be
  exact in Python, rounded here);
- a row whose numeric leaves that go to ``fields`` are not in the order of the block's schema
  (the map keeps each object's own key order), checked with one regex over the lines.

Numbers parse alike: Arrow's and Python's float parsing are both correctly rounded, ints become
floats with the same rounding, and an int beyond int64 becomes a float in both.
"""
from __future__ import annotations

import io
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from forensics.dataset.schema import EVENTS, STATS, UNPARSED
from forensics.ingest.json_object_lines import DeclineBlock, object_line_ends
from forensics.ingest.stats_json import _FLOAT_COLUMNS, _INT_BOUNDS, TYPED_COLUMNS, StatsBatch

#: Bytes of whole lines per vectorised block (~16k rows of a 32-rank IterationStats file).
BLOCK_BYTES = 8 << 20

_NAME = re.compile(r"[A-Za-z0-9_]+\Z")
_PARSE = pj.ParseOptions(explicit_schema=pa.schema([("timestamp", pa.string())]),
                         unexpected_field_behavior="infer")
_EXACT_FLOAT = float(2 ** 53)


def fast_block(block: bytes, line: int, source: str) -> StatsBatch | None:
    """The rows of ``block`` (whole lines, the first being line ``line``), or None to decline."""
    try:
        return _rows(block, line, source)
    except (DeclineBlock, pa.ArrowInvalid):
        return None


def _lines(block: bytes) -> tuple[pa.StringArray, int]:
    """The block's lines (newline kept) as a zero-copy string array, after the shape checks."""
    if len(block) >= 2 ** 31:  # int32 string offsets
        raise DeclineBlock()
    nl = object_line_ends(block)
    n = nl.size
    offsets = np.empty(n + 1, np.int32)
    offsets[0] = 0
    offsets[1:] = nl + 1
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block)), n


def _leaves(arr: pa.Array, prefix: str, names: list[str], out: dict[str, pa.Array]) -> None:
    """Leaf arrays of a struct under dotted names, parent nulls applied, in schema order."""
    for field, child in zip(arr.type, arr.flatten()):
        if not _NAME.match(field.name):
            raise DeclineBlock()
        names.append(field.name)
        t = field.type
        if pa.types.is_struct(t):
            _leaves(child, f"{prefix}{field.name}.", names, out)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) \
                or pa.types.is_fixed_size_list(t):
            raise DeclineBlock()
        else:
            out[f"{prefix}{field.name}"] = child


def _numeric(a: pa.Array) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(float values, valid mask, kind) of a numeric (int/float/bool) leaf, else None."""
    t = a.type
    if pa.types.is_int64(t):
        kind = "int"
    elif pa.types.is_float64(t):
        kind = "float"
    elif pa.types.is_boolean(t):
        kind = "bool"
    elif pa.types.is_null(t) or pa.types.is_string(t) or pa.types.is_timestamp(t) \
            or (pa.types.is_struct(t) and t.num_fields == 0):
        return None
    else:
        raise DeclineBlock()
    valid = ~np.asarray(a.is_null().to_numpy(zero_copy_only=False), bool)
    vals = a.fill_null(False if kind == "bool" else 0).to_numpy(zero_copy_only=False)
    return vals, valid, kind


def _rows(block: bytes, line: int, source: str) -> StatsBatch:
    lines, n = _lines(block)
    table = pj.read_json(io.BytesIO(block), parse_options=_PARSE)
    if table.num_rows != n:
        raise DeclineBlock()
    rows = table.to_struct_array()
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    names: list[str] = []
    leaves: dict[str, pa.Array] = {}
    _leaves(rows, "", names, leaves)
    if len(set(names)) != len(names):
        raise DeclineBlock()

    cols: dict[str, pa.Array] = {}
    field_names: list[str] = []
    field_vals: list[np.ndarray] = []
    field_mask: list[np.ndarray] = []
    typed_of = {k: c for k, c in TYPED_COLUMNS.items()}
    for path, arr in leaves.items():
        num = _numeric(arr)
        column = typed_of.get(path)
        if num is None:
            continue
        vals, valid, kind = num
        in_fields = valid
        if column is not None:
            typed_ok = np.zeros(n, bool)
            if kind == "float" and column in _FLOAT_COLUMNS:
                typed_ok = valid
                cols[column] = pa.array(vals, pa.float64(), mask=~typed_ok)
            elif kind == "int" and column in _FLOAT_COLUMNS:
                typed_ok = valid
                cols[column] = pa.array(vals.astype(np.float64), pa.float64(), mask=~typed_ok)
            elif kind in ("int", "float"):
                bound = _INT_BOUNDS.get(column, 2 ** 63 - 1)
                if kind == "float":
                    with np.errstate(invalid="ignore"):
                        if (valid & (np.abs(vals) >= _EXACT_FLOAT)).any():
                            raise DeclineBlock()   # an int literal here would be exact in Python
                        typed_ok = valid & np.isfinite(vals) & (vals == np.floor(vals)) \
                            & (vals >= -bound - 1) & (vals <= bound)
                    ints = np.where(typed_ok, vals, 0).astype(np.int64)
                else:
                    typed_ok = valid & (vals >= -bound - 1) & (vals <= bound)
                    ints = vals
                target = STATS.field(column).type
                cols[column] = pa.array(np.where(typed_ok, ints, 0).astype(target.to_pandas_dtype()),
                                        target, mask=~typed_ok)
            in_fields = valid & ~typed_ok
        if in_fields.any():
            field_names.append(path)
            field_vals.append(vals.astype(np.float64))
            field_mask.append(in_fields)

    # Each row's fields in its own key order: that must be the schema order for every row.
    if len(field_names) > 1:
        pattern = ".*".join(re.escape(f'"{p.rsplit(".", 1)[-1]}":') for p in field_names)
        if not pc.all(pc.match_substring_regex(lines, pattern)).as_py():
            raise DeclineBlock()

    ts = leaves.get("timestamp")
    cols["timestamp"] = ts if ts is not None and pa.types.is_string(ts.type) \
        else pa.nulls(n, pa.string())
    cols["fields"] = _fields_map(n, field_names, field_vals, field_mask)
    ln = np.arange(line, line + n, dtype=np.int64)
    cols["line"] = pa.array(ln)
    cols["line_end"] = cols["line"]
    cols["source"] = pa.array([source], pa.string()).take(pa.array(np.zeros(n, np.int32)))
    stats = pa.table([cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in STATS],
                     schema=STATS)
    return StatsBatch(stats=stats, events=EVENTS.empty_table(), unparsed=UNPARSED.empty_table())


def _fields_map(n: int, names: list[str], vals: list[np.ndarray], masks: list[np.ndarray]
                ) -> pa.MapArray:
    """The ``fields`` map: per row, the leaves whose mask is set, in ``names`` order."""
    if not names:
        return pa.MapArray.from_arrays(np.zeros(n + 1, np.int32), pa.array([], pa.string()),
                                       pa.array([], pa.float64()), type=STATS.field("fields").type)
    m = np.stack(masks, axis=1)                       # (n, k), row-major = per-row order
    v = np.stack(vals, axis=1)
    idx = np.nonzero(m.ravel())[0]
    key_idx = (idx % len(names)).astype(np.int32)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(m.sum(axis=1), out=offsets[1:])
    keys = pa.array(names, pa.string()).take(pa.array(key_idx))
    return pa.MapArray.from_arrays(pa.array(offsets), keys, pa.array(v.ravel()[idx], pa.float64()),
                                   type=STATS.field("fields").type)


__all__ = ["BLOCK_BYTES", "fast_block"]
