"""One compiled pass over a block of JSON Lines that writes typed columns: IterationStats lines
(the ``stats`` table) and request-state trace frame lines (``frames``/``requests``).

Why: the reference readers (:mod:`stats_json`, :mod:`trace_v1`) decode each line into Python
objects and build rows from them, one Python call at a time. This module reads the bytes once
in a compiled loop straight into the columns' buffers (a stats block's typed columns,
``fields`` map and timestamps: Python only wraps them as Arrow arrays), for the line shapes the
simulator and TensorRT-LLM write, and declines any block holding a line it does not take with
certainty; a declined block goes to the reference reader, which is this module's
specification, so rows, line numbers, ``unparsed`` rows and errors are the same whichever path
reads a block.

A stats line is taken when it is one object (whitespace between tokens allowed) whose keys
are those of the file's shape in the shape's order (a subset; the shape is learnt from the
first line, :func:`object_shape`, and grown by lines with more keys, :func:`merge_shapes`)
and whose values are strict JSON numbers (integers of at most 18 digits), true/false/null,
strings without escapes or control characters, or objects where the shape has one; no lists,
no key twice.
A frame line is taken when it has exactly ``kind: "frame"``, ``iter``, ``rank`` and
``requests`` (``{"id", "state", "dummy"?}`` with an exact state name) and any optional
decisions, each once, nothing else.

Numbers are exact: a decimal ``m * 10**e`` with ``m < 2**53`` and ``|e| <= 22`` is one
correctly rounded IEEE operation (Clinger's fast path, as in
:mod:`~forensics.readers.compiled.scan_kernel`); any other decimal's text is read by Python's
``float``, as ``json`` does.

The kernels (:mod:`~forensics.readers.compiled.json_kernel`) are numba ``cfunc`` functions
called through ctypes (the GIL is released during a call): numba compiles them once per install
(or kernel change) and :mod:`~forensics.readers.compiled.builder` saves their object code, which
later processes load without numba (:mod:`~forensics.readers.compiled.loader`: ~0.03 s instead
of ~0.9 s for loading numba and its cache).

``FORENSICS_INGEST_PATH`` (:data:`native_scan.PATH_ENV`) switches it as for logs:
``reference`` off, ``native`` on whatever the size. Without a saved object and numba (or
without llvmlite), and while the kernels build in the background, the reference reader reads
everything.
"""
from __future__ import annotations

import ctypes
import json
import re
import threading
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.dataset.schema import EVENTS, FRAMES, STATS_READ, UNPARSED
from forensics.readers.compiled import loader
from forensics.readers.compiled.library import Library
from forensics.readers.native_scan import PATH_ENV, use_compiled  # PATH_ENV: this reader's switch too
from forensics.readers.stats_columns import FLOAT_COLUMNS, INT_BOUNDS, TYPED_COLUMNS, StatsBatch
from forensics.readers.frame_columns import OPTIONAL, FrameColumns
from forensics.readers.repeated_text import repeated

#: Inputs smaller than this (bytes on disk) are read by the reference reader alone (without
#: llvmlite). Measured (whole ``forensics ingest`` processes, CPU medians of three paired rounds,
#: load ~16): loading the kernels' saved object costs ~0.1 s (llvmlite's import most of it);
#: the reference reader reads ~8 MB of stats or ~12 MB of trace a second, so below ~1 MB it
#: costs less than that load (0.5 MB of stats: 0.81 s by the reference reader, 0.82 s
#: compiled; 1 MB: 0.81 s against 0.83 s).
MIN_BYTES = 1 << 20
#: Block size on this path (whole lines): 2, 4 and 8 MB cost the same CPU (32x20000, in
#: process); 4 MB peaked ~30 MiB lower than 8 MB.
BLOCK_BYTES = 4 << 20
#: Most slots (keys and nested objects) a learnt stats shape may grow to before it is reset.
MAX_SLOTS = 256

# status codes of the scanners (the caller only tests != 0; the codes help a reader of a
# failing test)
OK, BAD_LINE, BAD_VALUE, UNKNOWN_KEY, FULL, NEW_OBJECT = 0, 1, 2, 3, 4, 5

#: The C signatures of :mod:`~forensics.readers.compiled.json_kernel`'s entry points (both
#: sides are built from these):
#: each letter an argument, ``i`` an int64, the others pointers to ``b`` uint8, ``h`` int16,
#: ``l`` int32, ``q`` int64, ``Q`` uint64, ``d`` float64, ``?`` bool; they return an int64.
SIGNATURES = {"stats": "biQbiQiqiqdibiiiiqd?bildlbl?qqq",
              "frames": "biQibiqQiibiqQiiiiqqllq?qh?q",
              "count": "bii"}
#: Their ctypes prototypes.
PROTOTYPES = {name: ctypes.CFUNCTYPE(ctypes.c_int64, *(ctypes.c_int64 if c == "i"
                                                       else ctypes.c_void_p for c in spec))
              for name, spec in SIGNATURES.items()}
#: The kernels as one saved object (:mod:`~forensics.readers.compiled.library`): numba compiles
#: them once per install, later processes load them without numba. Keyed by the source of
#: every file whose code or tables the compiled kernels hold.
LIBRARY = Library("json", "forensics.readers.compiled.json_kernel",
                  ("json_kernel.py", "stats_kernel.py", "json_tokens.py", "../json_scan.py"), PROTOTYPES,
                  "JSON Lines scanner")

_kernel = None


class DeclineBlock(Exception):
    """The block needs the reference reader."""


def enabled(size: int) -> bool:
    """Whether an input of ``size`` bytes is read with this module (big enough, not switched
    off, and the kernels ready, as :func:`native_scan.use_compiled` decides)."""
    return use_compiled(size, MIN_BYTES, kernel, ready)


def kernel():
    """The kernels' entry points (``PROTOTYPES`` and ``failed()``,
    :func:`loader.entry_points`), or None when neither a saved object nor numba can give them."""
    global _kernel
    if _kernel is None:
        try:
            _kernel = loader.entry_points(LIBRARY) or False
        except Exception:   # numba refusing the kernels' options (``_nrt`` is private)
            _kernel = False
    return _kernel or None


def ready():
    """The kernels when loaded or their saved object loads; else None, and a background build
    is started (:func:`builder.build_in_background`)."""
    global _kernel
    if _kernel is None:
        try:
            _kernel = loader.entry_points(LIBRARY, compile="background") or None
        except Exception:
            _kernel = False
    return _kernel or None


def _call(name: str, *args) -> int:
    """Entry point ``name`` with numpy arrays passed as pointers."""
    k = kernel()
    status = k[name](*(a.ctypes.data if isinstance(a, np.ndarray) else a for a in args))
    if k["failed"]():
        raise RuntimeError("the JSON Lines scanner returned an error (a bug: please report it)")
    return status


#: The last block counted, and its count, per thread: a Dask worker's threads may read two
#: files at once, and one thread's block must never be answered with another's count.
_last = threading.local()


def newlines(block: bytes) -> int:
    """The newlines in ``block`` (the last block's count is kept: its reader asks again)."""
    got = getattr(_last, "count", None)
    if got is None or got[0] is not block:
        got = _last.count = (block, _call("count", np.frombuffer(block, np.uint8), len(block), 10))
    return got[1]


# ------------------------------------------------------------------------------------- trace
class _TraceTables:
    """The constant arrays the frame scanner matches against (built once)."""

    def __init__(self):
        from replay.states import RequestState

        keys = ("kind", "iter", "rank", "requests", *OPTIONAL)
        self.keys, key_offs = _name_table(keys)
        self.key_words, kwo, kwl = word_table(keys)
        opt_is_int = [pa.types.is_integer(FRAMES.field(k).type) for k in OPTIONAL]
        # rows: offsets, first word, length with the quote, optional key is an int (from 4 on)
        self.key_tab = _table(key_offs, kwo, kwl, opt_is_int)
        self.opt_types = [FRAMES.field(k).type for k in OPTIONAL]
        self.optional = OPTIONAL
        names, codes = [], []
        for s in RequestState:
            names += [s.name, f"LlmRequestState.{s.name}"]
            codes += [int(s), int(s)]
        self.states, state_offs = _name_table(names)
        self.state_words, swo, swl = word_table(names)
        # rows: offsets, first word, length with the quote, state code
        self.state_tab = _table(state_offs, swo, swl, codes)
        self.n_keys, self.n_states = len(keys), len(names)


_TRACE: _TraceTables | None = None


def word_table(names) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``names`` (each followed by its closing quote) as little-endian 8-byte words for
    ``json_tokens.name_here``: (words, first word of each name, length of each with the quote)."""
    words, woffs, lens = [], [0], []
    for name in names:
        raw = name.encode() + b'"'
        lens.append(len(raw))
        raw += bytes(-len(raw) % 8)
        words += [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]
        woffs.append(len(words))
    return (np.array(words, np.uint64), np.array(woffs, np.int64), np.array(lens, np.int64))



def _table(*rows) -> np.ndarray:
    """Rows of different lengths as one int64 array (width of the longest, zero-padded)."""
    out = np.zeros((len(rows), max(len(r) for r in rows)), np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def _name_table(names) -> tuple[np.ndarray, np.ndarray]:
    """Names as one byte array and their offsets (``names[i]`` is ``[offs[i], offs[i+1])``)."""
    raw = [n.encode() for n in names]
    data = np.frombuffer(b"".join(raw), np.uint8).copy()
    return data, np.cumsum([0] + [len(b) for b in raw]).astype(np.int64)


def _words(buf: np.ndarray) -> np.ndarray:
    """The block's whole 8-byte words (a ``bytes`` object's data is 8-byte aligned)."""
    if buf.ctypes.data % 8:
        buf = buf.copy()
    return buf[:buf.size // 8 * 8].view(np.uint64)


def frames(block: bytes, line: int, tp_size: int):
    """The :class:`~forensics.readers.frame_columns.FrameColumns` of ``block`` (whole lines, the
    first being line ``line``), or None when a line is not a frame this scanner takes."""

    global _TRACE
    k = kernel()
    if k is None:
        return None
    if _TRACE is None:
        _TRACE = _TraceTables()
    t = _TRACE
    buf = np.frombuffer(block, np.uint8)
    # bounds, not counts (np.empty pages are committed only where written): a frame line
    # takes 48 bytes or more, a request 26 ({"id":0,"state":"UNKNOWN"}); FULL declines anyway
    cap = len(block) // 40 + 2
    r_cap = len(block) // 20 + 2
    f_iter = np.empty(cap, np.int64)
    f_rank = np.empty(cap, np.int64)
    f_nreq = np.empty(cap, np.int32)
    f_nd = np.empty(cap, np.int32)
    opt_val = np.empty((len(t.optional), cap), np.int64)
    opt_valid = np.empty((len(t.optional), cap), np.bool_)
    r_id = np.empty(r_cap, np.int64)
    r_state = np.empty(r_cap, np.int16)
    r_dummy = np.empty(r_cap, np.bool_)
    out = np.zeros(2, np.int64)
    status = _call("frames", buf, len(buf), _words(buf), tp_size, t.keys, t.keys.size,
                   t.key_tab, t.key_words, t.key_words.size, t.n_keys, t.states, t.states.size,
                   t.state_tab, t.state_words, t.state_words.size, t.n_states, cap, r_cap,
                   f_iter, f_rank, f_nreq, f_nd, opt_val, opt_valid, r_id, r_state, r_dummy, out)
    if status != 0:
        return None
    nf, nr = int(out[0]), int(out[1])
    if nf and int(f_iter[:nf].max()) > ((1 << 63) - 1 - tp_size) // tp_size:
        return None    # the frame key would overflow: the builder words that error
    optional = {}
    for j, (name, typ) in enumerate(zip(t.optional, t.opt_types)):
        valid = opt_valid[j, :nf]
        vals = opt_val[j, :nf]
        vals = vals.astype(bool) if pa.types.is_boolean(typ) else vals
        optional[name] = pa.array(vals, typ, mask=None if valid.all() else ~valid) \
            if valid.any() else pa.nulls(nf, typ)
    # shrunk in place, not copied: what a batch keeps is what the rows hold (see _cut)
    return FrameColumns(
        line=np.arange(line, line + nf, dtype=np.int64), iter=_cut(f_iter, nf),
        rank=f_rank[:nf].astype(np.int32), num_requests=_cut(f_nreq, nf),
        num_dummies=_cut(f_nd, nf), optional=optional, req_id=_cut(r_id, nr),
        req_state=_cut(r_state, nr), req_dummy=_cut(r_dummy, nr))


# ------------------------------------------------------------------------------------- stats
class _Columns:
    """The typed ``stats`` columns as the scanner's arrays (built once)."""

    def __init__(self):

        self.names = list(dict.fromkeys(TYPED_COLUMNS.values()))
        if len(self.names) > 63:
            raise ValueError("the stats scanner marks a row's typed columns in one int64")
        self.index = {key: self.names.index(col) for key, col in TYPED_COLUMNS.items()}
        self.types = [STATS_READ.field(c).type for c in self.names]
        self.is_float = np.array([c in FLOAT_COLUMNS for c in self.names])
        bounds = [INT_BOUNDS.get(c, 2 ** 63 - 1) for c in self.names]
        # rows: a float column, lowest and highest int; whole floats within ±lim (2**31, 2**63)
        self.tab = _table(self.is_float, [-b - 1 for b in bounds], bounds)
        self.lim = np.array([float(b + 1) for b in bounds])


_COLUMNS: _Columns | None = None


class _Template:
    """A stats shape as the scanner's slot arrays (depth-first key order)."""

    def __init__(self, shape: tuple):
        global _COLUMNS
        if _COLUMNS is None:
            _COLUMNS = _Columns()
        self.shape = shape
        names, parent, is_obj, dotted = [], [], [], []

        def walk(sh: tuple, par: int, prefix: str) -> None:
            for key, sub in sh:
                slot = len(names)
                names.append(key)
                parent.append(par)
                is_obj.append(type(sub) is tuple)
                dotted.append(prefix + key)
                if type(sub) is tuple:
                    walk(sub, slot, prefix + key + ".")
        walk(shape, -1, "")
        if len(set(dotted)) != len(dotted):
            raise ValueError("two keys flatten to one dotted name")
        self.n = len(names)
        self.n_leaves = self.n - sum(is_obj)
        self.names, offs = _name_table(names)
        self.words, wo, wl = word_table(names)
        self.dotted, dotted_offs = _name_table(dotted)
        # 8 bytes past the last name: the scanner copies names a word at a time
        self.dotted = np.concatenate([self.dotted, np.zeros(8, np.uint8)])
        self.key_bytes = int(max(np.diff(dotted_offs), default=0))
        next_sib = np.full(self.n, -1, np.int64)
        first_child = np.full(self.n + 1, -1, np.int64)
        last: dict[int, int] = {}
        for s, par in enumerate(parent):
            if par in last:
                next_sib[last[par]] = s
            else:
                first_child[par + 1] = s
            last[par] = s
        col_of = [-1 if is_obj[s] else _COLUMNS.index.get(dotted[s], -1) for s in range(self.n)]
        # the rows json_kernel.stats_c unpacks (``first_child`` is indexed by slot + 1)
        self.slots = _table(offs, parent, is_obj, next_sib, first_child, col_of, dotted_offs,
                            wo, wl)
        self.timestamp = next((s for s in range(self.n)
                               if names[s] == "timestamp" and parent[s] == -1), -1)


_TEMPLATE: _Template | None = None
#: Deepest nesting of objects a stats shape takes (IterationStats nests two levels).
MAX_DEPTH = 8
_NAME = re.compile(r"[A-Za-z0-9_]+\Z")


def _family(v: Any) -> str:
    t = type(v)
    return "bool" if t is bool else "num" if t is int or t is float else "str" if t is str \
        else "any"


def object_shape(obj: dict, depth: int = 0) -> tuple:
    """The nesting of an object's keys in key order: ``((name, sub-shape), ...)``, a leaf's
    sub-shape being the family of its value (``bool``, ``num``, ``str``; ``any`` for null).

    Raises:
        DeclineBlock: not an object (a line ``[1, 2]``), a list, a key name other than
            ``[A-Za-z0-9_]+``, or nesting deeper than ``MAX_DEPTH``.
    """
    if type(obj) is not dict or depth >= MAX_DEPTH:
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

#: How many lines with keys the shape lacks one block may teach before it is declined.
MAX_LEARN = 8


def _shape_of(text: bytes) -> tuple:

    return object_shape(json.loads(text))


def _objects_of(shape: tuple, other: tuple) -> tuple:
    """``shape`` with a leaf turned into an (empty) object where ``other`` has an object (a
    key null in the first line, an object later), so that ``merge_shapes`` can grow it."""
    sub_of = dict(other)
    out = []
    for key, sub in shape:
        o = sub_of.get(key)
        if type(o) is tuple:
            sub = _objects_of(sub, o) if type(sub) is tuple else ()
        out.append((key, sub))
    return tuple(out)


def stats(block: bytes | memoryview, line: int, source: str):
    """The :class:`~forensics.readers.stats_columns.StatsBatch` of ``block`` (whole lines, the
    first being line ``line``; ``bytes`` or a view of a reader's buffer), or None when a line
    is not one this scanner takes (the kernel declines any backslash: escapes are not read)."""
    global _TEMPLATE

    if kernel() is None or not len(block) or block[-1] != 10:
        return None
    buf = np.frombuffer(block, np.uint8)
    first = _first_line(block)
    # a bound on the rows, not a count (the arrays' pages are committed only where written):
    # lines of half the first one's length; more rows (FULL) are counted and read again
    cap = len(block) // max(len(first) // 2, 1) + 2
    where = np.zeros(37, np.int64)
    words = _words(buf)
    starts = None
    try:
        if _TEMPLATE is None:
            _TEMPLATE = _Template(_shape_of(first))
        for attempt in range(MAX_LEARN + 2):
            t = _TEMPLATE
            out = _StatsOut(len(_COLUMNS.names), cap, t, len(block))
            status = _call("stats", buf, len(buf), words, t.names, t.names.size, t.words,
                           t.words.size, t.slots, t.n, _COLUMNS.tab, _COLUMNS.lim,
                           len(_COLUMNS.names), t.dotted, t.dotted.size, t.timestamp,
                           *out.arrays(), where)
            rows = int(where[35])
            if status == OK:
                break
            if status == FULL and cap < len(block):
                cap = newlines(block)
                continue
            if status not in (UNKNOWN_KEY, NEW_OBJECT, BAD_LINE) or attempt > MAX_LEARN:
                return None
            if starts is None:
                nl = np.flatnonzero(buf == 10)
                starts = np.concatenate([[0], nl[:-1] + 1])
            i = int(where[0])
            text = bytes(block[int(starts[i]):int(starts[i + 1]) if i + 1 < starts.size
                               else None])
            try:
                other = _shape_of(text)
            except (ValueError, RecursionError):
                return None
            if status == BAD_LINE:
                if attempt:            # another key order: start again from this block
                    return None
                _TEMPLATE = _Template(_shape_of(first))
                continue
            shape = merge_shapes(_objects_of(t.shape, other), other)
            _TEMPLATE = _Template(shape if len(shape) <= MAX_SLOTS else other)
    except (DeclineBlock, ValueError, RecursionError):
        _TEMPLATE = None
        return None
    if where[36]:                        # a string with bytes >= 0x80: the block is UTF-8?
        try:
            str(block, "utf-8")
        except UnicodeDecodeError:
            return None
    _last.count = (block, rows)          # every line is a row: the reader asks next
    return out.batch(block, line, source, t, rows, int(where[1]), int(where[2]))


def _first_line(block: bytes | memoryview) -> bytes:
    """The first line of ``block`` with its newline (the whole block when it has none)."""
    if isinstance(block, bytes):
        return block[:block.find(b"\n") + 1 or len(block)]
    at, step = 0, 1 << 12
    while at < len(block):
        nl = bytes(block[at:at + step]).find(b"\n")
        if nl >= 0:
            return bytes(block[:at + nl + 1])
        at, step = at + step, min(step * 2, 1 << 20)
    return bytes(block)


class _StatsOut:
    """The stats scanner's output arrays for one block (bounds, not counts: ``np.empty``
    pages are committed only where written)."""

    def __init__(self, n_cols: int, cap: int, t: _Template, size: int):
        self.cap = cap
        self.coli, self.colf, self.colv = _typed_scratch(n_cols, cap)
        self.entries = entries = cap * max(t.n_leaves, 1)
        self.kbytes = np.empty(entries * t.key_bytes, np.uint8)
        self.koff = np.empty(entries + 1, np.int32)
        self.fval = np.empty(entries, np.float64)
        self.foff = np.empty(cap + 1, np.int32)
        self.ts_bytes = np.empty(size, np.uint8)
        self.ts_off = np.empty(cap + 1, np.int32)
        self.ts_valid = np.empty(cap, np.bool_)
        self.fix = np.empty((3, entries), np.int64)
        self.skel = np.empty((6, t.n + 1), np.int64)

    def arrays(self) -> tuple:
        """The arguments of the stats entry point from ``cap`` on."""
        return (self.cap, self.entries, self.coli, self.colf, self.colv, self.kbytes,
                self.kbytes.size, self.koff, self.fval, self.foff, self.ts_bytes, self.ts_off,
                self.ts_valid, self.fix, self.skel)

    def batch(self, block: bytes | memoryview, line: int, source: str, t: _Template, n: int,
              entries: int, fixes: int):
        """The ``stats`` rows (the scanner wrote them by the rules of ``stats_row``)."""

        cap = self.coli.shape[1]
        for dest, a, b in self.fix[:, :fixes].T.tolist():
            v = float(bytes(block[a:b]))
            if dest >= 0:
                self.fval[dest] = v
            else:
                c, r = divmod(-1 - dest, cap)
                self.colf[c, r] = v
        # What the rows hold, cut to size: the writer keeps a row group's batches, and the
        # bounds above (committed pages once the allocator reuses memory) held 2-3x more. Each
        # column is copied once from the array of its kind (a row of it: contiguous), cast on
        # the way; copying both arrays whole first cost 13 % of this function (measured).
        kbytes, koff, fval, foff, ts_bytes, ts_off = (
            _cut(x, size) for x, size in ((self.kbytes, int(self.koff[entries])),
                                          (self.koff, entries + 1), (self.fval, entries),
                                          (self.foff, n + 1),
                                          (self.ts_bytes, int(self.ts_off[n])),
                                          (self.ts_off, n + 1)))
        cols: dict[str, pa.Array] = {}
        for c, (name, typ) in enumerate(zip(_COLUMNS.names, _COLUMNS.types)):
            if pa.types.is_floating(typ):
                data = self.colf[c, :n].copy()
            else:
                data = self.coli[c, :n].astype(typ.to_pandas_dtype())
            cols[name] = pa.Array.from_buffers(typ, n, [_bitmap(self.colv[c, :n]),
                                                        pa.py_buffer(data)])
        cols["timestamp"] = pa.StringArray.from_buffers(
            n, pa.py_buffer(ts_off), pa.py_buffer(ts_bytes), _bitmap(self.ts_valid[:n]))
        keys = pa.StringArray.from_buffers(entries, pa.py_buffer(koff), pa.py_buffer(kbytes))
        cols["fields"] = pa.MapArray.from_arrays(pa.array(foff), keys, pa.array(fval),
                                                 type=STATS_READ.field("fields").type)
        ln = pa.array(np.arange(line, line + n, dtype=np.int64))
        cols["line"] = cols["line_end"] = ln
        cols["source"] = repeated(source, n)
        table = pa.table([cols[f.name] for f in STATS_READ], schema=STATS_READ)
        return StatsBatch(stats=table, events=EVENTS.empty_table(),
                          unparsed=UNPARSED.empty_table())


#: The typed columns' arrays of the thread's last block: the kernel writes every cell of the
#: rows it reads and :meth:`_StatsOut.batch` copies them out, so they are reused (fresh ones
#: cost their pages' faults: ~20 % of the kernel's CPU was the kernel's page clearing).
_scratch = threading.local()


#: Most cells the kept arrays hold (17 MB): a block of very short lines (a bound of millions of
#: rows) gets arrays of its own, so that a thread never keeps more than this after it.
SCRATCH_CELLS = 1 << 20


def _typed_scratch(n_cols: int, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int, float, valid) arrays of shape ``(n_cols, cap)``, the thread's own, reused."""
    size = n_cols * cap
    got = getattr(_scratch, "arrays", None)
    if got is None or got[0].size < size:
        got = (np.empty(size, np.int64), np.empty(size, np.float64), np.empty(size, np.bool_))
        if size <= SCRATCH_CELLS:
            _scratch.arrays = got
    return tuple(a[:size].reshape(n_cols, cap) for a in got)


def _cut(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` (1-D, owning its data, no view of it alive) shrunk to ``n`` items in place (a
    ``realloc``: the rest goes back to the allocator, nothing is copied)."""
    a.resize(max(n, 1), refcheck=False)
    return a[:n]


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    """An Arrow validity bitmap of ``valid`` (None when every value is valid)."""
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


__all__ = ["BLOCK_BYTES", "MIN_BYTES", "DeclineBlock", "enabled", "frames", "kernel",
           "merge_shapes", "newlines", "object_shape", "stats"]
