"""The known ADP / KV-transfer messages of an executor log as typed events.

Messages (docs/adp-executor.md section 8) and the numbers each carries are listed in
:mod:`forensics.readers.event_kinds`. :data:`CANDIDATE_PATTERN` is the vectorised pre-filter:
only lines whose body matches it reach the Python-level matchers here and in
:mod:`forensics.readers.traceback_event`, so the hot path (iteration lines) never loops in Python.
"""
from __future__ import annotations

import re
from typing import Any

from forensics.readers import event_kinds, failure_messages
from forensics.readers.int_fields import fits
from forensics.readers.traceback_event import opens, pieces

#: Lines worth a Python look: indented lines, traceback/exception shapes, banner dashes, C++
#: frames and every known message. Matched against the prefix-stripped body.
CANDIDATE_PATTERN = (
    r"^\s|^Traceback \(most recent|^Exception in thread |"
    r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Group)(?::|$)|"
    r"^[\w/.-]+\.py\s+\w+\s*$|^-{20,}\s*$|MPI_ABORT was invoked|"
    r"exceeds expected_num_active_requests|pad dummy|Skipped adding dummy requests|"
    r"dummy KV allocation|afford even a padding dummy|"
    r"KV cache transfer timeout|Disagg KV cache transfer error|Error in event loop|"
    r"TensorRT-LLM version: |^\d+\s+0x[0-9a-fA-F]+\s|" + failure_messages.CANDIDATE
)

_SINGLE: list[tuple[str, re.Pattern[str], str | None]] = [
    (event_kinds.ADP_SURPLUS_TOLERATED,
     re.compile(r"active_requests \((?P<num_active>\d+)\) exceeds expected_num_active_requests "
                r"\((?P<num_expected>\d+)\)"), "W"),
    (event_kinds.ADP_DUMMY_ALLOC_FAILED,
     re.compile(r"Cannot allocate .*pad dummy"), "W"),
    (event_kinds.ADP_DUMMY_NO_KV_CAPACITY,
     re.compile(r"Unable to fit the complete attention-DP dummy KV allocation|"
                r"cannot afford even a padding dummy"), "W"),
    (event_kinds.ADP_DUMMY_SKIPPED,
     re.compile(r"Skipped adding dummy requests: num_fetch_requests=(?P<num_fetch_requests>\d+),"
                r"\s*num_schedulable_requests=(?P<num_schedulable_requests>\d+)"), None),
    (event_kinds.KV_TRANSFER_TIMEOUT,
     re.compile(r"due to KV cache transfer timeout"), "W"),
    (event_kinds.KV_TRANSFER_ERROR,
     re.compile(r"Disagg KV cache transfer error: rank=(?P<msg_rank>\d+),?\s*"
                r"local_err_count=(?P<error_count>\d+)"), "E"),
    (event_kinds.EVENT_LOOP_ERROR, re.compile(r"Error in event loop: (?P<text>.*)$"), "E"),
    (event_kinds.VERSION,
     re.compile(r"^\[TensorRT-LLM\] TensorRT-LLM version: (?P<version>\S+)\s*$"), "I"),
]
#: Whether any of ``_SINGLE`` matches (most candidates match none: one search, not eight).
_ANY_SINGLE = re.compile("|".join(f"(?:{p.pattern})" for _, p, _ in _SINGLE))
_REQUEST_ID = re.compile(r"\b(?:request(?:[ _]id)?|req(?:uest)?Id|id)[\s=:#]*(?P<id>\d+)",
                         re.IGNORECASE)
_ITER = re.compile(r"\biter(?:ation)?[\s=:#]*(?P<iter>\d+)")
_INT_FIELDS = ("num_active", "num_expected", "num_fetch_requests", "num_schedulable_requests",
               "error_count")

MPI_DASHES = re.compile(r"^-{20,}\s*$")
MPI_ABORT_LINE = re.compile(r"^MPI_ABORT was invoked on rank (?P<rank>\d+)")
CPP_FRAME = re.compile(r"^\d+\s+0x[0-9a-fA-F]+\s")
_MPI_MAX_LINES = 20


def match_single(body: str) -> dict[str, Any] | None:
    """A known single-line message as a partial event row (kind, message, numbers), else None."""
    for kind, pattern, default_sev in _SINGLE if _ANY_SINGLE.search(body) else ():
        m = pattern.search(body)
        if not m:
            continue
        g = m.groupdict()
        row: dict[str, Any] = {"kind": kind, "message": body, "text": body,
                               "default_severity": default_sev}
        for f in _INT_FIELDS:
            if g.get(f) is not None and fits(g[f]):
                row[f] = int(g[f])
        if kind == event_kinds.EVENT_LOOP_ERROR:
            row["message"] = g["text"]
        if kind == event_kinds.VERSION:
            row["version"] = g["version"]
        if g.get("msg_rank") is not None and fits(g["msg_rank"], 32):
            row["msg_rank"] = int(g["msg_rank"])
        if kind in (event_kinds.KV_TRANSFER_TIMEOUT, event_kinds.ADP_DUMMY_ALLOC_FAILED):
            r = _REQUEST_ID.search(body)
            if r and fits(r["id"]):
                row["request_id"] = int(r["id"])
        it = _ITER.search(body)
        if it and fits(it["iter"]):
            row["iter"] = int(it["iter"])
        return row
    typed = failure_messages.match(body)
    if typed is not None:
        typed["text"] = body
    return typed


class MpiAbortBanner:
    """Open MPI's multi-line MPI_ABORT banner (trtllm issue 3736): dashes, text, dashes."""

    def __init__(self, line: int, body: str, rank: int | None, raw: str):
        self.lines = [line]
        self.bodies = [body]
        self.raw_first = raw
        self.rank = rank
        self.abort_rank: int | None = None
        self.saw_abort = False
        self.message = body
        self.opened_by = "dashes" if MPI_DASHES.match(body) else "abort"
        self._note(body)
        self.done = False

    def _note(self, body: str) -> None:
        m = MPI_ABORT_LINE.match(body)
        if m:
            self.saw_abort = True
            self.abort_rank = int(m["rank"]) if fits(m["rank"], 32) else None
            self.message = body

    def accepts(self, body: str, has_logger: bool) -> bool:
        """Banner text runs to the closing dashes; a logger line or a 20th line ends it early."""
        if self.done or has_logger or len(self.lines) >= _MPI_MAX_LINES:
            return False
        if len(self.lines) == 1 and self.opened_by == "dashes":
            return MPI_ABORT_LINE.match(body) is not None
        return True

    def add(self, line: int, body: str) -> None:
        self.lines.append(line)
        self.bodies.append(body)
        self._note(body)
        if MPI_DASHES.match(body) and len(self.lines) > 1:
            self.done = True

    @property
    def is_fragment(self) -> bool:
        """A dashes line not followed by the abort text is not a banner."""
        return not self.saw_abort

    def events(self) -> list[dict[str, Any]]:
        rank = self.rank if self.rank is not None else self.abort_rank
        return pieces({"rank": rank, "severity": "F", "message": self.message},
                      self.lines, event_kinds.MPI_ABORT, self.bodies)


class Wrapped:
    """A logger line and the lines it wrapped onto: a message holding newlines (a C++
    ``TLLM_THROW`` text, a wrapped warning) prints its later lines with no prefix. A following
    line of the same stream continues it when it is indented, not blank, carries no prefix
    and starts nothing else (a traceback, a C++ frame)."""

    def __init__(self, row: dict[str, Any], body: str, raw: str):
        self.row = row
        self.lines = [row["line"]]
        self.bodies = [body]
        self.raw_first = raw
        self.done = False
        self.is_fragment = False

    def accepts(self, body: str, has_logger: bool = False) -> bool:
        return (not has_logger and body[:1].isspace() and not body.isspace()
                and opens(body) is None and CPP_FRAME.match(body) is None)

    def add(self, line: int, body: str) -> None:
        self.lines.append(line)
        self.bodies.append(body)

    def events(self) -> list[dict[str, Any]]:
        base = {k: v for k, v in self.row.items() if k not in ("line", "line_end", "text")}
        return pieces(base, self.lines, self.row["kind"], self.bodies)


class CppBacktrace:
    """Consecutive numbered C++ frames (``N  0xADDR symbol + off``) after a C++ error."""

    def __init__(self, line: int, body: str, rank: int | None, raw: str):
        self.lines = [line]
        self.bodies = [body]
        self.raw_first = raw
        self.rank = rank
        self.first = body
        self.last = body
        self.done = False
        self.is_fragment = False

    def accepts(self, body: str, has_logger: bool = False) -> bool:
        return CPP_FRAME.match(body) is not None

    def add(self, line: int, body: str) -> None:
        self.lines.append(line)
        self.bodies.append(body)
        self.last = body

    def events(self) -> list[dict[str, Any]]:
        return pieces({"rank": self.rank, "severity": "E", "message": self.first},
                      self.lines, event_kinds.CPP_BACKTRACE, self.bodies)
