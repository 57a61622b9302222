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
reads every line of that layout by position-checked name (see below). :func:`parse` (general,
any line) splits each line on ``", "`` into pairs and each pair on ``" = "`` / ``": "``; the
last two parts of a pair are its name and value (so ``states = {'num_ctx_requests': 0`` yields
the first ``states`` key, and the logger prefix ends up in front of the first name, which is
always ``iter``). Known names are scattered into typed columns with numpy. Unknown names go to
the ``extra`` map (``states`` keys as ``states.<key>``); a fragment that is no pair (a truncated
line) is kept in ``extra`` as a key with a null value; a known field with an unreadable value
is kept in ``extra`` too, so nothing is lost.
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset.schema import ITERATIONS

#: A body is an iteration line when it starts with its ``iter`` field.
ITERATION_LINE = r"^iter ?(?:=|:) ?\d+(?:,|$)"

_NUMBER = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
_INTEGER = r"^\d+$"

#: name in the line -> (column, type, unit characters to strip from the value's end)
KNOWN_FIELDS: dict[str, tuple[str, pa.DataType, str]] = {
    "global_rank": ("rank", pa.int32(), ""),
    "rank": ("local_rank", pa.int32(), ""),
    "num_scheduled_requests": ("num_scheduled_requests", pa.int32(), ""),  # PR #3914
    "host_step_time": ("host_step_time_ms", pa.float64(), "ms"),
    "prev_device_step_time": ("prev_device_step_time_ms", pa.float64(), "ms"),
    "elapsed_time": ("elapsed_time_s", pa.float64(), "s"),
    "kv_cache_util": ("kv_cache_util", pa.float64(), ""),               # PR #14206
    "num_ctx_requests": ("num_ctx_requests", pa.int64(), ""),          # states dict keys
    "num_ctx_tokens": ("num_ctx_tokens", pa.int64(), ""),
    "num_generation_tokens": ("num_generation_tokens", pa.int64(), ""),
    "adp_dummy_ctx_tokens": ("adp_dummy_ctx_tokens", pa.int64(), ""),  # PR #18308
    "adp_dummy_gen_tokens": ("adp_dummy_gen_tokens", pa.int64(), ""),
}
_STATE_KEYS = ("num_ctx_requests", "num_ctx_tokens", "num_generation_tokens")
_NAMES = list(KNOWN_FIELDS) + ["timestamp", "currank_total_requests"]
_ALL_KNOWN = pa.array(_NAMES)
_TS, _CURRANK = len(KNOWN_FIELDS), len(KNOWN_FIELDS) + 1
_NULL = pa.scalar(None, pa.string())


def _index(n: int, parent: np.ndarray, sel: np.ndarray) -> pa.Array:
    """Per row, the index of the (last) selected pair, null where none."""
    idx = np.full(n, -1, dtype=np.int64)
    pos = np.flatnonzero(sel)
    idx[parent[pos]] = pos
    return pa.array(idx, mask=idx < 0)


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

    claimed = first & is_pair
    cols: dict[str, pa.Array] = {}
    iter_v = pc.take(vals, _index(n, parent, first & is_pair))
    iter_ok = _ok(iter_v, _INTEGER)
    cols["iter"] = pc.cast(pc.if_else(pa.array(iter_ok), iter_v, _NULL), pa.int64())
    claimed &= iter_ok[parent]
    present: dict[str, np.ndarray] = {}
    for i, (name, (col, typ, unit)) in enumerate(KNOWN_FIELDS.items()):
        sel = code == i
        if not sel.any():
            cols[col] = pa.nulls(n, typ)
            present[name] = np.zeros(n, dtype=bool)
            continue
        v = pc.take(vals, _index(n, parent, sel))
        if unit:
            v = pc.utf8_rtrim(v, characters=unit)
        na = pc.fill_null(pc.equal(v, "N/A"), False).to_numpy(zero_copy_only=False)
        ok = _ok(v, _INTEGER if pa.types.is_integer(typ) else _NUMBER)
        good_row = ok | na
        has = np.zeros(n, dtype=bool)
        has[parent[sel]] = True
        present[name] = has & good_row
        claimed |= sel & good_row[parent]
        cols[col] = pc.cast(pc.if_else(pa.array(ok), v, _NULL), typ)
    sel = code == _TS
    claimed |= sel
    cols["timestamp"] = pc.take(vals, _index(n, parent, sel))
    sel = code == _CURRANK
    ab = pc.extract_regex(pc.take(vals, _index(n, parent, sel)), r"^(?P<a>\d+)/(?P<b>\d+)$")
    ab_ok = pc.is_valid(ab).to_numpy(zero_copy_only=False)
    a, b = ab.flatten()
    cols["currank_requests"] = pc.cast(a, pa.int64())
    cols["total_requests"] = pc.cast(b, pa.int64())
    claimed |= sel & ab_ok[parent]
    cols["rank"] = pc.coalesce(cols["rank"], pc.cast(rank, pa.int32()))

    # format by the fields present; the separator of num_scheduled_requests tells V4 from V2
    fmt = np.full(n, "V1", dtype=object)
    fmt[present["num_scheduled_requests"]] = "V2"
    fmt[present["host_step_time"] | present["prev_device_step_time"]] = "V3"
    v4 = present["kv_cache_util"]
    if present["num_scheduled_requests"].any():
        v4 = v4 | _ok(lines, r", num_scheduled_requests = ")
    fmt[v4] = "V4"
    fmt[present["adp_dummy_ctx_tokens"] | present["adp_dummy_gen_tokens"]] = "V5"

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
    else:
        rkeys = rvals = pa.array([], pa.string())
    extra = pa.MapArray.from_arrays(pa.array(offsets), rkeys, rvals)
    arrays = {
        "source": pa.repeat(pa.scalar(source, pa.string()), n),
        "line": line, "log_time": log_time, "format": pa.array(fmt, pa.string()),
        "extra": extra, **cols,
    }
    return pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in ITERATIONS],
                                schema=ITERATIONS)


# --------------------------------------------------------------------------- layout fast path
#
# Within a log almost every iteration line has the same *layout*: the same field names, in the
# same order, with the same separators. A layout is learnt (in Python) from one line. A block's
# lines are split on ", " once; a line has the layout when it has the layout's number of pairs,
# each pair starts with the layout's key text (a literal ``starts_with``, no regex over the
# line) and each known value casts to its type (only when a cast fails are the values checked
# one by one against their pattern). Such lines are read by cutting the known key off by
# length: still by name, with no per-pair key/value split. Others go to :func:`parse`.

_LAYOUT_PAIR = re.compile(r"^(?P<key>(?:states ?(?:=|:) ?\{)?'?(?P<name>[A-Za-z_][\w.]*)'?"
                          r"(?: = |: ))(?P<value>.*)$", re.ASCII)
_NO_STOP = 1 << 30


def _cut(pairs: pa.Array, start: int, stop: int) -> pa.Array:
    """``pairs[start:stop]`` per element, by bytes: the key cut off is ASCII, so this is exact
    and ~8x cheaper than ``utf8_slice_codeunits`` (which decodes every character)."""
    return pc.binary_slice(pairs.cast(pa.binary()), start, stop).cast(pa.string())
_V_INT = r"^(?:\d+|N/A)$"
_V_NUM = r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A)$"
_V_CURRANK = r"^\d+/\d+$"
_FIRST = r"iter ?(?:=|:) ?(?P<v>\d+)$"
#: Layouts remembered across blocks (most recently learnt first).
MAX_LAYOUTS = 16


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
            names.add((name, in_states))
            known = KNOWN_FIELDS.get(name)
            if (name in _STATE_KEYS) != in_states:
                known = None
            col, unit, check = None, "", None
            if name == "timestamp" and not in_states:
                col = "timestamp"
            elif name == "currank_total_requests" and not in_states:
                col, check = "currank", _V_CURRANK
            elif known is not None:
                col, unit = known[0], known[2]
                check = _V_INT if pa.types.is_integer(known[1]) else _V_NUM
            self.fields.append((key, col, unit, check, in_states, last, name))
            if last:
                in_states = False
        cols = {f[1] for f in self.fields}
        keys = [f[0] for f in self.fields]
        self.format = ("V5" if cols & {"adp_dummy_ctx_tokens", "adp_dummy_gen_tokens"} else
                       "V4" if "kv_cache_util" in cols or "num_scheduled_requests = " in keys
                       else "V3" if cols & {"host_step_time_ms", "prev_device_step_time_ms"}
                       else "V2" if "num_scheduled_requests" in cols else "V1")
        self.n_pairs = len(pairs)
        self.signature = tuple(keys) + tuple(f[5] for f in self.fields)

    def read(self, lines: pa.Array, *, source: str, line: pa.Array, rank: pa.Array,
             log_time: pa.Array) -> tuple[pa.Table, np.ndarray]:
        """Rows of the lines that have this layout, and the mask of those lines."""
        m = self.n_pairs
        split = pc.split_pattern(lines, ", ")
        ok = (pc.list_value_length(split).to_numpy(zero_copy_only=False) == m)
        if not ok.any():
            return ITERATIONS.empty_table(), ok
        if not ok.all():
            idx = np.flatnonzero(ok)
            sel = pa.array(idx)
            split, line, rank, log_time = (split.take(sel), line.take(sel), rank.take(sel),
                                           log_time.take(sel))
        k_rows = len(split)
        flat = pc.list_flatten(split)
        base = np.arange(k_rows, dtype=np.int64) * m
        good = np.ones(k_rows, dtype=bool)

        def check(values: pa.Array, pattern: str) -> None:
            good[:] &= pc.fill_null(pc.match_substring_regex(values, pattern), False)\
                .to_numpy(zero_copy_only=False)

        cols: dict[str, pa.Array] = {}
        first = flat.take(pa.array(base))   # prefix + iter: checked by the caller's line match
        cols["iter"] = pc.cast(pc.extract_regex(first, _FIRST).flatten()[0], pa.int64())
        extra_keys, extra_vals = [], []
        for j, (key, col, unit, pattern, in_states, last, name) in enumerate(self.fields, 1):
            pair = flat.take(pa.array(base + j))
            fits = pc.starts_with(pair, key)
            if last:
                fits = pc.and_(fits, pc.ends_with(pair, "}"))
            fits_np = fits.to_numpy(zero_copy_only=False)
            good &= fits_np
            if not fits_np.all():   # cut bytes only where the ASCII key really is there
                pair = pc.if_else(fits, pair, key + "}")
            v = _cut(pair, len(key), -1 if last else _NO_STOP)
            if col is None:
                extra_keys.append(f"states.{name}" if in_states else name)
                extra_vals.append(v)
                continue
            if col == "timestamp":
                cols[col] = v
                continue
            if unit:
                v = pc.utf8_rtrim(v, characters=unit)
            if col == "currank":
                check(v, pattern)
                ab = pc.split_pattern(pc.if_else(pa.array(good), v, "0/0"), "/")
                cols["currank_requests"] = pc.cast(pc.list_element(ab, 0), pa.int64())
                cols["total_requests"] = pc.cast(pc.list_element(ab, 1), pa.int64())
                continue
            typ = ITERATIONS.field(col).type
            v = pc.if_else(pc.equal(v, "N/A"), _NULL, v)
            try:   # a failed cast is rare: only then pay for the value pattern
                cols[col] = pc.cast(v, typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                check(pc.fill_null(v, "N/A"), pattern)
                cols[col] = pc.cast(pc.if_else(pa.array(good), v, _NULL), typ)
        for col, typ, _u in KNOWN_FIELDS.values():
            cols.setdefault(col, pa.nulls(k_rows, typ))
        cols.setdefault("timestamp", pa.nulls(k_rows, pa.string()))
        for col in ("currank_requests", "total_requests"):
            cols.setdefault(col, pa.nulls(k_rows, pa.int64()))
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
        }
        table = pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in ITERATIONS],
                                     schema=ITERATIONS)
        if not good.all():
            table = table.filter(pa.array(good))
        if ok.all():
            return table, good
        ok[np.flatnonzero(ok)[~good]] = False
        return table, ok


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
            idx = np.flatnonzero(left)
            whole = len(idx) == n
            sel = None if whole else pa.array(idx)
            table, hit = lay.read(
                lines if whole else lines.take(sel), source=source,
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
            left[idx[hit]] = False
        if left.any():
            sel = pa.array(np.flatnonzero(left))
            tables.append(parse(lines.take(sel), source=source, line=line.take(sel),
                                rank=rank.take(sel), log_time=log_time.take(sel)))
        if len(tables) == 1:
            return tables[0]
        t = pa.concat_tables(tables)
        return t.take(pc.sort_indices(t, [("line", "ascending")]))
