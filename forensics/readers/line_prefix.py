"""Stripping the wrappers around an executor log line, vectorised over a block of lines.

A line as found in a post-mortem bundle is the executor's message wrapped, outside in, by:

1. Markdown quoting ``> `` (logs pasted into issues);
2. a collector's time, one of: a timestamp between tabs (Loki/Grafana exports:
   ``\t2025-12-04 22:23:18.869\t``), RFC 3339 then a space (``kubectl logs --timestamps``),
   journald ``-o short-iso`` (``2025-12-04T22:23:18+0000 host unit[pid]: ``). Docker json-file
   lines (``{"log": ..., "stream": ..., "time": ...}``) are unwrapped before (:func:`unwrap_docker`);
3. a launcher prefix: ``0: `` (``srun --label``, task id), ``[1,5]<stderr>:`` (``mpirun
   --tag-output``: job 1, rank 5; no space follows the colon, so indentation survives) or
   ``node07: `` (pdsh; a host name with a digit in it);
4. a logger prefix (possibly indented: a pasted code block reads as the unindented line), one of

   * TRT-LLM Python logger ``[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [I] `` -- ``[RANK n]``
     absent in single-process builds, ``[MPI_Rank n]`` in 2023 builds, and 2026 builds put
     ``[_torch][RANK n] `` after the severity;
   * TRT-LLM C++ logger ``[TensorRT-LLM][WARNING] `` (optionally ``[RANK n]`` / ``[MPI_Rank n]``);
   * glog ``I1130 12:00:00.123456 1234 file.cc:12] ``;
   * Python ``logging`` default ``2025-06-28 17:32:17,461 - INFO - `` (the logger name stays in
     the body);
   * uvicorn ``ERROR:    `` (the disaggregated router, trtllm issue 5820).

Numbers in a prefix are at most 9 digits (the rank columns are int32): a longer one is no
prefix, so such a line is read as if it had none and its text stays verbatim.

One RE2 pattern with every part optional is applied once per block with
``pyarrow.compute.extract_regex`` (no Python loop per line). Parts that are absent come back
as empty strings and are turned into nulls here. The pattern captures only the prefix: RE2's
capturing engine is slow over a long tail, so the body is cut off separately
(:func:`bodies`) and only for the lines that need it (iteration lines never do).
"""
from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forensics.readers.surrogates import escaped

_TS_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
#: RFC 3339 as ``kubectl logs --timestamps`` prints it (``T``, a zone; nanoseconds).
_TS_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
#: journald ``-o short-iso`` / ``short-iso-precise`` time (zone as ``+0000``).
_TS_JOURNAL = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d{4})"
#: A pdsh host label: a host name holding a digit (``node07``, ``gpu-a100-3``), so that an
#: exception name (``RuntimeError: ``) or a uvicorn level is never read as one.
_HOST = r"[A-Za-z][A-Za-z0-9.-]*[0-9][A-Za-z0-9.-]*"

#: The whole prefix grammar. Every group is named (RE2 ``extract_regex`` needs names).
PREFIX_PATTERN = (
    r"^(?P<quote>(?:> ?)*)"
    r"(?:"
    r"\t?(?P<ctime>" + _TS_ISO + r")\t"                   # tab-separated export (Loki/Grafana)
    r"|(?P<jtime>" + _TS_JOURNAL + r") [\w.-]+ [^\s:\[]+(?:\[\d+\])?: "   # journald short-iso
    r"|(?P<ktime>" + _TS_RFC3339 + r") "                # kubectl logs --timestamps
    r")?"
    r"(?:(?P<host>" + _HOST + r"): )?"
    r"(?: *(?P<srun>\d{1,9}): |\[\d{1,9},(?P<mpi>\d{1,9})\]<std(?:err|out)>:)?"
    r"(?:[ \t]*(?:"   # indented (a pasted code block): read as the unindented line
    # TRT-LLM Python logger
    r"(?:\[(?P<ltime>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] ?)?\[TRT-LLM\] ?"
    r"(?:\[(?:RANK|MPI_Rank) (?P<prank>\d{1,9})\] ?)?"
    r"\[(?P<psev>[FEWIVD])\] ?"
    r"(?:\[_torch\] ?\[RANK (?P<trank>\d{1,9})\] ?)?"
    r"|"
    # TRT-LLM C++ logger
    r"\[TensorRT-LLM\](?:\[(?:RANK|MPI_Rank) ?(?P<crank>\d{1,9})\])?"
    r"\[(?P<csev>ERROR|WARNING|INFO|DEBUG|VERBOSE|TRACE|INTERNAL_ERROR)\] ?"
    r"|"
    # glog
    r"(?P<gsev>[IWEF])(?P<gtime>\d{4} \d\d:\d\d:\d\d\.\d+) +\d+ [^\s\]]+:\d+\] "
    r"|"
    # Python logging default
    r"(?P<ytime>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - "
    r"(?P<ysev>CRITICAL|ERROR|WARNING|INFO|DEBUG) - "
    r"|"
    # uvicorn
    r"(?P<usev>CRITICAL|ERROR|WARNING|INFO|DEBUG):\s+"
    r"))?"
)


def _uncaptured(pattern: str) -> str:
    """The pattern with its named groups made non-capturing."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


#: The same grammar without captures: RE2 runs it as a fast DFA (for matching and replacing).
PREFIX_MATCH = _uncaptured(PREFIX_PATTERN)

#: A line that is only a collector timestamp (the collector printed it on the line before the
#: line it dates; Loki/Grafana exports put it between tabs).
COLLECTOR_TIMESTAMP_LINE = r"^(?:> ?)*\s*" + _TS_ISO + r"\s*$"

#: The commonest prefix (TRT-LLM Python logger with ``[RANK n]``), tried first: a short pattern
#: with no optional part costs RE2 a third of the full grammar. It must not be followed by
#: ``[`` (a ``[_torch][RANK n]`` tag or a nested prefix goes to the full grammar).
COMMON_PATTERN = (r"^\[(?P<ltime>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] \[TRT-LLM\] "
                  r"\[RANK (?P<prank>\d{1,9})\] \[(?P<psev>[FEWIVD])\] (?:[^\[]|$)")
#: The same without captures (RE2 runs it as a DFA); its fields are then cut by offset.
COMMON_MATCH = _uncaptured(COMMON_PATTERN)
#: Byte offset of the rank's digits in a :data:`COMMON_PATTERN` line.
_RANK_AT = len("[11/30/2026-12:00:00] [TRT-LLM] [RANK ")

_SEV_WORDS = pa.array(["CRITICAL", "INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "DEBUG",
                       "VERBOSE", "TRACE"])
_SEV_LETTERS = pa.array(["F", "F", "E", "W", "I", "D", "V", "V"])


@dataclasses.dataclass(frozen=True)
class Prefixes:
    """What the wrappers of each line of a block said (arrays of the block's length).

    Fields:
        launcher_rank: rank from ``0: `` / ``[1,5]<stderr>:`` (int32, null if none).
        logger_rank: rank from ``[RANK n]``/``[MPI_Rank n]``/``[_torch][RANK n]`` (int32 or null).
        severity: F E W I V D from any logger prefix, null without one.
        log_time: the logger prefix's time (else the collector's), verbatim, or null.
        collector_time: the collector's time (tab export, kubectl, journald, Docker), verbatim,
            or null.
        collector: the wrappers recognised, ``+``-joined (``tab``, ``kubectl``, ``journald``,
            ``docker``, ``srun``, ``mpirun``, ``pdsh``), or null.
        host: the pdsh host label, or null.
        has_logger: a logger prefix was recognised (bool numpy array).
        is_cpp: the prefix was the C++ ``[TensorRT-LLM][LEVEL]`` one (bool numpy array).
        body_offset: byte offset of the body in the line where the commonest prefix was read
            by offsets (:data:`COMMON_MATCH`), else -1 (int64 numpy array).
    """

    launcher_rank: pa.Array
    logger_rank: pa.Array
    severity: pa.Array
    log_time: pa.Array
    collector_time: pa.Array
    collector: pa.Array
    host: pa.Array
    has_logger: np.ndarray
    is_cpp: np.ndarray
    body_offset: np.ndarray


#: Prefix shapes a compiled scan recognised (:class:`Known`): not read (the grammar reads it),
#: the commonest prefix (:data:`COMMON_MATCH`), the C++ logger's ``[TensorRT-LLM][LEVEL]``
#: at the line's start (no rank), or no prefix possible (the grammar matches nothing: the line
#: is its own body, e.g. a traceback's frame and source lines).
SHAPE_OTHER, SHAPE_COMMON, SHAPE_CPP, SHAPE_BARE = range(4)
#: Severity letters by the index a compiled scan gives (:attr:`Known.severity`).
SEVERITY_LETTERS = "FEWIVD"


@dataclasses.dataclass(frozen=True)
class Known:
    """What a compiled scan already read of each line's prefix (numpy arrays of the lines'
    length), so that :func:`strip` and :func:`bodies` run their patterns over the other lines
    only. Fields: ``shape`` (``SHAPE_*``), ``body_offset`` (byte offset of the body in the
    line; shapes COMMON, CPP, BARE), ``rank`` (the ``[RANK n]`` of shape COMMON),
    ``severity`` (index into :data:`SEVERITY_LETTERS`; shapes COMMON and CPP)."""

    shape: np.ndarray
    body_offset: np.ndarray
    rank: np.ndarray
    severity: np.ndarray

    def take(self, mask: np.ndarray) -> Known:
        """The lines selected by ``mask`` (a bool array or indices)."""
        return Known(*(getattr(self, f.name)[mask] for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: list[Known]) -> Known:
        return Known(*(np.concatenate([getattr(p, f.name) for p in parts])
                       for f in dataclasses.fields(Known)))


#: Docker's json-file log driver writes each line as ``{"log": "...\\n", "stream": ..., "time": ...}``.
DOCKER_START = '{"log":'


def unwrap_docker(lines: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """Lines of a Docker json-file log replaced by the line they carry (its ``log`` without
    the newline), and their ``time`` (null for lines that are not such records); (lines,
    None) when no line is one. A record that is not valid JSON stays as it is; a lone
    surrogate escape in it stays escaped (:mod:`forensics.readers.surrogates`)."""
    is_rec = pc.fill_null(pc.starts_with(lines, DOCKER_START), False).to_numpy(
        zero_copy_only=False)
    if not is_rec.any():
        return lines, None
    out = lines.to_pylist()
    times: list[str | None] = [None] * len(out)
    for i in np.flatnonzero(is_rec):
        try:
            rec = json.loads(out[i])
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("log"), str):
            continue
        log = escaped(rec["log"])
        out[i] = log[:-1] if log.endswith("\n") else log
        t = rec.get("time")
        times[i] = escaped(t) if isinstance(t, str) else ""
    # a log line holding a newline of its own would break the one-row-per-line contract
    out = [o.replace("\n", " ").replace("\r", "") if o is not None else o for o in out]
    return pa.array(out, pa.string()), pa.array(times, pa.string())


def _nonempty(a: pa.Array) -> pa.Array:
    """Empty strings (absent optional group) to null."""
    return pc.if_else(pc.equal(a, ""), pa.scalar(None, pa.string()), a)


def _coalesce_str(*arrays: pa.Array) -> pa.Array:
    return pc.coalesce(*[_nonempty(a) for a in arrays])


#: :data:`PREFIX_MATCH` without the kubectl/journald times. The three time alternatives share
#: their start, which makes RE2 replace with its slower engines (2x the time per line); only
#: lines that start with a date need them (:data:`DATED_LINE`).
PREFIX_MATCH_UNDATED = _uncaptured(PREFIX_PATTERN.replace(
    r"|(?P<jtime>" + _TS_JOURNAL + r") [\w.-]+ [^\s:\[]+(?:\[\d+\])?: "
    r"|(?P<ktime>" + _TS_RFC3339 + r") ", ""))
DATED_LINE = r"^(?:> ?)*\d{4}-\d\d-\d\dT"


def bodies(lines: pa.Array, known: Known | None = None) -> pa.Array:
    """The lines with every recognised wrapper removed (``known``: the prefixes a compiled
    scan read, cut by offset; the pattern runs over the other lines)."""
    if known is not None and len(lines) and (known.shape != SHAPE_OTHER).any():
        rest = np.flatnonzero(known.shape == SHAPE_OTHER)
        off, data, _raw = string_offsets(lines)
        cut = spans(data, off[:-1] + known.body_offset, off[1:]).take(
            pa.array(np.arange(0, 2 * len(lines), 2)))
        if len(rest) == 0:
            return cut
        return _merge_rows(cut, bodies(lines.take(pa.array(rest))), rest)
    dated = pc.any(pc.match_substring_regex(lines, DATED_LINE)).as_py()
    return pc.replace_substring_regex(lines, PREFIX_MATCH if dated else PREFIX_MATCH_UNDATED,
                                      "", max_replacements=1)


def spans(data: pa.Buffer, start: np.ndarray, end: np.ndarray) -> pa.Array:
    """Zero-copy string array over ``data`` whose element ``2i`` is bytes ``start[i]:end[i]``.

    Odd elements are the bytes between two spans: read only the even ones (``take`` of the
    even indices copies just the spans' bytes). Spans must be in order, must not overlap, and
    must be cut at ASCII bytes so that every element is valid UTF-8. Arrow has no kernel that
    slices each string at its own offsets; this is how the parsers cut fields they located.
    """
    k = len(start)
    if k == 0:
        return pa.array([], pa.string())
    off = np.empty(2 * k, dtype=np.int32)
    off[0::2] = start
    off[1::2] = end
    return pa.StringArray.from_buffers(2 * k - 1, pa.py_buffer(off), data)


def string_offsets(a: pa.Array) -> tuple[np.ndarray, pa.Buffer, np.ndarray]:
    """(byte offsets of each element, len + 1; the data buffer; the data as numpy uint8)."""
    off = np.frombuffer(a.buffers()[1], dtype=np.int32)[a.offset:a.offset + len(a) + 1]
    data = a.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return off, data, raw


def _digits_from(raw: np.ndarray, at: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Length of the ASCII digit run starting at each ``at`` (not reaching ``stop``)."""
    n = np.zeros(len(at), dtype=np.int64)
    more = at < stop
    while more.any():
        pos = np.where(more, at + n, 0)
        digit = more & (raw[pos] >= 48) & (raw[pos] <= 57)
        n += digit
        more = digit & (at + n < stop)
    return n


def _common(lines: pa.Array, hit: np.ndarray
            ) -> tuple[pa.Array, pa.Array, pa.Array, np.ndarray]:
    """(log_time, logger_rank, severity, body offset) of the lines ``hit`` by
    :data:`COMMON_MATCH`.

    Its fields sit at fixed byte positions except the rank's digits, so they are cut by
    offset (no capturing regex, which costs RE2 twice the matching one).
    """
    off, data, raw = string_offsets(lines)
    o = off[:-1][hit].astype(np.int64)
    at = o + _RANK_AT
    nd = _digits_from(raw, at, off[1:][hit])
    evens = pa.array(np.arange(0, 2 * len(o), 2))
    log_time = spans(data, o + 1, o + 20).take(evens)
    rank = pc.cast(spans(data, at, at + nd).take(evens), pa.int32())
    sev = spans(data, at + nd + 3, at + nd + 4).take(evens)
    return log_time, rank, sev, _RANK_AT + nd + 6   # "] [X] " follows the digits


def _derived(f: dict[str, pa.Array]) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array,
                                             np.ndarray]:
    """(launcher_rank, logger_rank, severity, log_time, is_cpp) from the full grammar's groups."""
    launcher = pc.cast(_coalesce_str(f["mpi"], f["srun"]), pa.int32())
    logger_rank = pc.cast(_coalesce_str(f["prank"], f["trank"], f["crank"]), pa.int32())
    word = _coalesce_str(f["csev"], f["ysev"], f["usev"])
    word_letter = pc.take(_SEV_LETTERS, pc.index_in(word, value_set=_SEV_WORDS))
    severity = pc.coalesce(_nonempty(f["psev"]), _nonempty(f["gsev"]), word_letter)
    log_time = _coalesce_str(f["ltime"], f["gtime"], f["ytime"], f["ctime"], f["jtime"],
                             f["ktime"])
    is_cpp = pc.fill_null(pc.not_equal(f["csev"], ""), False).to_numpy(zero_copy_only=False)
    return launcher, logger_rank, severity, log_time, is_cpp


def _collectors(f: dict[str, pa.Array]) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """(collector_time, collector names, pdsh host) from the full grammar's groups; None when
    no line has any (the common case: nothing to compute)."""
    if not any(pc.max(pc.binary_length(f[g])).as_py()
               for g in ("ctime", "jtime", "ktime", "host", "srun", "mpi")):
        return None
    # (join's null_handling="skip" drops all-null rows in pyarrow 26: "+name" pieces instead)
    names = [pc.if_else(pc.equal(f[g], ""), "", pa.scalar("+" + name))
             for g, name in (("ctime", "tab"), ("jtime", "journald"), ("ktime", "kubectl"),
                             ("host", "pdsh"), ("srun", "srun"), ("mpi", "mpirun"))]
    joined = pc.utf8_ltrim(pc.binary_join_element_wise(*names, ""), characters="+")
    return (_coalesce_str(f["ctime"], f["jtime"], f["ktime"]), _nonempty(joined),
            _nonempty(f["host"]))


_NULL_STR = pa.scalar(None, pa.string())


def _merge_rows(values: pa.Array, other: pa.Array, at: np.ndarray) -> pa.Array:
    """``values`` with its rows ``at`` replaced by ``other``'s, in order."""
    n = len(values)
    order = np.arange(n, dtype=np.int64)
    order[at] = n + np.arange(len(at))
    return pa.concat_arrays([values, other.cast(values.type)]).take(pa.array(order))


def _strip_known(lines: pa.Array, known: Known) -> Prefixes:
    """:func:`strip` of lines whose prefixes a compiled scan partly read (``known``): the
    read shapes' fields from its values, the grammar over the other lines only."""
    n = len(lines)
    shape = known.shape
    common, cpp = shape == SHAPE_COMMON, shape == SHAPE_CPP
    logger = common | cpp
    off, data, _raw = string_offsets(lines)
    evens = pa.array(np.arange(0, 2 * n, 2))
    start = off[:-1].astype(np.int64)
    log_time = spans(data, start + np.where(common, 1, 0), start + np.where(common, 20, 0))\
        .take(evens)
    log_time = pc.if_else(pa.array(common), log_time, _NULL_STR)
    severity = pa.array(np.array(list(SEVERITY_LETTERS), dtype=object)[known.severity.astype(
        np.int64) % len(SEVERITY_LETTERS)], pa.string(), mask=~logger)
    rank = pa.array(known.rank.astype(np.int32), pa.int32(), mask=~common)
    none = pa.nulls(n, pa.string())
    pre = Prefixes(launcher_rank=pa.nulls(n, pa.int32()), logger_rank=rank, severity=severity,
                   log_time=log_time, collector_time=none, collector=none, host=none,
                   has_logger=logger, is_cpp=cpp,
                   body_offset=np.where(common, known.body_offset, -1).astype(np.int64))
    rest = np.flatnonzero(shape == SHAPE_OTHER)
    if len(rest) == 0:
        return pre
    sub = strip(lines.take(pa.array(rest)))
    merged = {}
    for f in dataclasses.fields(Prefixes):
        mine, theirs = getattr(pre, f.name), getattr(sub, f.name)
        if isinstance(mine, np.ndarray):
            out = mine.copy()
            out[rest] = theirs
            merged[f.name] = out
        elif theirs.null_count == len(theirs) and mine.null_count == n:
            merged[f.name] = mine
        else:
            merged[f.name] = _merge_rows(mine, theirs, rest)
    return Prefixes(**merged)


def strip(lines: pa.Array, known: Known | None = None) -> Prefixes:
    """What each line's wrappers say.

    Example: ``[1,5]<stderr>:[11/30/2026-12:00:00] [TRT-LLM] [RANK 5] [W] hi`` gives
    launcher_rank 5, logger_rank 5, severity W, log_time 11/30/2026-12:00:00, body ``hi``.

    The commonest prefix (:data:`COMMON_MATCH`) is read by byte offsets; only the other lines
    go through the full grammar, and the two results are interleaved back into line order.
    With ``known`` (what a compiled scan read), only the lines of shape ``SHAPE_OTHER`` are
    matched at all.
    """
    if known is not None and len(lines) and (known.shape != SHAPE_OTHER).any():
        return _strip_known(lines, known)
    n = len(lines)
    hit = pc.fill_null(pc.match_substring_regex(lines, COMMON_MATCH), False)\
        .to_numpy(zero_copy_only=False)
    c_time, c_rank, c_sev, c_body = _common(lines, hit)
    body_offset = np.full(n, -1, dtype=np.int64)
    body_offset[hit] = c_body
    if hit.all():
        none = pa.nulls(n, pa.string())
        return Prefixes(launcher_rank=pa.nulls(n, pa.int32()), logger_rank=c_rank,
                        severity=c_sev, log_time=c_time, collector_time=none, collector=none,
                        host=none, has_logger=np.ones(n, dtype=bool),
                        is_cpp=np.zeros(n, dtype=bool), body_offset=body_offset)
    miss = np.flatnonzero(~hit)
    full = pc.extract_regex(lines.take(pa.array(miss)), PREFIX_PATTERN)
    g = dict(zip([x.name for x in full.type], full.flatten()))
    m_launcher, m_rank, m_sev, m_time, m_cpp = _derived(g)
    wrappers = _collectors(g)
    # line i -> its row in concat([common rows, other rows])
    order = np.empty(n, dtype=np.int64)
    n_hit = n - len(miss)
    order[hit] = np.arange(n_hit)
    order[miss] = n_hit + np.arange(len(miss))
    order_a = pa.array(order)

    def merge(common: pa.Array, other: pa.Array) -> pa.Array:
        return pa.concat_arrays([common, other.cast(common.type)]).take(order_a)

    launcher = pc.take(pa.concat_arrays([pa.nulls(n_hit, pa.int32()), m_launcher]), order_a)
    severity = merge(c_sev, m_sev)
    is_cpp = np.zeros(n, dtype=bool)
    is_cpp[miss] = m_cpp
    if wrappers is None:
        m_ctime = m_coll = m_host = none = pa.nulls(n, pa.string())
    else:
        none = pa.nulls(n_hit, pa.string())
        m_ctime, m_coll, m_host = (merge(none, w) for w in wrappers)
    return Prefixes(launcher_rank=launcher, logger_rank=merge(c_rank, m_rank),
                    severity=severity, log_time=merge(c_time, m_time),
                    collector_time=m_ctime, collector=m_coll, host=m_host,
                    has_logger=pc.is_valid(severity).to_numpy(zero_copy_only=False),
                    is_cpp=is_cpp, body_offset=body_offset)
