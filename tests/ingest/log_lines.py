"""Constructed executor-log lines of every documented variant, for tests (docs §8).

Each builder returns a :class:`Piece`: the raw lines it wrote and what a parser should make of
them (kind, and the values a test can check). :func:`random_log` mixes pieces into a whole log,
optionally wrapped by launchers, quoting and collector timestamps, with ranks interleaved.
Nothing here imports the parser: expectations come from the documented formats only.
"""
from __future__ import annotations

import dataclasses
import datetime
import random
from typing import Any

VERSIONS = ("V1", "V2", "V3", "V4", "V5")
#: Logger prefix styles of section 8.
LOGGER_STYLES = ("rank", "norank", "mpi_rank", "torch_rank", "cpp", "glog", "pylogging", "none")
LAUNCHERS = (None, "srun", "mpirun")
SEVERITIES = ("F", "E", "W", "I", "V", "D")
_CPP_LEVEL = {"F": "INTERNAL_ERROR", "E": "ERROR", "W": "WARNING", "I": "INFO", "V": "VERBOSE",
              "D": "DEBUG"}
_PY_LEVEL = {"F": "CRITICAL", "E": "ERROR", "W": "WARNING", "I": "INFO", "D": "DEBUG"}
LOG_TIME = "11/30/2026-12:00:01"
#: ``LOG_TIME`` read as the logger's local clock (schema 2.0: log times are timestamps).
LOG_TIME_VALUE = datetime.datetime(2026, 11, 30, 12, 0, 1)


@dataclasses.dataclass
class Piece:
    """Lines written together and what they mean.

    Fields: ``lines`` (raw text, no newlines); ``kind`` ("iteration", an event kind, or
    "unparsed"); ``expect`` (column values a parser must produce for the piece's first row).
    """

    lines: list[str]
    kind: str
    expect: dict[str, Any] = dataclasses.field(default_factory=dict)
    stream: int | None = None


# ----------------------------------------------------------------- iteration lines

def iteration_body(version: str, *, it: int, global_rank: int, rank: int, nsched: int = 3,
                   cur: int = 5, total: int = 40, host_ms: float | None = 12.5,
                   prev_ms: float | None = 11.25, elapsed_s: float = 0.0125,
                   kv: float | None = 0.5, dummy_ctx: int = 0, dummy_gen: int = 1,
                   ctx_req: int = 1, ctx_tok: int = 512, gen_tok: int = 7,
                   extra_states: dict[str, int] | None = None,
                   extra_fields: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """An iteration line body of ``version`` and the column values it encodes."""
    states = {"num_ctx_requests": ctx_req, "num_ctx_tokens": ctx_tok,
              "num_generation_tokens": gen_tok, **(extra_states or {})}
    st = "states = {" + ", ".join(f"'{k}': {v}" for k, v in states.items()) + "}"
    ts = "timestamp = 2026-11-30 12:00:01"
    head = f"iter = {it}, global_rank = {global_rank}, rank = {rank}"
    cr = f"currank_total_requests = {cur}/{total}"
    host = "N/A" if host_ms is None else f"{host_ms}ms"
    prev = "N/A" if prev_ms is None else f"{prev_ms}ms"
    kvs = "N/A" if kv is None else f"{kv}"
    exp: dict[str, Any] = {"iter": it, "rank": global_rank, "local_rank": rank,
                           "currank_requests": cur, "total_requests": total,
                           "num_ctx_requests": ctx_req, "num_ctx_tokens": ctx_tok,
                           "num_generation_tokens": gen_tok, "format": version,
                           "timestamp": datetime.datetime(2026, 11, 30, 12, 0, 1)}
    if version == "V1":
        parts = [head, cr, f"elapsed_time = {elapsed_s}s", ts, st]
        exp.update(elapsed_time_s=elapsed_s, num_scheduled_requests=None)
    elif version == "V2":   # PR #3914
        parts = [head, cr, f"elapsed_time = {elapsed_s}s", ts, f"num_scheduled_requests: {nsched}",
                 st]
        exp.update(elapsed_time_s=elapsed_s, num_scheduled_requests=nsched)
    elif version == "V3":
        parts = [head, cr, f"host_step_time = {host}", f"prev_device_step_time = {prev}", ts,
                 f"num_scheduled_requests: {nsched}", st]
        exp.update(host_step_time_ms=host_ms, prev_device_step_time_ms=prev_ms,
                   num_scheduled_requests=nsched)
    elif version == "V4":   # PR #14206
        parts = [head, f"num_scheduled_requests = {nsched}", cr, f"host_step_time = {host}",
                 f"prev_device_step_time = {prev}", ts, f"kv_cache_util = {kvs}", st]
        exp.update(host_step_time_ms=host_ms, prev_device_step_time_ms=prev_ms,
                   num_scheduled_requests=nsched, kv_cache_util=kv)
    elif version == "V5":   # PR #18308
        parts = [head, f"num_scheduled_requests = {nsched}",
                 f"adp_dummy_ctx_tokens = {dummy_ctx}", f"adp_dummy_gen_tokens = {dummy_gen}", cr,
                 f"host_step_time = {host}", f"prev_device_step_time = {prev}", ts,
                 f"kv_cache_util = {kvs}", st]
        exp.update(host_step_time_ms=host_ms, prev_device_step_time_ms=prev_ms,
                   num_scheduled_requests=nsched, kv_cache_util=kv,
                   adp_dummy_ctx_tokens=dummy_ctx, adp_dummy_gen_tokens=dummy_gen)
    else:
        raise ValueError(version)
    extra = {f"states.{k}": str(v) for k, v in (extra_states or {}).items()}
    for k, v in (extra_fields or {}).items():
        parts.append(f"{k} = {v}")
        extra[k] = str(v)
    exp["extra"] = extra
    return ", ".join(parts), exp


# ----------------------------------------------------------------- prefixes

def logger_prefix(style: str, *, rank: int | None, severity: str = "I") -> tuple[str, dict]:
    """A logger prefix and the (rank, severity, log_time) it states."""
    if style == "rank":
        return f"[{LOG_TIME}] [TRT-LLM] [RANK {rank}] [{severity}] ", \
            {"rank": rank, "severity": severity, "log_time": LOG_TIME_VALUE}
    if style == "norank":
        return f"[{LOG_TIME}] [TRT-LLM] [{severity}] ", \
            {"rank": None, "severity": severity, "log_time": LOG_TIME_VALUE}
    if style == "mpi_rank":     # 2023 builds
        return f"[{LOG_TIME}] [TRT-LLM] [MPI_Rank {rank}] [{severity}] ", \
            {"rank": rank, "severity": severity, "log_time": LOG_TIME_VALUE}
    if style == "torch_rank":   # 2026 builds
        return f"[{LOG_TIME}] [TRT-LLM] [{severity}] [_torch][RANK {rank}] ", \
            {"rank": rank, "severity": severity, "log_time": LOG_TIME_VALUE}
    if style == "cpp":
        return f"[TensorRT-LLM][{_CPP_LEVEL[severity]}] ", \
            {"rank": None, "severity": severity, "log_time": None}
    if style == "glog":
        sev = severity if severity in "IWEF" else "I"
        return f"{sev}1130 12:00:01.123456 4242 py_executor.cc:12] ", \
            {"rank": None, "severity": sev, "log_time": None,   # no year: kept as text
             "log_time_text": "1130 12:00:01.123456"}
    if style == "pylogging":
        sev = severity if severity in _PY_LEVEL else "I"
        return f"2026-11-30 12:00:01,461 - {_PY_LEVEL[sev]} - ", \
            {"rank": None, "severity": sev,
             "log_time": datetime.datetime(2026, 11, 30, 12, 0, 1, 461000)}
    if style == "none":
        return "", {"rank": None, "severity": None, "log_time": None}
    raise ValueError(style)


def launcher_prefix(launcher: str | None, rank: int) -> str:
    """``0: `` (srun) or ``[1,5]<stderr>:`` (mpirun: the second number is the rank)."""
    if launcher == "srun":
        return f"{rank}: "
    if launcher == "mpirun":
        return f"[1,{rank}]<stderr>:"
    return ""


def wrap(piece: Piece, *, launcher: str | None = None, rank: int = 0, quote: bool = False,
         collector_tab: bool = False) -> Piece:
    """The piece with every line wrapped (launcher, then collector time, then quoting)."""
    out = []
    for ln in piece.lines:
        ln = launcher_prefix(launcher, rank) + ln
        if collector_tab:
            ln = "2026-11-30T12:00:01.000001Z\t" + ln
        if quote:
            ln = "> " + ln
        out.append(ln)
    exp = dict(piece.expect)
    if launcher is not None and exp.get("rank", "absent") is None:
        exp["rank"] = rank
    return Piece(out, piece.kind, exp, stream=rank if launcher else None)


# ----------------------------------------------------------------- pieces

def iteration(version: str, style: str = "rank", *, it: int = 1, rank: int = 0,
              **kw: Any) -> Piece:
    body, exp = iteration_body(version, it=it, global_rank=rank, rank=rank, **kw)
    pre, pexp = logger_prefix(style, rank=rank)
    exp["log_time"] = pexp["log_time"]
    return Piece([pre + body], "iteration", exp)


def logged(body: str, kind: str, style: str = "rank", *, rank: int = 0, severity: str = "I",
           **expect: Any) -> Piece:
    pre, pexp = logger_prefix(style, rank=rank, severity=severity)
    return Piece([pre + body], kind, {**pexp, **expect})


def surplus(n: int, m: int, *, rank: int = 0) -> Piece:
    return logged(f"active_requests ({n}) exceeds expected_num_active_requests ({m}); "
                  "tolerating the ADP pad-dummy surplus", "adp_surplus_tolerated",
                  rank=rank, severity="W", num_active=n, num_expected=m)


def dummy_alloc_failed(*, rank: int = 0) -> Piece:
    return logged("Cannot allocate KV cache for the ADP pad dummy; skipping padding this "
                  "iteration, the fleet will retry.", "adp_dummy_alloc_failed",
                  rank=rank, severity="W")


def dummy_no_kv_capacity(*, rank: int = 0) -> Piece:
    return logged("Unable to fit the complete attention-DP dummy KV allocation; skipping this "
                  "forward iteration and retrying", "adp_dummy_no_kv_capacity",
                  rank=rank, severity="W")


def dummy_skipped(fetch: int, sched: int, *, rank: int = 0) -> Piece:
    return logged(f"Skipped adding dummy requests: num_fetch_requests={fetch}, "
                  f"num_schedulable_requests={sched}", "adp_dummy_skipped", rank=rank,
                  severity="I", num_fetch_requests=fetch, num_schedulable_requests=sched)


def kv_timeout(req: int, *, rank: int = 0) -> Piece:
    return logged(f"Terminating request {req} due to KV cache transfer timeout",
                  "kv_transfer_timeout", rank=rank, severity="W", request_id=req)


def kv_error(r: int, count: int, *, rank: int = 0) -> Piece:
    return logged(f"Disagg KV cache transfer error: rank={r}, local_err_count={count}",
                  "kv_transfer_error", rank=rank, severity="E", error_count=count)


def event_loop_error(msg: str = "boom", *, rank: int = 0) -> Piece:
    return logged(f"Error in event loop: {msg}", "event_loop_error", rank=rank, severity="E",
                  message=msg)


def version_banner(v: str = "1.3.0rc1") -> Piece:
    return Piece([f"[TensorRT-LLM] TensorRT-LLM version: {v}"], "version", {"version": v})


def generic(style: str, severity: str = "W", *, rank: int = 0,
            text: str = "Something worth a look happened") -> Piece:
    kind = "cpp_log" if style == "cpp" else "log"
    pre, pexp = logger_prefix(style, rank=rank, severity=severity)
    return Piece([pre + text], kind, {**pexp, "message": text})


def unparsed(text: str = "some stray output nobody formats") -> Piece:
    return Piece([text], "unparsed", {"text": text})


def traceback(form: str = "full", *, exc: str = "RuntimeError", msg: str = "bad state",
              depth: int = 2) -> Piece:
    """A Python traceback of ``form``: full, thread, group, headerless, abridged_16161,
    abridged_17278, adp_full."""
    frames = []
    for d in range(depth):
        frames += [f'  File "/usr/lib/python3.12/pkg/mod{d}.py", line {10 + d}, in func{d}',
                   f"    call_{d}()"]
    inner = {"innermost_file": f"/usr/lib/python3.12/pkg/mod{depth - 1}.py",
             "innermost_line": 10 + depth - 1, "innermost_function": f"func{depth - 1}"}
    if form == "full":
        return Piece(["Traceback (most recent call last):", *frames, f"{exc}: {msg}"],
                     "traceback", {"exception_type": exc, "message": msg, **inner})
    if form == "thread":
        return Piece(["Exception in thread Thread-5 (_event_loop_wrapper):",
                      "Traceback (most recent call last):", *frames, f"{exc}: {msg}"],
                     "traceback", {"exception_type": exc, "message": msg, **inner})
    if form == "headerless":
        return Piece([*frames, f"{exc}: {msg}"], "traceback",
                     {"exception_type": exc, "message": msg, **inner})
    if form == "group":
        lines = ["  + Exception Group Traceback (most recent call last):"]
        lines += ["  | " + f[2:] for f in frames]
        lines += ["  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
                  "  +-+---------------- 1 ----------------",
                  "    | Traceback (most recent call last):",
                  f"    | {exc}: {msg}",
                  "    +------------------------------------"]
        return Piece(lines, "traceback", {"exception_type": "ExceptionGroup"})
    if form == "abridged_16161":   # PR #16161 description
        return Piece(["AssertionError",
                      ('  File "tensorrt_llm/_torch/pyexecutor/py_executor.py", in '
                      "_pad_attention_dp_dummy_request"),
                      "    assert self.expected_num_active_requests >= len(self.active_requests)"],
                     "adp_assert", {"exception_type": "AssertionError",
                                    "innermost_function": "_pad_attention_dp_dummy_request"})
    if form == "abridged_17278":   # PR #17278 description
        return Piece(["py_executor.py  _pad_attention_dp_dummy_request",
                      "    assert self.expected_num_active_requests >= len(self.active_requests)"],
                     "adp_assert", {"exception_type": "AssertionError",
                                    "innermost_function": "_pad_attention_dp_dummy_request"})
    if form == "adp_full":
        return Piece(["Traceback (most recent call last):", *frames,
                      ('  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/'
                      'pyexecutor/py_executor.py", line 2101, in _pad_attention_dp_dummy_request'),
                      "    assert self.expected_num_active_requests >= len(self.active_requests)",
                      "AssertionError"],
                     "adp_assert", {"exception_type": "AssertionError", "innermost_line": 2101,
                                    "innermost_function": "_pad_attention_dp_dummy_request"})
    raise ValueError(form)


TRACEBACK_FORMS = ("full", "thread", "headerless", "group", "abridged_16161", "abridged_17278",
                   "adp_full")


def mpi_abort(rank: int = 3) -> Piece:
    return Piece(["-" * 74,
                  f"MPI_ABORT was invoked on rank {rank} in communicator MPI_COMM_WORLD",
                  "with errorcode 1.", "",
                  "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
                  "You may or may not see output from other processes, depending on",
                  "exactly when Open MPI kills them.", "-" * 74], "mpi_abort", {})


def cpp_backtrace(n: int = 4) -> Piece:
    return Piece([f"{i + 1}       0x7f492ab8{i:04x} tensorrt_llm::common::fn{i}() + {i * 8}"
                  for i in range(n)], "cpp_backtrace", {})


def collector_timestamp() -> Piece:
    return Piece(["2026-11-30T12:00:01.000001Z"], "collector_timestamp",
                 {"log_time": None, "log_time_text": "2026-11-30T12:00:01.000001Z"})


# ----------------------------------------------------------------- whole logs

def every_piece(rank: int = 0) -> list[Piece]:
    """One piece of every variant (all versions x logger styles, every event, every form)."""
    out = []
    for v in VERSIONS:
        for style in LOGGER_STYLES:
            if style in ("cpp", "glog", "pylogging"):
                continue   # iteration lines come from the TRT-LLM Python logger (or bare)
            out.append(iteration(v, style, it=len(out) + 1, rank=rank))
    out += [surplus(5, 4, rank=rank), dummy_alloc_failed(rank=rank), dummy_skipped(2, 0, rank=rank),
            kv_timeout(1234, rank=rank), kv_error(rank, 3, rank=rank), event_loop_error(rank=rank),
            version_banner()]
    for style in LOGGER_STYLES:
        if style != "none":
            out.append(generic(style, rank=rank))
    out += [traceback(f) for f in TRACEBACK_FORMS]
    out += [mpi_abort(), cpp_backtrace(), unparsed(), collector_timestamp()]
    return out


MULTI_LINE_KINDS = ("traceback", "adp_assert", "mpi_abort", "cpp_backtrace")


def random_streams(rng: random.Random, n_pieces: int = 60, *, launcher: str | None = None,
                   ranks: int = 1, quote: bool = False, collector_tab: bool = False
                   ) -> list[list[Piece]]:
    """Per rank, a random mix of pieces of every variant, wrapped as asked.

    A multi-line piece is always followed by an iteration line: two tracebacks or two C++
    backtraces back to back are one run of lines and no parser can tell where one ends.
    """
    streams = []
    for r in range(ranks):
        pool = every_piece(rank=r)
        pieces: list[Piece] = []
        for _ in range(n_pieces):
            p = rng.choice(pool)
            pieces.append(p)
            if p.kind in MULTI_LINE_KINDS:
                pieces.append(iteration(rng.choice(VERSIONS), it=len(pieces), rank=r))
        streams.append([wrap(p, launcher=launcher, rank=r, quote=quote,
                             collector_tab=collector_tab) for p in pieces])
    return streams


def render(pieces: list[Piece]) -> tuple[str, list[tuple[Piece, list[int]]]]:
    """Text of the pieces in order and, per piece, its 1-based line numbers."""
    out, where, n = [], [], 0
    for p in pieces:
        where.append((p, list(range(n + 1, n + 1 + len(p.lines)))))
        out += p.lines
        n += len(p.lines)
    return "\n".join(out) + "\n", where


def render_interleaved(rng: random.Random, streams: list[list[Piece]]
                       ) -> tuple[str, list[tuple[Piece, list[int]]]]:
    """Interleave whole streams line by line at random; per piece its line numbers."""
    queues = [[(p, ln) for p in s for ln in p.lines] for s in streams]
    pos = [0] * len(queues)
    out: list[str] = []
    lines_of: dict[int, list[int]] = {}
    while any(pos[i] < len(q) for i, q in enumerate(queues)):
        i = rng.choice([i for i, q in enumerate(queues) if pos[i] < len(q)])
        p, ln = queues[i][pos[i]]
        pos[i] += 1
        out.append(ln)
        lines_of.setdefault(id(p), []).append(len(out))
    where = [(p, lines_of[id(p)]) for s in streams for p in s]
    return "\n".join(out) + "\n", where
