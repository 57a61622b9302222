"""Stripping the wrappers around an executor log line, vectorised over a block of lines.

A line as found in a post-mortem bundle is the executor's message wrapped, outside in, by:

1. Markdown quoting ``> `` (logs pasted into issues);
2. a collector timestamp followed by a tab (log shippers, ``kubectl``-style exports);
3. a launcher prefix: ``0: `` (``srun --label``, task id) or ``[1,5]<stderr>:`` (``mpirun
   --tag-output``: job 1, rank 5; no space follows the colon, so indentation survives);
4. a logger prefix, one of

   * TRT-LLM Python logger ``[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [I] `` -- ``[RANK n]``
     absent in single-process builds, ``[MPI_Rank n]`` in 2023 builds, and 2026 builds put
     ``[_torch][RANK n] `` after the severity;
   * TRT-LLM C++ logger ``[TensorRT-LLM][WARNING] `` (optionally ``[RANK n]`` / ``[MPI_Rank n]``);
   * glog ``I1130 12:00:00.123456 1234 file.cc:12] ``;
   * Python ``logging`` default ``2025-06-28 17:32:17,461 - INFO - `` (the logger name stays in
     the body);
   * uvicorn ``ERROR:    `` (the disaggregated router, trtllm issue 5820).

One RE2 pattern with every part optional is applied once per block with
``pyarrow.compute.extract_regex`` (no Python loop per line). Parts that are absent come back
as empty strings and are turned into nulls here. The pattern captures only the prefix: RE2's
capturing engine is slow over a long tail, so the body is cut off separately
(:func:`bodies`) and only for the lines that need it (iteration lines never do).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_TS_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"

#: The whole prefix grammar. Every group is named (RE2 ``extract_regex`` needs names).
PREFIX_PATTERN = (
    r"^(?P<quote>(?:> ?)*)"
    r"(?:(?P<ctime>" + _TS_ISO + r")\t)?"
    r"(?: *(?P<srun>\d+): |\[\d+,(?P<mpi>\d+)\]<std(?:err|out)>:)?"
    r"(?:"
    # TRT-LLM Python logger
    r"(?:\[(?P<ltime>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] ?)?\[TRT-LLM\] ?"
    r"(?:\[(?:RANK|MPI_Rank) (?P<prank>\d+)\] ?)?"
    r"\[(?P<psev>[FEWIVD])\] ?"
    r"(?:\[_torch\] ?\[RANK (?P<trank>\d+)\] ?)?"
    r"|"
    # TRT-LLM C++ logger
    r"\[TensorRT-LLM\](?:\[(?:RANK|MPI_Rank) ?(?P<crank>\d+)\])?"
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
    r")?"
)


def _uncaptured(pattern: str) -> str:
    """The pattern with its named groups made non-capturing."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


#: The same grammar without captures: RE2 runs it as a fast DFA (for matching and replacing).
PREFIX_MATCH = _uncaptured(PREFIX_PATTERN)

#: A body that is only a collector timestamp (the collector printed it on the line before).
COLLECTOR_TIMESTAMP_LINE = r"^" + _TS_ISO + r"\s*$"

#: The commonest prefix (TRT-LLM Python logger with ``[RANK n]``), tried first: a short pattern
#: with no optional part costs RE2 a third of the full grammar. It must not be followed by
#: ``[`` (a ``[_torch][RANK n]`` tag or a nested prefix goes to the full grammar).
COMMON_PATTERN = (r"^\[(?P<ltime>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] \[TRT-LLM\] "
                  r"\[RANK (?P<prank>\d+)\] \[(?P<psev>[FEWIVD])\] (?:[^\[]|$)")
_FIELDS = ("ctime", "srun", "mpi", "ltime", "prank", "psev", "trank", "crank", "csev", "gsev",
           "gtime", "ytime", "ysev", "usev")

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
        has_logger: a logger prefix was recognised (bool numpy array).
        is_cpp: the prefix was the C++ ``[TensorRT-LLM][LEVEL]`` one (bool numpy array).
    """

    launcher_rank: pa.Array
    logger_rank: pa.Array
    severity: pa.Array
    log_time: pa.Array
    has_logger: np.ndarray
    is_cpp: np.ndarray


def _nonempty(a: pa.Array) -> pa.Array:
    """Empty strings (absent optional group) to null."""
    return pc.if_else(pc.equal(a, ""), pa.scalar(None, pa.string()), a)


def _coalesce_str(*arrays: pa.Array) -> pa.Array:
    return pc.coalesce(*[_nonempty(a) for a in arrays])


def bodies(lines: pa.Array) -> pa.Array:
    """The lines with every recognised wrapper removed."""
    return pc.replace_substring_regex(lines, PREFIX_MATCH, "", max_replacements=1)


def strip(lines: pa.Array) -> Prefixes:
    """What each line's wrappers say.

    Example: ``[1,5]<stderr>:[11/30/2026-12:00:00] [TRT-LLM] [RANK 5] [W] hi`` gives
    launcher_rank 5, logger_rank 5, severity W, log_time 11/30/2026-12:00:00, body ``hi``.
    """
    common = pc.extract_regex(lines, COMMON_PATTERN)
    hit = pc.is_valid(common).to_numpy(zero_copy_only=False)
    f = dict(zip([x.name for x in common.type], common.flatten()))
    if hit.all():
        empty = pa.nulls(len(lines), pa.string())
        f = {name: f.get(name, empty) for name in _FIELDS}
    else:
        miss = np.flatnonzero(~hit)
        full = pc.extract_regex(lines.take(pa.array(miss)), PREFIX_PATTERN)
        idx = np.full(len(lines), -1, dtype=np.int64)
        idx[miss] = np.arange(len(miss))
        spread = pa.array(idx, mask=idx < 0)
        g = dict(zip([x.name for x in full.type], full.flatten()))
        f = {name: (pc.coalesce(f[name], pc.take(g[name], spread)) if name in f
                    else pc.take(g[name], spread)) for name in _FIELDS}
    launcher = pc.cast(_coalesce_str(f["mpi"], f["srun"]), pa.int32())
    logger_rank = pc.cast(_coalesce_str(f["prank"], f["trank"], f["crank"]), pa.int32())
    word = _coalesce_str(f["csev"], f["ysev"], f["usev"])
    word_letter = pc.take(_SEV_LETTERS, pc.index_in(word, value_set=_SEV_WORDS))
    severity = pc.coalesce(_nonempty(f["psev"]), _nonempty(f["gsev"]), word_letter)
    log_time = _coalesce_str(f["ltime"], f["gtime"], f["ytime"], f["ctime"])
    has_logger = pc.is_valid(severity).to_numpy(zero_copy_only=False)
    is_cpp = pc.not_equal(f["csev"], "").to_numpy(zero_copy_only=False)
    return Prefixes(launcher_rank=launcher, logger_rank=logger_rank,
                    severity=severity, log_time=log_time, has_logger=has_logger, is_cpp=is_cpp)
