"""Fast reading of a block of IterationStats JSON Lines (``msgspec`` typed decoding).

:func:`fast_block` turns a block of whole lines, each one JSON object, into exactly the rows the
per-object reader (:mod:`forensics.readers.stats_json`) would make, or returns None so that reader
takes the block (and its bad lines go to ``unparsed`` with their line numbers). The block's first
line gives the shape (its keys, nested objects as nested structs); every line is decoded into
that ``msgspec`` struct (no dict per object, ``gc=False``), then each leaf becomes one Arrow
array. The decode costs about a quarter of ``pyarrow.json``'s parse it replaced; end to end
(``benchmarks/trace_ingest.py``) the two are about even, the rest being column gathering and
writing. ``pyarrow.json`` also crashed (exit 139) on deep nesting before any check (issue 13).

It declines whatever it cannot reproduce exactly, checked on the whole block before any row is
made:

- a line that is not one object from its first byte to its last (blank lines, leading or trailing
  text, two objects on a line), a backslash anywhere (escapes), text that is not UTF-8 (the shape
  check of :mod:`forensics.readers.json_object_lines`);
- a first line with a list, a key name other than ``[A-Za-z0-9_]+``, a name used twice in its
  shape, or nesting deeper than ``MAX_DEPTH``;
- a line ``msgspec`` refuses for that shape: bad JSON (as strict as ``json``: no NaN, no trailing
  comma), a key the first line lacks, an object where the first line has a number or the other
  way round, a number beyond float range, nesting past the recursion limit;
- a key given twice in a line (the quote count of the block is then more than its keys and
  strings need), a leaf mixing bools with numbers or strings with numbers across lines;
- a typed integer column holding floats beyond 2**53 (an int literal there would be exact in
  Python, rounded here), an int beyond int64;
- a row whose numeric leaves that go to ``fields`` are not in the order of the block's shape
  (the map keeps each object's own key order), checked with one regex per set of keys present.

Numbers parse alike: ``msgspec`` and Python both parse floats correctly rounded, ints become
floats with the same rounding.
"""
from __future__ import annotations

import json
import re
from operator import attrgetter
from typing import Any, Optional, Union

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import EVENTS, STATS_READ, UNPARSED
from forensics.readers.json_object_lines import DeclineBlock, object_line_ends
from forensics.readers.stats_columns import FLOAT_COLUMNS, INT_BOUNDS, TYPED_COLUMNS, StatsBatch

#: Bytes of whole lines per vectorised block (~4k rows of a 32-rank IterationStats file):
#: 2 MB blocks peaked ~35 MB lower than 8 MB ones at the same CPU (benchmarks/trace_ingest.py).
BLOCK_BYTES = 2 << 20
#: Deepest nesting of objects the fast path takes (IterationStats nests two levels).
MAX_DEPTH = 8

_NAME = re.compile(r"[A-Za-z0-9_]+\Z")
_EXACT_FLOAT = float(2 ** 53)
_UNSET = msgspec.UNSET
#: Leaf types by the family of the first value seen: one family per leaf, so that Arrow never
#: folds a bool into a float column (``pa.array([1.5, False])`` is ``[1.5, 0.0]``).
_FAMILY_TYPES = {"bool": Optional[bool], "num": Union[int, float, None], "str": Optional[str],
                 "any": Union[bool, int, float, str, None]}
_FAMILIES = ({bool}, {int, float}, {str})
_DECODERS: dict[tuple, tuple[msgspec.json.Decoder, list]] = {}


def fast_block(block: bytes, line: int, source: str) -> StatsBatch | None:
    """The rows of ``block`` (whole lines, the first being line ``line``), or None to decline."""
    try:
        return _rows(block, line, source)
    except (DeclineBlock, msgspec.MsgspecError, RecursionError, OverflowError, ValueError,
            TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _lines(block: bytes, nl: np.ndarray) -> pa.StringArray:
    """The block's lines (newline kept) as a zero-copy string array."""
    if len(block) >= 2 ** 31:  # int32 string offsets
        raise DeclineBlock()
    n = nl.size
    offsets = np.empty(n + 1, np.int32)
    offsets[0] = 0
    offsets[1:] = nl + 1
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))


def _family(v: Any) -> str:
    t = type(v)
    return "bool" if t is bool else "num" if t is int or t is float else "str" if t is str \
        else "any"


def object_shape(obj: dict, depth: int = 0) -> tuple:
    """The nesting of an object's keys in key order: ``((name, sub-shape), ...)``, a leaf's
    sub-shape being the family of its value (``bool``, ``num``, ``str``; ``any`` for null)."""
    if depth >= MAX_DEPTH:
        raise DeclineBlock()
    out = []
    for k, v in obj.items():
        if not _NAME.match(k):
            raise DeclineBlock()
        if type(v) is dict:
            out.append((k, object_shape(v, depth + 1)))
        elif type(v) is list:
            raise DeclineBlock()
        else:
            out.append((k, _family(v)))
    return tuple(out)


def _struct(shape: tuple, name: str) -> type:
    fields = [(k, _struct(sub, f"{name}_{k}") if type(sub) is tuple else _FAMILY_TYPES[sub],
               _UNSET) for k, sub in shape]
    return msgspec.defstruct(name, fields, gc=False, forbid_unknown_fields=True)


def merge_shapes(shape: tuple, other: tuple) -> tuple:
    """``shape`` with the keys only ``other`` has, each placed after its predecessor there."""
    out = list(shape)
    for i, (k, sub) in enumerate(other):
        at = next((j for j, (name, _) in enumerate(out) if name == k), None)
        if at is None:
            before = other[i - 1][0] if i else None
            pos = next((j + 1 for j, (name, _) in enumerate(out) if name == before), 0)
            out.insert(pos, (k, sub))
        elif type(sub) is tuple and type(out[at][1]) is tuple:
            out[at] = (k, merge_shapes(out[at][1], sub))
        elif (type(sub) is tuple) != (type(out[at][1]) is tuple):
            raise DeclineBlock()        # an object in one line, a scalar in another
        elif sub != out[at][1]:
            out[at] = (k, "any")
    return tuple(out)


def _decoder(shape: tuple):
    """The decoder for ``shape`` and its paths ``(dotted, parts, family)`` in depth-first key
    order, ``family`` None for an object (cached per shape)."""
    got = _DECODERS.get(shape)
    if got is None:
        if len(_DECODERS) >= 64:        # a file whose lines keep changing shape: stay bounded
            _DECODERS.clear()
            _MERGED.clear()
        paths: list[tuple[str, tuple[str, ...], str | None]] = []

        def walk(sh: tuple, parts: tuple[str, ...]) -> None:
            for k, sub in sh:
                paths.append((".".join((*parts, k)), (*parts, k),
                              None if type(sub) is tuple else sub))
                if type(sub) is tuple:
                    walk(sub, (*parts, k))
        walk(shape, ())
        got = _DECODERS[shape] = (msgspec.json.Decoder(_struct(shape, "Stats")), paths)
    return got


_UNKNOWN_AT = re.compile(r"unknown field .* at `\$\[(\d+)\]")
#: Keys a file's first line lacks, learnt from later lines: first-line shape -> merged shape.
_MERGED: dict[tuple, tuple] = {}
#: How many lines with keys the shape lacks one block may teach before it is declined.
MAX_MERGES = 8


def _decode(block: bytes, nl: np.ndarray) -> tuple[list, list[tuple[str, tuple[str, ...], str | None]]]:
    """Every line decoded into the struct of the block's shape: the first line's, grown by the
    keys of any line that has more (``msgspec`` names the first such line)."""
    first = object_shape(json.loads(block[:int(nl[0]) + 1]))
    shape = _MERGED.get(first, first)
    for _ in range(MAX_MERGES):
        decoder, paths = _decoder(shape)
        try:
            return decoder.decode_lines(block), paths
        except msgspec.ValidationError as e:
            m = _UNKNOWN_AT.search(str(e))
            if m is None:
                raise
            i = int(m.group(1))
            if i >= nl.size:
                raise
            start = int(nl[i - 1]) + 1 if i else 0
            shape = _MERGED[first] = merge_shapes(shape, object_shape(json.loads(block[start:int(nl[i]) + 1])))
    raise DeclineBlock()


def _values(parent: tuple[list, bool], key: str) -> list:
    """``key`` of every struct of ``parent`` (the structs, and whether none is absent or null);
    UNSET where the struct itself is absent or null."""
    objs, complete = parent
    if complete:
        return list(map(attrgetter(key), objs))
    return [_UNSET if o is _UNSET or o is None else getattr(o, key) for o in objs]


def _leaf(vals: list) -> tuple[pa.Array, int]:
    """A leaf's values as one Arrow array (absent as null) and how many rows lack the key."""
    try:
        return pa.array(vals), 0            # UNSET converts to nothing: all keys present
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        absent = vals.count(_UNSET)
        if not absent:
            raise
    return pa.array([None if v is _UNSET else v for v in vals]), absent


def _numeric(a: pa.Array) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(float values, valid mask, kind) of a numeric (int/float/bool) leaf, else None."""
    t = a.type
    if pa.types.is_int64(t):
        kind = "int"
    elif pa.types.is_float64(t):
        kind = "float"
    elif pa.types.is_boolean(t):
        kind = "bool"
    elif pa.types.is_null(t) or pa.types.is_string(t):
        return None
    else:
        raise DeclineBlock()
    valid = ~np.asarray(a.is_null().to_numpy(zero_copy_only=False), bool)
    vals = a.fill_null(False if kind == "bool" else 0).to_numpy(zero_copy_only=False)
    return vals, valid, kind


def _rows(block: bytes, line: int, source: str) -> StatsBatch:
    nl = object_line_ends(block)
    n = int(nl.size)
    lines = _lines(block, nl)
    rows, paths = _decode(block, nl)
    if len(rows) != n:
        raise DeclineBlock()
    names = [parts[-1] for _, parts, _ in paths]
    if len(set(names)) != len(names):
        raise DeclineBlock()
    leaves: dict[str, pa.Array] = {}
    objects: dict[tuple[str, ...], tuple[list, bool]] = {(): (rows, True)}
    quotes = 0                                  # quotes the keys and strings read account for
    for path, parts, family in paths:
        vals = _values(objects[parts[:-1]], parts[-1])
        if family is None:
            absent = vals.count(_UNSET)
            objects[parts] = (vals, not absent and None not in vals)
            quotes += 2 * (n - absent)
            continue
        if family == "any":
            kinds = set(map(type, vals)) - {type(None), type(_UNSET)}
            if kinds and not any(kinds <= f for f in _FAMILIES):
                raise DeclineBlock()    # Arrow would fold the families together
        arr, absent = _leaf(vals)
        quotes += 2 * (n - absent + (n - arr.null_count if pa.types.is_string(arr.type) else 0))
        leaves[path] = arr
    if block.count(b'"') != quotes:
        raise DeclineBlock()    # a key given twice (json.loads keeps its first place)

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
            if kind == "float" and column in FLOAT_COLUMNS:
                typed_ok = valid
                cols[column] = pa.array(vals, pa.float64(), mask=~typed_ok)
            elif kind == "int" and column in FLOAT_COLUMNS:
                typed_ok = valid
                cols[column] = pa.array(vals.astype(np.float64), pa.float64(), mask=~typed_ok)
            elif kind in ("int", "float"):
                bound = INT_BOUNDS.get(column, 2 ** 63 - 1)
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
                target = STATS_READ.field(column).type
                cols[column] = pa.array(np.where(typed_ok, ints, 0).astype(target.to_pandas_dtype()),
                                        target, mask=~typed_ok)
            in_fields = valid & ~typed_ok
        if in_fields.any():
            field_names.append(path)
            field_vals.append(vals.astype(np.float64))
            field_mask.append(in_fields)

    _check_key_order(lines, field_names, field_mask)

    ts = leaves.get("timestamp")
    cols["timestamp"] = ts if ts is not None and pa.types.is_string(ts.type) \
        else pa.nulls(n, pa.string())
    cols["fields"] = _fields_map(n, field_names, field_vals, field_mask)
    ln = np.arange(line, line + n, dtype=np.int64)
    cols["line"] = pa.array(ln)
    cols["line_end"] = cols["line"]
    cols["source"] = pa.array([source], pa.string()).take(pa.array(np.zeros(n, np.int32)))
    stats = pa.table([cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in STATS_READ],
                     schema=STATS_READ)
    return StatsBatch(stats=stats, events=EVENTS.empty_table(), unparsed=UNPARSED.empty_table())


def _check_key_order(lines: pa.StringArray, names: list[str], masks: list[np.ndarray]) -> None:
    """Each row's fields in its own key order must be ``names`` order (the map keeps the
    object's order): one regex per set of present keys, over the rows with that set."""
    if len(names) < 2:
        return
    if len(names) > 62:
        raise DeclineBlock()
    m = np.stack(masks, axis=1)
    sets = m.astype(np.int64) @ (np.int64(1) << np.arange(len(names), dtype=np.int64))
    groups = np.unique(sets)
    for g in groups.tolist():
        present = [p for i, p in enumerate(names) if g >> i & 1]
        if len(present) < 2:
            continue
        pattern = ".*".join(re.escape(f'"{p.rsplit(".", 1)[-1]}":') for p in present)
        rows = lines if groups.size == 1 else lines.filter(pa.array(sets == g))
        if not pc.all(pc.match_substring_regex(rows, pattern)).as_py():
            raise DeclineBlock()


def _fields_map(n: int, names: list[str], vals: list[np.ndarray], masks: list[np.ndarray]
                ) -> pa.MapArray:
    """The ``fields`` map: per row, the leaves whose mask is set, in ``names`` order."""
    if not names:
        return pa.MapArray.from_arrays(np.zeros(n + 1, np.int32), pa.array([], pa.string()),
                                       pa.array([], pa.float64()), type=STATS_READ.field("fields").type)
    m = np.stack(masks, axis=1)                       # (n, k), row-major = per-row order
    v = np.stack(vals, axis=1)
    idx = np.nonzero(m.ravel())[0]
    key_idx = (idx % len(names)).astype(np.int32)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(m.sum(axis=1), out=offsets[1:])
    keys = pa.array(names, pa.string()).take(pa.array(key_idx))
    return pa.MapArray.from_arrays(pa.array(offsets), keys, pa.array(v.ravel()[idx], pa.float64()),
                                   type=STATS_READ.field("fields").type)


__all__ = ["BLOCK_BYTES", "fast_block"]
