"""Iteration log lines (``print_iter_log``) to ``iterations`` rows, vectorised.

Field order and separators changed across releases, so fields are read by name, never by
position (docs/adp-executor.md section 8):

* V1 (early 2025): ``iter, global_rank, rank, currank_total_requests = a/b,
  elapsed_time = <s>s, timestamp, states = {...}``;
* V2: V1 plus ``num_scheduled_requests: N`` (PR #3914);
* V3 (late 2025): ``elapsed_time`` replaced by ``host_step_time = <ms>ms,
  prev_device_step_time = <ms>ms`` (``N/A`` on the first iteration);
* V4 (PR #14206): ``num_scheduled_requests = N`` moves after ``rank`` and uses ``=``;
  ``kv_cache_util`` is added;
* V5 (PR #18308): ``adp_dummy_ctx_tokens``, ``adp_dummy_gen_tokens`` added.

No regex capture over whole lines (RE2's capturing engine is slow on long text).
:func:`parse` is the reference reader (a big log's common lines are read by :mod:`native_scan`
first, which gives the same row for a line, so a result never depends on which reader took
it). It splits each line on ``", "`` into pairs and each pair on ``" = "`` / ``": "``; the last
two parts of a pair are its name and value (so ``states = {'num_ctx_requests': 0`` yields the
first ``states`` key); the first pair is the logger prefix then ``iter``, read with
:data:`_FIRST` whatever its separator (``iter=7``). Known names are scattered into typed columns
with numpy. Unknown names go to the ``extra`` map (``states`` keys as ``states.<key>``); a
fragment that is no pair (a truncated line) is kept in ``extra`` as a key with a null value; a
known field with an unreadable value is kept in ``extra`` too, so nothing is lost. A repeated
field (``foo = 1, foo = 2``) is read from its first occurrence; the later ones go to ``extra``
as ``foo#2``, ``foo#3`` (map keys must be unique to load).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import ITERATIONS, WRAPPER_FIELDS
from forensics.dataset import log_fields
from forensics.readers import timestamps
from forensics.readers.line_prefix import string_offsets
from forensics.readers.repeated_text import repeated

#: A body is an iteration line when it starts with its ``iter`` field.
ITERATION_LINE = r"^iter ?(?:=|:) ?\d{1,18}(?:,|$)"
#: How the first pair ends (prefix, then the ``iter`` field).
_FIRST = r"iter ?(?:=|:) ?(?P<v>\d{1,18})$"


def starts_iteration(lines: pa.Array, offset: np.ndarray) -> np.ndarray:
    """Per line, whether its body (from byte ``offset``; -1 = unknown, gives False) matches
    :data:`ITERATION_LINE`. Byte tests in numpy for the lines whose prefix was cut by offset,
    instead of a second regex pass over every line."""
    off, _data, raw = string_offsets(lines)
    end = off[1:].astype(np.int64)
    known = offset >= 0
    p = off[:-1] + np.where(known, offset, 0)

    def byte(pos: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inside = ok & (pos < end)
        return inside, raw[np.where(inside, pos, 0)] if len(raw) else np.zeros(len(pos), np.uint8)

    def is_(pos: np.ndarray, ok: np.ndarray, chars: bytes) -> np.ndarray:
        inside, v = byte(pos, ok)
        hit = np.zeros(len(pos), dtype=bool)
        for c in chars:
            hit |= v == c
        return inside & hit

    def digit(pos: np.ndarray, ok: np.ndarray) -> np.ndarray:
        inside, v = byte(pos, ok)
        return inside & (v >= 48) & (v <= 57)

    ok = known
    for i, c in enumerate(b"iter"):
        ok = is_(p + i, ok, bytes([c]))
    q = p + 4
    q = q + is_(q, ok, b" ")
    ok = is_(q, ok, b"=:")
    q = q + 1
    q = q + is_(q, ok, b" ")
    digits = np.zeros(len(p), dtype=np.int64)
    more = digit(q, ok)
    while more.any():
        digits += more
        more = digit(q + digits, more)
    r = q + digits
    # At most 18 digits: the value must fit int64 (a longer one is not an iteration line).
    return ok & (digits > 0) & (digits <= MAX_INT64_DIGITS) & ((r == end) | is_(r, ok, b","))


_NUMBER = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
MAX_INT64_DIGITS = log_fields.MAX_DIGITS[64]

#: name in the line -> (column, type, unit characters to strip from the value's end), for the
#: integer and decimal fields of :data:`~forensics.dataset.log_fields.ITERATION_FIELDS`
KNOWN_FIELDS: dict[str, tuple[str, pa.DataType, str]] = {
    f.name: (f.column, f.type, f.unit) for f in log_fields.unique()
    if f.kind in (log_fields.INT, log_fields.DECIMAL)}
#: most digits of each integer field
_DIGITS = {f.name: f.digits for f in log_fields.unique() if f.kind == log_fields.INT}
(_TIME,) = [f for f in log_fields.unique() if f.kind == log_fields.TIME]
(_RATIO,) = [f for f in log_fields.unique() if f.kind == log_fields.RATIO]
_NAMES = list(KNOWN_FIELDS) + [_TIME.name, _RATIO.name]
_ALL_KNOWN = pa.array(_NAMES)
_TS, _CURRANK = len(KNOWN_FIELDS), len(KNOWN_FIELDS) + 1
#: per name, the format index its presence implies printed with ": " and with " = "
_IMPLIED = log_fields.implied_formats()


def _integer_pattern(name: str) -> str:
    return rf"^\d{{1,{_DIGITS[name]}}}$"


_NULL = pa.scalar(None, pa.string())


def _typed_times(arrays: dict[str, pa.Array], log_time: pa.Array) -> None:
    """``timestamp`` and ``log_time`` as timestamps, their text kept where they do not parse."""
    arrays[_TIME.column], arrays[_TIME.column + "_text"] = timestamps.parse(arrays[_TIME.column])
    arrays["log_time"], arrays["log_time_text"] = timestamps.parse(log_time)


def _no_wrappers(n: int) -> dict[str, pa.Array]:
    """The wrapper columns, null (the log parser fills them from the line prefixes)."""
    return {f.name: pa.nulls(n, f.type) for f in WRAPPER_FIELDS}


def _index(n: int, parent: np.ndarray, sel: np.ndarray) -> pa.Array:
    """Per row, the index of its first selected pair, null where none."""
    idx = np.full(n, -1, dtype=np.int64)
    pos = np.flatnonzero(sel)[::-1]   # assigned last to first: the first one stays
    idx[parent[pos]] = pos
    return pa.array(idx, mask=idx < 0)


def _first_only(parent: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``sel`` less every selected pair after the first of its row (a repeated field: the
    first occurrence goes to the column, the others to ``extra``)."""
    pos = np.flatnonzero(sel)
    keep = np.zeros(len(sel), dtype=bool)
    if len(pos):
        rows = parent[pos]
        keep[pos[np.r_[True, rows[1:] != rows[:-1]]]] = True
    return keep


def _unique_keys(keys: pa.Array, parent: np.ndarray) -> pa.Array:
    """``keys`` (per pair kept in ``extra``, rows in order) with a repeated key of a row renamed
    ``name#2``, ``name#3``...: a map with duplicate keys cannot be loaded into pandas."""
    if len(keys) < 2:
        return keys
    tagged = pc.binary_join_element_wise(pa.array(parent.astype(str)), keys, "\x1f")
    if len(pc.unique(tagged)) == len(keys):
        return keys
    out, seen = keys.to_pylist(), {}
    for i, (p, k) in enumerate(zip(parent.tolist(), out)):
        c = seen[(p, k)] = seen.get((p, k), 0) + 1
        if c > 1:
            name = f"{k}#{c}"
            while (p, name) in seen:   # a literal ``x#2`` key already on the line
                c += 1
                name = f"{k}#{c}"
            seen[(p, name)] = 1
            out[i] = name
    return pa.array(out, pa.string())


def _ok(values: pa.Array, pattern: str) -> np.ndarray:
    return pc.fill_null(pc.match_substring_regex(values, pattern), False).to_numpy(
        zero_copy_only=False)


def parse(lines: pa.Array, *, source: str, line: pa.Array, rank: pa.Array,
          log_time: pa.Array) -> pa.Table:
    """Rows of ``ITERATIONS`` for lines already known to be iteration lines.

    Args:
        lines: the lines, prefixes included or not (the body must start with ``iter``).
        source: the input's display name.
        line: 1-based line numbers (int64), same length.
        rank: rank from the prefixes (logger, else launcher), used when the line has no
            ``global_rank`` field.
        log_time: the logger prefix's time.

    Example: ``iter = 7, global_rank = 2, rank = 2, num_scheduled_requests = 3,
    kv_cache_util = N/A, ...`` gives iter 7, rank 2, local_rank 2, num_scheduled_requests 3,
    kv_cache_util null and format V4.
    """
    n = len(lines)
    pairs_list = pc.split_pattern(lines, ", ")
    pair_off = pairs_list.offsets.to_numpy()
    pairs_list_off0 = pair_off[0]
    pairs = pc.list_flatten(pairs_list)
    np_ = len(pairs)
    parent = np.repeat(np.arange(n), np.diff(pair_off))
    first = np.zeros(np_, dtype=bool)
    first[pair_off[:-1][np.diff(pair_off) > 0] - pairs_list_off0] = True

    # two literal splits (much cheaper than one regex split): " = " then ": "
    a_list = pc.split_pattern(pairs, " = ")
    a_off = a_list.offsets.to_numpy()
    b_list = pc.split_pattern(pc.list_flatten(a_list), ": ")
    b_off = b_list.offsets.to_numpy()
    parts = pc.list_flatten(b_list)
    start = b_off[a_off[:-1] - a_off[0]] - b_off[0]
    end = b_off[a_off[1:] - a_off[0]] - b_off[0]
    is_pair = (end - start) >= 2
    if np_:
        keys_raw = parts.take(pa.array(np.where(is_pair, end - 2, start)))
        vals_raw = parts.take(pa.array(np.where(is_pair, end - 1, start)))
    else:
        keys_raw = vals_raw = pa.array([], pa.string())
    keys = pc.utf8_trim(keys_raw, characters="{'")
    vals = pc.if_else(pa.array(is_pair), pc.utf8_rtrim(vals_raw, characters="}"), _NULL)
    keys = pc.if_else(pa.array(is_pair), keys, pairs)  # a fragment is its own key
    code = pc.fill_null(pc.index_in(keys, value_set=_ALL_KNOWN), -1).to_numpy().copy()
    code[first] = -2  # the first pair is ``iter`` (after any prefix)
    code[~is_pair] = -1

    cols: dict[str, pa.Array] = {}
    # the first pair is the prefix then ``iter``, with any of its separators (``iter=7``)
    iter_v = pc.extract_regex(pc.take(pairs, _index(n, parent, first)), _FIRST).flatten()[0]
    iter_ok = pc.is_valid(iter_v).to_numpy(zero_copy_only=False)
    cols["iter"] = pc.cast(iter_v, pa.int64())
    claimed = first & iter_ok[parent]
    present: dict[str, np.ndarray] = {}
    for i, (name, (col, typ, unit)) in enumerate(KNOWN_FIELDS.items()):
        sel = _first_only(parent, code == i)
        if not sel.any():
            cols[col] = pa.nulls(n, typ)
            present[name] = np.zeros(n, dtype=bool)
            continue
        v = pc.take(vals, _index(n, parent, sel))
        if unit:
            v = pc.utf8_rtrim(v, characters=unit)
        na = pc.fill_null(pc.equal(v, "N/A"), False).to_numpy(zero_copy_only=False)
        ok = _ok(v, _integer_pattern(name) if name in _DIGITS else _NUMBER)
        good_row = ok | na
        has = np.zeros(n, dtype=bool)
        has[parent[sel]] = True
        present[name] = has & good_row
        claimed |= sel & good_row[parent]
        cols[col] = pc.cast(pc.if_else(pa.array(ok), v, _NULL), typ)
    sel = _first_only(parent, code == _TS)
    claimed |= sel
    cols[_TIME.column] = pc.take(vals, _index(n, parent, sel))
    present[_TIME.name] = np.zeros(n, dtype=bool)
    present[_TIME.name][parent[sel]] = True
    sel = _first_only(parent, code == _CURRANK)
    d = _RATIO.digits
    ab = pc.extract_regex(pc.take(vals, _index(n, parent, sel)),
                          rf"^(?P<a>\d{{1,{d}}})/(?P<b>\d{{1,{d}}})$")
    ab_ok = pc.is_valid(ab).to_numpy(zero_copy_only=False)
    for col, part in zip(_RATIO.columns, ab.flatten()):
        cols[col] = pc.cast(part, _RATIO.type)
    claimed |= sel & ab_ok[parent]
    present[_RATIO.name] = ab_ok
    cols["rank"] = pc.coalesce(cols["rank"], pc.cast(rank, pa.int32()))

    # format: the newest a present field implies; a field printed with either separator in
    # different formats (num_scheduled_requests: V2, " = ": V4) implies by its separator, and
    # only where the field was read (a line whose value does not parse, "= 0,", is V1 as when
    # alone, not V4 because another line of its block has the field)
    fmt_i = np.zeros(n, dtype=np.int8)
    for name, (colon, eq) in _IMPLIED.items():
        has = present[name]
        if colon == eq or not has.any():
            fmt_i = np.maximum(fmt_i, np.where(has, colon, 0))
            continue
        with_eq = has & _ok(lines, ", " + re.escape(name) + " = ")
        fmt_i = np.maximum(fmt_i, np.where(with_eq, eq, np.where(has, colon, 0)))
    fmt = np.array(log_fields.FORMATS, dtype=object)[fmt_i]

    rest = np.flatnonzero(~claimed)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent[rest], minlength=n), out=offsets[1:])
    if len(rest):
        ridx = pa.array(rest)
        is_state = _ok(pc.take(keys_raw, ridx), r"^\{?'")
        rkeys = pc.take(keys, ridx)
        rkeys = pc.if_else(pa.array(is_state & is_pair[rest]),
                           pc.binary_join_element_wise("states", rkeys, "."), rkeys)
        rvals = pc.take(vals, ridx)
        rkeys = _unique_keys(rkeys, parent[rest])
    else:
        rkeys = rvals = pa.array([], pa.string())
    extra = pa.MapArray.from_arrays(pa.array(offsets), rkeys, rvals)
    arrays = {
        "source": repeated(source, n),
        "line": line, "format": pa.array(fmt, pa.string()),
        "extra": extra, **cols, **_no_wrappers(n),
    }
    _typed_times(arrays, log_time)
    return pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in ITERATIONS],
                                schema=ITERATIONS)

