"""Python tracebacks in a log, as one event spanning their lines.

Forms seen in TensorRT-LLM post-mortems, all handled:

* the full form, ``Traceback (most recent call last):`` ... ``ExcType: message``, optionally
  headed by ``Exception in thread ... (_event_loop_wrapper):`` (the executor's event loop);
* exception groups (uvicorn / the disaggregated router, trtllm issue 5820): every line indented
  and carrying ``  |`` / ``  +`` continuation prefixes;
* a headerless fragment starting at an indented ``  File "..."`` line (pasted excerpts);
* author-abridged forms with no header: the exception name first, then frames (PR #16161),
  or ``py_executor.py  _pad_attention_dp_dummy_request`` then the assert source (PR #17278).

A traceback is fed line by line by the block scanner (only the lines of one launcher stream),
so interleaved ranks do not mix. It ends at its exception line, or just before the first line
of its stream that cannot continue it.
"""
from __future__ import annotations

import re
from typing import Any

from forensics.ingest import event_kinds
from forensics.ingest.int_fields import as_int

_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Group))"
                  r"(?::\s?(?P<msg>.*))?$")
_FRAME = re.compile(r'^[\s|+]*File "(?P<file>[^"]+)"(?:, line (?P<line>\d+))?'
                    r"(?:, in (?P<func>.+))?$")
_PY_FRAME_ABRIDGED = re.compile(r"^(?P<file>[\w/.-]+\.py)\s+(?P<func>\w+)\s*$")
_GROUP_CONTENT = re.compile(r"^\s*[|+](?:[\s|+-]*)")
_HEADER = re.compile(r"^(?:Traceback \(most recent call last\):|Exception in thread .*:|"
                     r"\s*\+ Exception Group Traceback \(most recent call last\):)\s*$")
_THREAD_HEADER = re.compile(r"^Exception in thread .*:\s*$")
_ADP_ASSERT_SOURCE = "expected_num_active_requests >= len(self.active_requests)"
_ADP_FUNCTION = "_pad_attention_dp_dummy_request"


def opens(body: str) -> str | None:
    """How a line starts a traceback: "header", "frame", "exception", "abridged" or None."""
    if _HEADER.match(body):
        return "header"
    if body[:1].isspace() and _FRAME.match(body):
        return "frame"
    if _EXC.match(body):
        return "exception"
    if _PY_FRAME_ABRIDGED.match(body):
        return "abridged"
    return None


class Traceback:
    """An open traceback of one stream: its lines so far and what they say.

    Fields: ``lines`` (1-based line numbers), ``opened_by`` (see :func:`opens`), ``rank``,
    ``exception_type``/``message`` (from its exception line), ``frame`` (innermost
    (file, line, function)), ``done`` (its exception line was read).
    """

    def __init__(self, line: int, body: str, how: str, rank: int | None, raw: str):
        self.lines: list[int] = []
        self.bodies: list[str] = []
        self.opened_by = how
        self.rank = rank
        self.raw_first = raw
        self.exception_type: str | None = None
        self.message: str | None = None
        self.group_exc: tuple[str, str | None] | None = None
        self.frame: tuple[str, int | None, str | None] | None = None
        self.saw_assert = False
        self.done = False
        self._add(line, body)

    def _add(self, line: int, body: str) -> None:
        self.lines.append(line)
        self.bodies.append(body)
        if _ADP_ASSERT_SOURCE in body:
            self.saw_assert = True
        m = _FRAME.match(body) if body[:1].isspace() or not self.lines[:-1] else None
        if m:
            self.frame = (m["file"], as_int(m["line"]), m["func"])
            return
        if len(self.lines) == 1:
            m = _PY_FRAME_ABRIDGED.match(body)
            if m:
                self.frame = (m["file"], None, m["func"])
                return
            m = _EXC.match(body)
            if m and self.opened_by == "exception":
                self.exception_type, self.message = m["type"], m["msg"]
                return
        if _GROUP_CONTENT.match(body) and self.group_exc is None:
            inner = _GROUP_CONTENT.sub("", body)
            m = _EXC.match(inner)
            if m:
                self.group_exc = (m["type"], m["msg"])

    def accepts(self, body: str, has_logger: bool = False) -> bool:
        """Whether the stream's next line continues this traceback."""
        if self.done or has_logger:
            return False
        if body[:1].isspace():
            return True
        if self.opened_by in ("exception", "abridged"):
            return False
        if (body.startswith("Traceback (most recent call last):") and len(self.lines) == 1
                and self.opened_by == "header"):
            return True
        return self.exception_type is None and _EXC.match(body) is not None

    def add(self, line: int, body: str) -> None:
        """Append an accepted line; a non-indented exception line ends the traceback."""
        if not body[:1].isspace():
            m = _EXC.match(body)
            if m:
                self.exception_type, self.message = m["type"], m["msg"]
                self.lines.append(line)
                self.bodies.append(body)
                self.done = True
                return
        self._add(line, body)

    @property
    def is_fragment(self) -> bool:
        """Opened by an abridged first line that nothing followed: not a traceback after all."""
        return self.opened_by in ("exception", "abridged") and len(self.lines) == 1

    def events(self) -> list[dict[str, Any]]:
        """The event rows: one per contiguous run of its lines (several only if interleaved)."""
        exc_type, msg = self.exception_type, self.message
        if exc_type is None and self.group_exc is not None:
            exc_type, msg = self.group_exc
        func = self.frame[2] if self.frame else None
        kind = event_kinds.TRACEBACK
        if self.saw_assert or (func == _ADP_FUNCTION and exc_type in (None, "AssertionError")):
            kind = event_kinds.ADP_ASSERT
            if exc_type is None:
                exc_type = "AssertionError"  # implied by the assert source line (PR #17278 form)
        base = {
            "rank": self.rank, "severity": "E", "message": msg, "exception_type": exc_type,
            "innermost_file": self.frame[0] if self.frame else None,
            "innermost_line": self.frame[1] if self.frame else None,
            "innermost_function": func,
        }
        return pieces(base, self.lines, kind, self.bodies)


def pieces(base: dict[str, Any], lines: list[int], kind: str, bodies: list[str]
           ) -> list[dict[str, Any]]:
    """One event row per contiguous run of ``lines``; later runs are of kind ``continued``.
    Each row's ``text`` is its lines' ``bodies`` (as printed after the prefixes) joined by
    newlines.

    Lines of one launcher stream can be interleaved with other ranks' lines; splitting keeps
    every line inside at most one event range.
    """
    rows: list[dict[str, Any]] = []
    start = prev = lines[0]
    first = 0
    for i, ln in enumerate(lines[1:] + [None], 1):
        if ln is not None and ln == prev + 1:
            prev = ln
            continue
        rows.append({**base, "line": start, "line_end": prev, "text": "\n".join(bodies[first:i]),
                     "kind": kind if not rows else event_kinds.CONTINUED})
        if ln is not None:
            start = prev = ln
            first = i
    return rows
