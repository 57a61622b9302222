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

Two readers, no regex capture over whole lines (RE2's capturing engine is slow on long text).
:class:`Layouts` (the fast path, used by the log parser) learns the layout of a line once and
reads every line of that layout by position-checked name (see below); both give the same row
for a line, so a result never depends on block boundaries. :func:`parse` (general, any line)
splits each line on ``", "`` into pairs and each pair on ``" = "`` / ``": "``; the last two
parts of a pair are its name and value (so ``states = {'num_ctx_requests': 0`` yields the first
``states`` key); the first pair is the logger prefix then ``iter``, read with :data:`_FIRST`
whatever its separator (``iter=7``). Known names are scattered into typed columns with numpy.
Unknown names go to the ``extra`` map (``states`` keys as ``states.<key>``); a fragment that is
no pair (a truncated line) is kept in ``extra`` as a key with a null value; a known field with
an unreadable value is kept in ``extra`` too, so nothing is lost. A repeated field
(``foo = 1, foo = 2``) is read from its first occurrence; the later ones go to ``extra`` as
``foo#2``, ``foo#3`` (map keys must be unique to load).
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import ITERATIONS, WRAPPER_FIELDS
from forensics.dataset import log_fields
from forensics.readers import timestamps
from forensics.readers.line_prefix import spans, string_offsets

#: A body is an iteration line when it starts with its ``iter`` field.
ITERATION_LINE = r"^iter ?(?:=|:) ?\d{1,18}(?:,|$)"
#: How the first pair ends (prefix, then the ``iter`` field); :meth:`_Pairs.iter_values`
#: implements it with byte tests.
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
_STATE_KEYS = tuple(f.name for f in log_fields.unique() if f.in_states)
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
        "source": pa.repeat(pa.scalar(source, pa.string()), n),
        "line": line, "format": pa.array(fmt, pa.string()),
        "extra": extra, **cols, **_no_wrappers(n),
    }
    _typed_times(arrays, log_time)
    return pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in ITERATIONS],
                                schema=ITERATIONS)


# --------------------------------------------------------------------------- layout fast path
#
# Within a log almost every iteration line has the same *layout*: the same field names, in the
# same order, with the same separators. A layout is learnt (in Python) from one line. A block's
# lines are split on ", " once (:class:`_Pairs`); a line has the layout when it has the layout's
# number of pairs, each pair starts with the layout's key text (a literal ``starts_with``, no
# regex over the line) and each known value casts to its type (only when a cast fails are the
# values checked one by one against their pattern). Such lines are read by cutting the known key
# off by byte offsets: still by name, with no per-pair key/value split.
#
# The fast path must give exactly what :func:`parse` gives for a line (so the result does not
# depend on which reader a block boundary or a thread race sends the line to). Lines where the
# two readings could differ are refused by the layout and go to :func:`parse`: a value ending in
# ``}`` (``parse`` strips it) or holding another separator (``": "``, ``" = "``), a known name
# outside its place (a ``states`` key outside the dict or the reverse), a quoted key outside
# ``states``, and values a cast accepts but the field pattern does not (``-1``, ``0x10``,
# ``nan``, ``inf``).

# ``states`` then a separator :func:`parse` splits on (`` = ``, ``: ``; ``states ={`` is one
# name there, so it is no layout either)
_LAYOUT_PAIR = re.compile(r"^(?P<key>(?:states(?: = | ?: )\{)?'?(?P<name>[A-Za-z_][\w.]*)'?"
                          r"(?: = |: ))(?P<value>.*)$", re.ASCII)
_V_NUM = r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A)$"
_V_RATIO = rf"^\d{{1,{_RATIO.digits}}}/\d{{1,{_RATIO.digits}}}$"
_BRACE = ord("}")
#: Layouts remembered across blocks (most recently learnt first).
MAX_LAYOUTS = 16


def _evens(k: int, valid: np.ndarray | None = None) -> pa.Array:
    """Indices of the even elements of a :func:`spans` array, null where not ``valid`` (a
    ``take`` with null indices is 20x slower, so they are only used when needed)."""
    idx = np.arange(0, 2 * k, 2)
    if valid is None or valid.all():
        return pa.array(idx)
    return pa.array(idx, mask=~valid)


class _Pairs:
    """The iteration lines of a block split on ``", "`` once, as byte spans of one buffer.

    Fields: ``counts`` (pairs per line), ``first`` (index of each line's first pair),
    ``start``/``end`` (byte span of each pair in ``data``), ``data`` (the Arrow buffer) and
    ``bytes`` (the same bytes as a numpy array).
    """

    def __init__(self, lines: pa.Array):
        split = pc.split_pattern(lines, ", ")
        lo = split.offsets.to_numpy()
        vo, self.data, self.bytes = string_offsets(split.values)
        self.counts = np.diff(lo)
        self.first = lo[:-1]
        self.start = vo[:-1]
        self.end = vo[1:]

    def spans(self, start: np.ndarray, end: np.ndarray) -> pa.Array:
        """:func:`~forensics.readers.line_prefix.spans` of this block's bytes."""
        return spans(self.data, start, end)

    def iter_values(self, first: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """``iter`` of each line whose first pair ends like :data:`_FIRST`, else null; and
        the mask of those lines.

        Byte tests in numpy instead of a regex over the pair (which holds the whole prefix):
        the value is the pair's trailing ASCII digit run, preceded by ``iter ?(=|:) ?``.
        """
        b = self.bytes
        start, end = self.start[first], self.end[first]
        n = np.zeros(len(first), dtype=np.int64)
        more = end > start
        while more.any():
            at = np.where(more, end - n - 1, 0)
            digit = more & (b[at] >= 48) & (b[at] <= 57)
            n += digit
            more = digit & (end - n > start)
        q = end - n

        def at(pos: np.ndarray, ok: np.ndarray) -> np.ndarray:
            return b[np.where(ok & (pos >= start), pos, 0)]

        def is_(pos: np.ndarray, ok: np.ndarray, chars: bytes) -> np.ndarray:
            v = at(pos, ok)
            hit = np.zeros(len(pos), dtype=bool)
            for c in chars:
                hit |= v == c
            return ok & (pos >= start) & hit

        def iter_before(pos: np.ndarray, ok: np.ndarray) -> np.ndarray:   # "iter" ends at pos
            for i, c in enumerate(b"iter"):
                ok = is_(pos - 4 + i, ok, bytes([c]))
            return ok

        p = q - is_(q - 1, n > 0, b" ")                  # optional space after the separator
        sep = is_(p - 1, n > 0, b"=:")
        p = p - 1
        sp = is_(p - 1, sep, b" ")                       # optional space before it
        ok = iter_before(p, sep & ~sp) | iter_before(p - 1, sp)
        return pc.cast(self.spans(np.where(ok, q, start), np.where(ok, end, start)).take(
            _evens(len(first), ok)), pa.int64()), ok

    def ends_with_brace(self, start: np.ndarray, end: np.ndarray, back: int = 1) -> np.ndarray:
        """Whether the span's byte ``back`` from its end is ``}`` (numpy, no Arrow call)."""
        ok = (end - start) >= back
        at = np.where(ok, end - back, 0)
        return ok & (self.bytes[at] == _BRACE) if len(self.bytes) else ok


def _strict_cast(v: pa.Array, typ: pa.DataType, digits: int) -> pa.Array:
    """``v`` (no unit, ``N/A`` already null) cast to ``typ``; ArrowInvalid also where the cast
    accepts what the field pattern does not (a sign, hex or more than ``digits`` digits for
    integers, nan/inf)."""
    c = pc.cast(v, typ)
    if pa.types.is_integer(typ):
        strict = (pc.all(pc.ascii_is_decimal(v)).as_py() is not False
                  and (pc.max(pc.utf8_length(v)).as_py() or 0) <= digits)
    else:
        strict = pc.all(pc.is_finite(c)).as_py() is not False
    if not strict:
        raise pa.ArrowInvalid("value outside the field pattern")
    return c


class Layout:
    """The field names, order and separators of one iteration-line shape.

    Fields: ``fields`` (per pair after ``iter``: key text, column or None, unit, value pattern
    or None, in-states flag, last-in-states flag, name), ``n_pairs``, ``format``, ``signature``.
    """

    def __init__(self, line: str):
        m0 = re.search(r"iter ?(?:=|:) ?\d+", line)
        if m0 is None:
            raise ValueError("not an iteration line")
        pairs = line[m0.start():].split(", ")
        self.fields: list[tuple[str, str | None, str, str | None, bool, bool, str]] = []
        in_states = False
        names = set()
        for p in pairs[1:]:
            m = _LAYOUT_PAIR.match(p)
            if m is None:
                raise ValueError("not a layout")
            key, name = m["key"], m["name"]
            if key.startswith("states"):
                in_states = True
            last = in_states and p.endswith("}")
            if (name, in_states) in names or (in_states and not key.endswith("': ")):
                raise ValueError("not a layout")
            if not in_states and "'" in key:
                raise ValueError("not a layout")   # parse() reads a quoted key as a states key
            if name in _NAMES and (name in _STATE_KEYS) != in_states:
                raise ValueError("not a layout")   # parse() reads known names anywhere
            names.add((name, in_states))
            known = KNOWN_FIELDS.get(name)
            col, unit, check = None, "", None
            if name == _TIME.name:
                col = _TIME.column
            elif name == _RATIO.name:
                col, check = _RATIO.column, _V_RATIO
            elif known is not None:
                col, unit = known[0], known[2]
                check = (rf"^(?:\d{{1,{_DIGITS[name]}}}|N/A)$" if name in _DIGITS else _V_NUM)
            self.fields.append((key, col, unit, check, in_states, last, name))
            if last:
                in_states = False
        keys = [f[0] for f in self.fields]
        # the newest format a field implies, by its separator (as :func:`parse`)
        self.format = log_fields.FORMATS[max(
            [_IMPLIED[f[6]][f[0].endswith(" = ")] for f in self.fields if f[1] is not None],
            default=0)]
        self.n_pairs = len(pairs)
        self.signature = tuple(keys) + tuple(f[5] for f in self.fields)

    def read(self, pairs: _Pairs, rows: np.ndarray, *, source: str, line: pa.Array,
             rank: pa.Array, log_time: pa.Array) -> tuple[pa.Table, np.ndarray]:
        """Rows of the lines ``rows`` (which have this layout's number of pairs) that really have
        this layout, and the mask (over ``rows``) of those lines. ``line``, ``rank`` and
        ``log_time`` are already those of ``rows``."""
        k_rows = len(rows)
        base = pairs.first[rows]
        evens = _evens(k_rows)
        good = np.ones(k_rows, dtype=bool)

        def check(values: pa.Array, pattern: str) -> None:
            good[:] &= pc.fill_null(pc.match_substring_regex(values, pattern), False)\
                .to_numpy(zero_copy_only=False)

        cols: dict[str, pa.Array] = {}
        # prefix + iter (the caller's line match saw it); a first pair that does not end with
        # it (``iter = 5,x = 1``) is left to parse()
        cols["iter"], ok = pairs.iter_values(base)
        good &= ok
        extra_keys, extra_vals = [], []
        for j, (key, col, unit, pattern, in_states, last, name) in enumerate(self.fields, 1):
            s, e = pairs.start[base + j], pairs.end[base + j]
            fits = pc.starts_with(pairs.spans(s, e), key).to_numpy(zero_copy_only=False)[::2]
            if last:   # ends with exactly one "}" (parse() strips every one)
                fits = fits & pairs.ends_with_brace(s, e) & ~pairs.ends_with_brace(s, e, 2)
            else:
                fits = fits & ~pairs.ends_with_brace(s, e)
            good &= fits
            vs = np.where(fits, s + len(key), s)
            ve = np.where(fits, e - 1 if last else e, s)
            v = pairs.spans(vs, ve).take(evens)
            if col is None or col == _TIME.column:
                # another separator in the value: parse() would split the pair there
                good &= ~(pc.match_substring(v, ": ").to_numpy(zero_copy_only=False)
                          | pc.match_substring(v, " = ").to_numpy(zero_copy_only=False))
                if col is None:
                    extra_keys.append(f"states.{name}" if in_states else name)
                    extra_vals.append(v)
                else:
                    cols[col] = v
                continue
            if unit:
                v = pc.utf8_rtrim(v, characters=unit)
            if col != _RATIO.column:
                typ = ITERATIONS.field(col).type
                v = pc.if_else(pc.equal(v, "N/A"), _NULL, v)
                try:   # a failed cast is rare: only then pay for the value pattern
                    cols[col] = _strict_cast(v, typ, _DIGITS.get(name, 0))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    check(pc.fill_null(v, "N/A"), pattern)
                    cols[col] = pc.cast(pc.if_else(pa.array(good), v, _NULL), typ)
                continue
            # the ratio a/b
            check(v, pattern)
            slash = pc.find_substring(v, "/").to_numpy(zero_copy_only=False)
            ok = good & (slash >= 0)
            mid = np.where(ok, vs + slash, vs)
            at = _evens(k_rows, ok)
            a = pairs.spans(vs, mid).take(at)
            b = pairs.spans(np.where(ok, mid + 1, vs), np.where(ok, ve, vs)).take(at)
            for c, part in zip(_RATIO.columns, (a, b)):
                cols[c] = pc.cast(part, _RATIO.type)
        for col, typ, _u in KNOWN_FIELDS.values():
            cols.setdefault(col, pa.nulls(k_rows, typ))
        cols.setdefault(_TIME.column, pa.nulls(k_rows, pa.string()))
        for col in _RATIO.columns:
            cols.setdefault(col, pa.nulls(k_rows, _RATIO.type))
        cols["rank"] = pc.coalesce(cols["rank"], pc.cast(rank, pa.int32()))
        k = len(extra_keys)
        offsets = pa.array(np.arange(k_rows + 1, dtype=np.int32) * k)
        if k:
            perm = (np.arange(k_rows)[:, None] + np.arange(k)[None, :] * k_rows).ravel()
            keys = pa.array(np.tile(np.array(extra_keys, dtype=object), k_rows), pa.string())
            vals = pa.concat_arrays(extra_vals).take(pa.array(perm))
        else:
            keys = vals = pa.array([], pa.string())
        arrays = {
            "source": pa.repeat(pa.scalar(source, pa.string()), k_rows), "line": line,
            "log_time": log_time, "format": pa.repeat(pa.scalar(self.format), k_rows),
            "extra": pa.MapArray.from_arrays(offsets, keys, vals), **cols,
            **_no_wrappers(k_rows),
        }
        _typed_times(arrays, log_time)
        table = pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in ITERATIONS],
                                     schema=ITERATIONS)
        if not good.all():
            table = table.filter(pa.array(good))
        return table, good


class Layouts:
    """Layouts learnt so far; shared by the worker threads of one parse."""

    def __init__(self) -> None:
        self._known: list[Layout] = []
        self._lock = threading.Lock()

    def parse(self, lines: pa.Array, *, source: str, line: pa.Array, rank: pa.Array,
              log_time: pa.Array) -> pa.Table:
        """Like :func:`parse`, fast for lines of a known or learnable layout.

        The lines must be iteration lines (wrappers then ``iter = N``), as the log parser's
        line match guarantees; the layout checks every later field.
        """
        n = len(lines)
        left = np.ones(n, dtype=bool)
        tables = []
        if n == 0:
            return parse(lines, source=source, line=line, rank=rank, log_time=log_time)
        pairs = _Pairs(lines)
        with self._lock:
            known = list(self._known)
        tried: set[tuple] = set()
        learnt = 0
        while left.any():
            new = False
            if known:
                lay = known.pop(0)
            else:
                if learnt >= 4:
                    break
                learnt += 1
                try:
                    lay = Layout(lines[int(np.flatnonzero(left)[0])].as_py())
                except ValueError:
                    break
                if lay.signature in tried:
                    break
                new = True
            tried.add(lay.signature)
            rows = np.flatnonzero(left & (pairs.counts == lay.n_pairs))
            if len(rows) == 0:
                if new:
                    break
                continue
            whole = len(rows) == n
            sel = None if whole else pa.array(rows)
            table, hit = lay.read(
                pairs, rows, source=source,
                line=line if whole else line.take(sel), rank=rank if whole else rank.take(sel),
                log_time=log_time if whole else log_time.take(sel))
            if not hit.any():
                if new:
                    break   # a line that does not fit its own layout: odd values
                continue
            if new:
                with self._lock:
                    self._known.insert(0, lay)
                    del self._known[MAX_LAYOUTS:]
            tables.append(table)
            left[rows[hit]] = False
        if left.any():
            sel = pa.array(np.flatnonzero(left))
            tables.append(parse(lines.take(sel), source=source, line=line.take(sel),
                                rank=rank.take(sel), log_time=log_time.take(sel)))
        if len(tables) == 1:
            return tables[0]
        t = pa.concat_tables(tables)
        return t.take(pc.sort_indices(t, [("line", "ascending")]))
