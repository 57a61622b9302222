"""One compiled pass over a block's bytes that reads the common iteration lines into typed columns.

Why: the Arrow/RE2 path (:mod:`executor_log`, :mod:`line_prefix`, :mod:`iteration_line`) makes
many passes per field per block. Almost every line of a big log is the TRT-LLM Python logger's
prefix followed by an iteration line of one of the variants V1..V5, so this module reads exactly
those, in one numba-compiled loop per block (run without the GIL: the two worker threads run at
once; the compile is paid once per install and its object file is linked with llvmlite alone
afterwards, :mod:`~forensics.readers.compiled.loader`), and leaves every other line to the
reference path.

The rule that keeps results identical: a line is taken here ("fast") only when it has a shape
whose reading is certain, and then its row equals the reference row value for value. A fast
line is::

    [MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [S] iter = N, name = value, ..., states = {...}

with ``n`` of 1-9 digits, ``S`` one of ``FEWIVD``, a valid calendar time (seconds < 60), every
``name`` a known field (of the field table, :mod:`forensics.dataset.log_fields`: the ``states``
keys inside the dict, the others outside) at most once, separated by ``" = "`` or ``": "``,
values of the field's strict shape (integers of at most the field's digit bound, decimals
``D+[.D+]`` with the unit the field carries, ``N/A``, ``a/b``, ``YYYY-MM-DD HH:MM:SS``) and,
when present, a ``states`` dict as the last pair with
exactly one closing brace at the end of the line. Anything else (unknown or repeated fields,
signs, exponents, other prefixes, wrappers, events) is not fast. A block holding ``\\r`` or
NUL bytes, invalid UTF-8 or Docker records is not scanned at all.

Decimals are exact: ``m / 10**k`` with ``m < 2**53`` and ``k <= 22`` is one correctly rounded
IEEE division (Clinger's fast path), the same double as any correct decimal reader; up to 18
digits (17 significant, as ``repr`` prints) and 27 decimals the kernel computes the nearest
double itself (:mod:`~forensics.readers.compiled.decimal_kernel`); longer decimals are marked
and the caller casts their text with Arrow, as the reference does.

``FORENSICS_INGEST_PATH=reference`` in the environment turns this path off (the reference path
reads everything; the tests compare both), ``=native`` uses it for small inputs too. Without
numba the reference path is used.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.dataset import log_fields
from forensics.readers.line_prefix import Known, spans
from forensics.readers.repeated_text import repeated

#: Environment switch: ``reference`` forces the reference (Arrow/RE2) path for every input,
#: ``native`` this one for every input whatever its size (when numba is importable).
PATH_ENV = "FORENSICS_INGEST_PATH"
#: Inputs smaller than this (bytes on disk) use the reference path. Measured (whole
#: ``forensics ingest`` processes, CPU medians of five paired rounds, load ~4.9, simulator log
#: cuts, the path forced by :data:`PATH_ENV`), with the scanner loaded from its shared library
#: (:mod:`~forensics.readers.compiled.loader`): 1.1 MB 0.54 s compiled against 0.55 s
#: reference, 2.2 MB 0.60 s against 0.62 s; peak RSS ~20-35 MiB lower compiled. (Loaded by
#: llvmlite instead, ~0.05 s and ~40 MiB more: the crossover was then ~2 MB.) A small
#: post-mortem never imports numba or llvmlite.
MIN_BYTES = 1 << 20
#: Block size on this path: per block, the reference path's regexes are compiled again for
#: the few lines left to it (~4 ms for ~120 lines, ~6 ms for ~1000), so bigger blocks than the
#: reference's pay. Measured, whole process, 538 MB bench log, three paired rounds: 8 MB
#: 2.92-2.98 s CPU at 298-313 MiB peak RSS, 16 MB 2.69-2.74 s at 380-392 MiB, 32 MB 3.14-3.18 s
#: (page faults) at 449-477 MiB; the simulate log (no such lines) the same at 8 and 16 MB.
BLOCK_BYTES = 16 << 20

# integer rows of ``ints`` not from the field table: ``iter``, the prefix's rank and time
I_ITER, I_PRANK, I_LOGT = range(3)
#: The compiled scan's scratch (int64): the byte offset and value of the last prefix time and
#: of the last ``timestamp`` read (lines of a log share them for a second: compared, not read
#: again).
SCRATCH = 4
#: Bit of ``Scan.bits`` of the first decimal Arrow must read (``NEED_SHIFT + f`` for decimal
#: ``f``); bits below are the values read (bit ``c`` for row ``c`` of ``ints`` then ``floats``).
NEED_SHIFT = 40
#: Kind codes of :attr:`Lookup.kind` (index in :data:`~forensics.dataset.log_fields.KINDS`).
K_INT, K_DECIMAL, K_TIME, K_RATIO = (log_fields.KINDS.index(k) for k in (
    log_fields.INT, log_fields.DECIMAL, log_fields.TIME, log_fields.RATIO))


@dataclasses.dataclass(frozen=True)
class Lookup:
    """The field table (:mod:`~forensics.dataset.log_fields`) as the compiled scanner reads it:
    arrays indexed by a name's code (its place in ``names``; the ``states`` keys last, from
    ``state_first``).

    Fields: ``names``, ``state_first``, ``fields`` (the row of each code), ``kind``
    (``K_*``), ``int_row`` (row of ``ints``; a ratio's ``b`` in the next row; -1 none),
    ``flt_row`` (row of ``floats``, -1 none), ``digits`` (most digits of an integer),
    ``unit_bytes``/``unit_off`` (each decimal's unit, concatenated), ``fmt_colon``/``fmt_eq``
    (the index in ``FORMATS`` the name implies printed with ``": "`` / ``" = "``),
    ``n_ints``/``n_floats`` (rows of ``ints``/``floats``), ``digest`` (of the table).
    """

    names: tuple[str, ...]
    state_first: int
    fields: tuple[log_fields.Field, ...]
    kind: np.ndarray
    int_row: np.ndarray
    flt_row: np.ndarray
    digits: np.ndarray
    unit_bytes: np.ndarray
    unit_off: np.ndarray
    fmt_colon: np.ndarray
    fmt_eq: np.ndarray
    n_ints: int
    n_floats: int
    digest: int


def lookup(table: tuple[log_fields.Field, ...] = log_fields.ITERATION_FIELDS) -> Lookup:
    """:class:`Lookup` of ``table``."""
    fields = log_fields.unique(table)
    implied = log_fields.implied_formats(table)
    int_row, flt_row, n_ints, n_floats = [], [], 3, 0
    for f in fields:
        width = 2 if f.kind == log_fields.RATIO else 1
        if f.kind == log_fields.DECIMAL:
            int_row.append(-1)
            flt_row.append(n_floats)
            n_floats += 1
        else:
            int_row.append(n_ints)
            flt_row.append(-1)
            n_ints += width
    units = [f.unit.encode() for f in fields]
    return Lookup(
        names=tuple(f.name for f in fields), fields=fields,
        state_first=sum(not f.in_states for f in fields),
        kind=np.array([log_fields.KINDS.index(f.kind) for f in fields], np.int64),
        int_row=np.array(int_row, np.int64), flt_row=np.array(flt_row, np.int64),
        digits=np.array([f.digits for f in fields], np.int64),
        unit_bytes=np.frombuffer(b"".join(units) or b"\0", np.uint8).copy(),
        unit_off=np.cumsum([0] + [len(u) for u in units]).astype(np.int64),
        fmt_colon=np.array([implied[f.name][0] for f in fields], np.int64),
        fmt_eq=np.array([implied[f.name][1] for f in fields], np.int64),
        n_ints=n_ints, n_floats=n_floats, digest=log_fields.digest(table))


#: The lookup of :data:`~forensics.dataset.log_fields.ITERATION_FIELDS`.
LOOKUP = lookup()
#: Field names as they appear in the line, in the order of their codes (states keys last).
NAMES = LOOKUP.names
N_STATE_FIRST = LOOKUP.state_first
N_INTS = LOOKUP.n_ints
N_FLOATS = LOOKUP.n_floats
if N_INTS + N_FLOATS > NEED_SHIFT or NEED_SHIFT + N_FLOATS > 63:
    raise ImportError(f"the field table's {N_INTS} integer and {N_FLOATS} decimal values do "
                      "not fit the compiled scanner's bits (NEED_SHIFT)")
SEVERITIES = "FEWIVD"
FORMATS = log_fields.FORMATS

_kernel = None


def chosen(size: int, min_bytes: int) -> bool:
    """Whether :data:`PATH_ENV` and the input's size choose a compiled path (this one, or the
    JSON Lines scanner's, :mod:`forensics.readers.json_scan`)."""
    how = os.environ.get(PATH_ENV, "")
    return how != "reference" and (how == "native" or size >= min_bytes)


def use_compiled(size: int, min_bytes: int, kernel, ready) -> bool:
    """Whether an input of ``size`` bytes is read with a compiled scanner (this one or the JSON
    one): big enough, not switched off, and its kernels ready: loaded from a saved object, or
    compiled (``kernel()``) when ``FORENSICS_INGEST_PATH=native`` asks for it; else (``ready()``)
    its build starts in the background and this input is read with the reference path."""
    if not chosen(size, min_bytes):
        return False
    if os.environ.get(PATH_ENV) == "native":
        return kernel() is not None
    return ready() is not None


def enabled(size: int) -> bool:
    """Whether an input of ``size`` bytes is read with this module (:func:`use_compiled`)."""
    return use_compiled(size, MIN_BYTES, kernel, ready)


def kernel():
    """The compiled scanner's entry points (:func:`loader.entry_points`, compiled here
    when no saved object loads), or None when numba is not importable."""
    global _kernel
    if _kernel is None:
        from forensics.readers.compiled import loader

        _kernel = loader.entry_points() or False
    return _kernel or None


def ready():
    """The entry points when already loaded or their saved object loads; else None, and a
    background build is started (:func:`builder.build_in_background`)."""
    global _kernel
    if _kernel is None:
        from forensics.readers.compiled import loader

        _kernel = loader.entry_points(compile="background") or None
    return _kernel or None



@dataclasses.dataclass
class Scan:
    """One block after :func:`scan_block`: every line's byte span, and the fast lines' values.

    Fields: ``n`` lines with ``starts``/``ends`` (newline excluded); ``fast_line`` (line index
    of each fast row, in order); per fast row, ``ints`` (``I_*`` rows), ``floats`` (``F_*``),
    ``bits`` (bit ``c``: value ``c`` of ints then floats read, else null; bit
    ``NEED_SHIFT + f``: decimal ``f`` is for Arrow to read, :meth:`valid` / :meth:`need`),
    ``fspan`` (such a decimal's byte span), ``fmt`` (index into :data:`FORMATS`), ``sev``
    (index into :data:`SEVERITIES`); per line, what the scan read of the prefix of a line it
    did not take (:func:`known_prefixes`: ``shape``, ``boff``, ``lrank``, ``lsev``).
    """

    n: int
    starts: np.ndarray
    ends: np.ndarray
    fast_line: np.ndarray
    ints: np.ndarray
    floats: np.ndarray
    bits: np.ndarray
    fspan: np.ndarray
    fmt: np.ndarray
    sev: np.ndarray
    shape: np.ndarray
    boff: np.ndarray
    lrank: np.ndarray
    lsev: np.ndarray

    # the AND and OR of ``bits`` (made on first use): a bit set in every row needs no mask
    _all: int | None = dataclasses.field(default=None, repr=False)
    _any: int = dataclasses.field(default=0, repr=False)

    def _and_or(self) -> tuple[int, int]:
        if self._all is None:
            k = len(self.bits)
            self._all = int(np.bitwise_and.reduce(self.bits)) if k else -1
            self._any = int(np.bitwise_or.reduce(self.bits)) if k else 0
        return self._all, self._any

    def _rows_with(self, bit: int) -> np.ndarray:
        return ((self.bits >> bit) & 1).astype(np.bool_)

    def valid(self, c: int) -> np.ndarray | None:
        """Which fast rows have value ``c`` (row of ``ints``, or ``N_INTS`` + row of
        ``floats``); None when all do."""
        return None if (self._and_or()[0] >> c) & 1 else self._rows_with(c)

    def need(self, f: int) -> np.ndarray | None:
        """Which fast rows' decimal ``f`` is for Arrow to read; None when none is."""
        bit = NEED_SHIFT + f
        return self._rows_with(bit) if (self._and_or()[1] >> bit) & 1 else None


def scan_block(block: bytes | bytearray) -> Scan | None:
    """The compiled pass over ``block`` (whole lines), or None when the block must go to the
    reference path as a whole (``\\r`` or NUL bytes, invalid UTF-8, a Docker record first:
    the scan itself reports the odd bytes, so a plain block is read once)."""
    if block[:64].lstrip().startswith(b'{"log":'):
        return None
    entry = kernel()
    buf = np.frombuffer(block, dtype=np.uint8)
    at = buf.ctypes.data
    # Rows for the lines the last block's density predicts, with a margin: no counting pass
    # (3 ms per 16 MB). Not far more: the fast rows' columns are views of these arrays, kept
    # by the table until it is written. More lines than rows: counted, scanned again.
    global _lines_per_byte
    scan = None
    if _lines_per_byte:
        try:
            scan = _scan(entry, block, buf, int(len(buf) * _lines_per_byte * 1.1) + 64)
        except _MoreLines:
            pass
        else:
            if scan is None:    # for the reference path
                return None
    if scan is None:
        scan = _scan(entry, block, buf, entry["count"](at, len(buf)) + 1)
    if scan is not None and len(buf):
        _lines_per_byte = scan.n / len(buf)
    return scan


#: Lines per byte of the last block counted (a hint shared by the worker threads).
_lines_per_byte = 0.0


class _MoreLines(Exception):
    """The block has more lines than the outputs have rows."""


def _scan(entry, block: bytes | bytearray, buf: np.ndarray, cap: int) -> Scan | None:
    """One call of the compiled scan with outputs of ``cap`` rows: :func:`scan_block`'s
    answer, or :class:`_MoreLines`."""
    at = buf.ctypes.data
    starts = np.empty(cap, np.int64)
    ends = np.empty(cap, np.int64)
    fast_line = np.empty(cap, np.int64)
    ints = np.empty((N_INTS, cap), np.int64)
    floats = np.empty((N_FLOATS, cap), np.float64)
    bits = np.empty(cap, np.int64)
    fspan = np.empty((2 * N_FLOATS, cap), np.int64)   # read only where Scan.need
    fmt = np.empty(cap, np.uint8)
    sev = np.empty(cap, np.uint8)
    scratch = np.full(SCRATCH, -1, np.int64)
    out = np.zeros(2, np.int64)
    shape = np.empty(cap, np.uint8)
    boff = np.empty(cap, np.int64)
    lrank = np.empty(cap, np.int64)
    lsev = np.empty(cap, np.uint8)
    n = entry["scan"](at, len(buf), cap, *(a.ctypes.data for a in (
        starts, ends, fast_line, ints, floats, bits, fspan, fmt, sev, scratch, out,
        shape, boff, lrank, lsev)))
    k, odd = int(out[0]), int(out[1])
    if entry["failed"]():
        raise RuntimeError("the native scanner returned an error (a bug: please report it)")
    if n < 0:
        raise _MoreLines
    if odd & 1:   # \r or NUL bytes: the reference path's line ends and NUL accounting
        return None
    if odd & 2:   # bytes >= 0x80 (only outside fast lines): the block must be UTF-8
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return Scan(n, starts[:n], ends[:n], fast_line[:k], ints[:, :k], floats[:, :k],
                bits[:k], fspan[:, :k], fmt[:k], sev[:k], shape[:n], boff[:n], lrank[:n],
                lsev[:n])


_FORMATS = pa.array(FORMATS)
_SEVERITIES = pa.array(list(SEVERITIES))


def severities(scan: Scan) -> pa.Array:
    """The fast rows' severity letters."""
    return _SEVERITIES.take(pa.array(scan.sev))


def known_prefixes(scan: Scan) -> Known | None:
    """What the scan read of every line's prefix (meaningful for the lines it did not take):
    the reference path's patterns then run over the lines of shape ``SHAPE_OTHER`` only."""
    return Known(shape=scan.shape, body_offset=scan.boff, rank=scan.lrank, severity=scan.lsev)


def prefix_ranks(scan: Scan) -> pa.Array:
    """The fast rows' ``[RANK n]`` of the logger prefix."""
    return pa.array(scan.ints[I_PRANK].astype(np.int32))


#: numpy dtype of each Arrow type used (``DataType.to_pandas_dtype`` would import pandas)
_NUMPY = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float64(): np.float64}


def _column(values: np.ndarray, valid: np.ndarray | None, typ: pa.DataType) -> pa.Array:
    values = values.astype(_NUMPY[typ], copy=False)
    return pa.array(values, typ, mask=None if valid is None else ~valid)


def _times(values: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    # int64 microseconds viewed as timestamps (``pa.array`` of datetime64 goes through pyarrow's
    # pandas layer)
    return pa.array(values, pa.int64(), mask=None if valid is None else ~valid).view(
        pa.timestamp("us"))


def iterations(scan: Scan, block: bytes | bytearray, source: str) -> pa.Table:
    """The ``ITERATIONS`` rows of the fast lines (line numbers from 1 at the block's start;
    wrapper columns null: the caller sets them as for every iteration row)."""
    from forensics.dataset.schema import ITERATIONS

    k = len(scan.fast_line)
    i = scan.ints
    cols: dict[str, pa.Array] = {"iter": _column(i[I_ITER], scan.valid(I_ITER), pa.int64())}
    data = None
    for f, r, fr in zip(LOOKUP.fields, LOOKUP.int_row.tolist(), LOOKUP.flt_row.tolist()):
        if f.kind == log_fields.TIME:
            cols[f.column] = _times(i[r], scan.valid(r))
        elif f.kind == log_fields.DECIMAL:
            ok = scan.valid(N_INTS + fr)
            vals = scan.floats[fr]
            need = scan.need(fr)
            if need is not None:   # decimals past the exact fast path: Arrow reads their text
                if data is None:
                    data = pa.py_buffer(block)
                at = np.flatnonzero(need)
                text = spans(data, scan.fspan[2 * fr, at], scan.fspan[2 * fr + 1, at])
                vals = vals.copy()
                vals[at] = pc.cast(text.take(pa.array(np.arange(0, 2 * len(at), 2))),
                                   pa.float64()).to_numpy()
            cols[f.column] = _column(vals, ok, f.type)
        else:   # an integer, or a ratio's two
            for j, col in enumerate(f.columns):
                cols[col] = _column(i[r + j], scan.valid(r + j), f.type)
            if f.column == "rank":   # the line's global_rank, else the prefix's
                has = scan.valid(r)
                cols["rank"] = pa.array((i[r] if has is None else
                                         np.where(has, i[r], i[I_PRANK])).astype(np.int32))
    cols["log_time"] = _times(i[I_LOGT], None)
    none = pa.nulls(k, pa.string())
    arrays = {
        "source": repeated(source, k),
        "line": pa.array(scan.fast_line + 1),
        "format": _FORMATS.take(pa.array(scan.fmt)),
        "extra": pa.MapArray.from_arrays(pa.array(np.zeros(k + 1, np.int32)),
                                         pa.array([], pa.string()), pa.array([], pa.string())),
        "timestamp_text": none, "log_time_text": none,
        "collector": none, "collector_time": none, "host": none, **cols,
    }
    return pa.Table.from_arrays([arrays[f.name] for f in ITERATIONS], schema=ITERATIONS)
