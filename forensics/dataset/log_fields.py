"""The iteration line's fields, written once (docs/adp-executor.md section 8).

:data:`ITERATION_FIELDS` is the one list of what an iteration line (``print_iter_log``) can
hold. Everything that reads or writes those lines is built from it when imported:

* the ``iterations`` table's columns (:data:`forensics.dataset.schema.ITERATIONS`);
* the reference reader (:mod:`forensics.readers.iteration_line`): names, columns, types, units,
  digit bounds, the format a field implies;
* the compiled scanner's lookup arrays (:mod:`forensics.readers.native_scan`, used by
  :mod:`forensics.readers.compiled.scan_kernel`): the same, as arrays indexed by a name's code;
* the simulator's writer (:mod:`forensics.simulate.log_writer`): which fields a format prints,
  in which order, with which separator and unit.

One row per field and era of printing. A field whose separator or place changed between
formats has a row per shape (``num_scheduled_requests``: ``": "`` at the end in V2-V3, PR #3914;
``" = "`` after ``rank`` from V4, PR #14206). The rows are in printing order: every format
prints its fields in the order of the rows (``iter`` first, always; the ``states`` dict last).

Adding a field is one row here (docs/adding-a-log-field.md walks through it).

Example (the V4 line, one row per pair after ``iter``)::

    iter = 8, global_rank = 0, rank = 0, num_scheduled_requests = 2, kv_cache_util = 0.512,
    currank_total_requests = 5/9, host_step_time = 31.2ms, prev_device_step_time = N/A,
    timestamp = 2026-05-04 10:00:01, states = {'num_ctx_requests': 1, 'num_ctx_tokens': 17,
    'num_generation_tokens': 1}
"""
from __future__ import annotations

import dataclasses
import hashlib

import pyarrow as pa

#: Iteration-line formats, oldest first (section 8). A line's format is the newest format
#: among those its fields imply (:attr:`Field.since`).
FORMATS = ("V1", "V2", "V3", "V4", "V5")

#: Kinds of value, each with one grammar: ``int`` (1 to ``digits`` decimal digits), ``decimal``
#: (``D+[.D+]`` then the unit), ``time`` (``YYYY-MM-DD HH:MM:SS``, the executor's local clock),
#: ``ratio`` (``a/b``, two integers of at most ``digits`` digits, into two columns). Any value
#: but a ``time`` or a ``ratio`` may be ``N/A`` (read as null).
INT, DECIMAL, TIME, RATIO = "int", "decimal", "time", "ratio"
KINDS = (INT, DECIMAL, TIME, RATIO)

#: Most digits an integer of each width may have and always fit (a longer value is kept
#: verbatim in ``extra`` instead of overflowing the cast).
MAX_DIGITS = {32: 9, 64: 18}

EQ, COLON = " = ", ": "


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of the iteration line, in one printing shape.

    Fields: ``name`` (as printed), ``column`` (its ``ITERATIONS`` column; a ``ratio`` names its
    two, ``a_col/b_col``), ``kind`` (one of :data:`KINDS`), ``type`` (the column's Arrow type),
    ``unit`` (printed right after a decimal value, not after ``N/A``), ``digits`` (most digits
    of an integer value; 0 for other kinds), ``sep`` (between name and value), ``since`` /
    ``until`` (first and last format printing it this way; ``until`` None: still printed),
    ``in_states`` (a key of the ``states`` dict, printed ``'name': value``), ``pr`` (the
    upstream pull request that introduced it, None for the first logs').
    """

    name: str
    column: str
    kind: str
    type: pa.DataType
    unit: str = ""
    digits: int = 0
    sep: str = EQ
    since: str = "V1"
    until: str | None = None
    in_states: bool = False
    pr: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The column(s) the field fills (two for a ``ratio``)."""
        return tuple(self.column.split("/"))

    def printed_in(self, fmt: str) -> bool:
        """Whether lines of format ``fmt`` print this field in this shape."""
        i = FORMATS.index(fmt)
        return FORMATS.index(self.since) <= i and (
            self.until is None or i <= FORMATS.index(self.until))


_i32, _i64, _f64, _ts = pa.int32(), pa.int64(), pa.float64(), pa.timestamp("us")

#: The iteration line's fields in printing order (``iter`` before them is implicit).
ITERATION_FIELDS: tuple[Field, ...] = (
    #     name                      column                      kind     type  unit digits sep    since  until  in_states / pr
    Field("global_rank",            "rank",                     INT,     _i32, "",  9),
    Field("rank",                   "local_rank",               INT,     _i32, "",  9),
    Field("num_scheduled_requests", "num_scheduled_requests",   INT,     _i32, "",  9, EQ,    "V4", pr="#14206"),
    Field("adp_dummy_ctx_tokens",   "adp_dummy_ctx_tokens",     INT,     _i64, "", 18, EQ,    "V5", pr="#18308"),
    Field("adp_dummy_gen_tokens",   "adp_dummy_gen_tokens",     INT,     _i64, "", 18, EQ,    "V5", pr="#18308"),
    Field("kv_cache_util",          "kv_cache_util",            DECIMAL, _f64, "",  0, EQ,    "V4", pr="#14206"),
    Field("currank_total_requests", "currank_requests/total_requests", RATIO, _i64, "", 18),
    Field("elapsed_time",           "elapsed_time_s",           DECIMAL, _f64, "s", 0, EQ,    "V1", "V2"),
    Field("host_step_time",         "host_step_time_ms",        DECIMAL, _f64, "ms", 0, EQ,   "V3"),
    Field("prev_device_step_time",  "prev_device_step_time_ms", DECIMAL, _f64, "ms", 0, EQ,   "V3"),
    Field("timestamp",              "timestamp",                TIME,    _ts,  "",  0),
    Field("num_scheduled_requests", "num_scheduled_requests",   INT,     _i32, "",  9, COLON, "V2", "V3", pr="#3914"),
    Field("num_ctx_requests",       "num_ctx_requests",         INT,     _i64, "", 18, COLON, in_states=True),
    Field("num_ctx_tokens",         "num_ctx_tokens",           INT,     _i64, "", 18, COLON, in_states=True),
    Field("num_generation_tokens",  "num_generation_tokens",    INT,     _i64, "", 18, COLON, in_states=True),
)


def _row(f: Field) -> tuple:
    return tuple(getattr(f, a.name) for a in dataclasses.fields(f))


def _shape(f: Field) -> tuple:
    return (f.column, f.kind, f.type, f.unit, f.digits, f.in_states)


def check(fields: tuple[Field, ...]) -> None:
    """Raise ValueError where the table breaks a rule the readers rely on: known kinds and
    formats, digit bounds that fit the type, the ``states`` keys last, a name's rows agreeing
    on column, kind, type, unit and digits, names of at most 24 letters and ``_``, at most 63
    names (the compiled scanner's bit set of names seen), one ``time`` and one ``ratio``
    field (the readers' special columns)."""
    seen: dict[str, Field] = {}
    states = False
    for f in fields:
        where = f"iteration field {f.name!r}"
        if f.kind not in KINDS or f.since not in FORMATS or (f.until or "V1") not in FORMATS:
            raise ValueError(f"{where}: unknown kind or format")
        if f.sep not in (EQ, COLON) or (f.in_states and f.sep != COLON):
            raise ValueError(f"{where}: separator must be ' = ' or ': ' (': ' in states)")
        if f.kind in (INT, RATIO) and not (0 < f.digits <= MAX_DIGITS[f.type.bit_width]):
            raise ValueError(f"{where}: digits must be 1..{MAX_DIGITS[f.type.bit_width]}")
        if f.kind in (DECIMAL, TIME) and f.digits:
            raise ValueError(f"{where}: digits are for integers")
        if f.in_states and f.kind != INT:
            raise ValueError(f"{where}: a states key is an integer")
        if states and not f.in_states:
            raise ValueError(f"{where}: the states keys come last")
        states = states or f.in_states
        first = seen.setdefault(f.name, f)
        if _shape(first) != _shape(f):
            raise ValueError(f"{where}: its rows disagree")
        if f.name in ("iter", "states") or not f.name.replace("_", "a").isalpha() \
                or not f.name.islower() or len(f.name) > 24:
            raise ValueError(f"{where}: a name is 1-24 lower-case letters and '_' (the "
                             "compiled scanner compares a name as three 8-byte words)")
    if len(seen) > 63:
        raise ValueError("at most 63 iteration field names")
    for k in (TIME, RATIO):
        if sum(f.kind == k for f in seen.values()) != 1:
            raise ValueError(f"exactly one {k} field")


def unique(fields: tuple[Field, ...] = ITERATION_FIELDS) -> tuple[Field, ...]:
    """The first row of each name, the ``states`` keys last (a name's code order)."""
    firsts: dict[str, Field] = {}
    for f in fields:
        firsts.setdefault(f.name, f)
    out = list(firsts.values())
    return tuple([f for f in out if not f.in_states] + [f for f in out if f.in_states])


def implied_formats(fields: tuple[Field, ...] = ITERATION_FIELDS) -> dict[str, tuple[int, int]]:
    """Per name, the index in :data:`FORMATS` its presence implies when printed with ``": "``
    and with ``" = "`` (the oldest format printing it so; a separator no format uses: the
    oldest of the name's rows). ``num_scheduled_requests``: (V2, V4)."""
    out = {}
    for name in dict.fromkeys(f.name for f in fields):
        rows = [f for f in fields if f.name == name]
        oldest = min(FORMATS.index(f.since) for f in rows)
        out[name] = tuple(min((FORMATS.index(f.since) for f in rows if f.sep == sep),
                              default=oldest) for sep in (COLON, EQ))
    return out


def printed(fmt: str, fields: tuple[Field, ...] = ITERATION_FIELDS) -> tuple[Field, ...]:
    """The rows lines of format ``fmt`` print, in printing order."""
    return tuple(f for f in fields if f.printed_in(fmt))


def column_types(fields: tuple[Field, ...] = ITERATION_FIELDS) -> dict[str, pa.DataType]:
    """Each column the fields fill and its Arrow type, in the table's order."""
    return {c: f.type for f in unique(fields) for c in f.columns}


def digest(fields: tuple[Field, ...] = ITERATION_FIELDS) -> int:
    """A 63-bit digest of the table (keys the compiled scanner's caches to it)."""
    text = repr([_row(f) for f in fields]).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


check(ITERATION_FIELDS)
