"""Python tracebacks in a log, as one event spanning their lines.

Forms seen in TensorRT-LLM post-mortems, all handled:

* the full form, ``Traceback (most recent call last):`` ... ``ExcType: message``, optionally
  headed by ``Exception in thread ... (_event_loop_wrapper):`` (the executor's event loop);
* exception groups (uvicorn / the disaggregated router, trtllm issue 5820): every line indented
  and carrying ``  |`` / ``  +`` continuation prefixes;
* a headerless fragment starting at an indented ``  File "..."`` line (pasted excerpts);
* author-abridged forms with no header: the exception name first, then frames (PR #16161),
  or ``py_executor.py  _pad_attention_dp_dummy_request`` then the assert source (PR #17278).

Also: an excepthook header (``Exception in thread Thread-3 (_event_loop_wrapper):``) and a
logger-prefixed first line (``[RANK 0] [E] Traceback (most recent call last):``) join the
traceback; collector timestamp lines inside it are absorbed; chained exceptions ("During
handling of the above exception, another exception occurred:", "The above exception was the
direct cause of the following exception:") make one event whose ``exception_chain`` lists every
exception; an indented traceback (a pasted code block) reads like an unindented one.

Every frame is kept (table ``traceback_frames``): its file, line, function and source text;
the innermost frame of the event is in ``innermost_*`` and the innermost frame inside
``tensorrt_llm`` (the executor frame: ``_forward_step``, ``_executor_loop_overlap``,
``_event_loop_wrapper``) in ``executor_*``.

A traceback is fed line by line by the block scanner (only the lines of one launcher stream),
so interleaved ranks do not mix. It ends just before the first line of its stream that cannot
continue it; after an exception line only a chain message (with blank and collector lines
around it) continues it, so two tracebacks back to back stay two events. Blank lines read
after the exception line that no chain followed are handed back (:meth:`Traceback.released`).
"""
from __future__ import annotations

import re
from typing import Any

from forensics.readers import event_kinds, failure_messages
from forensics.readers.int_fields import as_int

_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Group))"
                  r"(?::\s?(?P<msg>.*))?$")
_FRAME = re.compile(r'^[\s|+]*File "(?P<file>[^"]+)"(?:, line (?P<line>\d+))?'
                    r"(?:, in (?P<func>.+))?$")
_PY_FRAME_ABRIDGED = re.compile(r"^(?P<file>[\w/.-]+\.py)\s+(?P<func>\w+)\s*$")
_GROUP_CONTENT = re.compile(r"^\s*[|+](?:[\s|+-]*)")
_HEADER = re.compile(r"^\s*(?:Traceback \(most recent call last\):|Exception in thread .*:|"
                     r"\+ Exception Group Traceback \(most recent call last\):)\s*$")
_TB_LINE = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_GROUP_HEADER = re.compile(r"^\s*\+ Exception Group Traceback")
_CHAIN = re.compile(r"^\s*(?:During handling of the above exception, another exception occurred"
                    r"|The above exception was the direct cause of the following exception):\s*$")
_CARETS = re.compile(r"^[\s|]*[\^~]+[\s^~]*$")
EXECUTOR_PATH = "tensorrt_llm/"
#: Numbers a typed failure message lends to the traceback that ends in it.
_TYPED_NUMBERS = ("seq_num", "op_type", "numel_in", "numel_out", "timeout_ms", "elapsed_ms",
                  "gpu", "requested_bytes", "total_bytes", "free_bytes", "clients_joined",
                  "clients_expected")
ADP_ASSERT_SOURCE = "expected_num_active_requests >= len(self.active_requests)"
ADP_FUNCTION = "_pad_attention_dp_dummy_request"


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


def _indent(body: str) -> int:
    return len(body) - len(body.lstrip(" \t"))


# The per-line tests below look for a character the pattern needs before running it: a
# traceback's lines are read one by one in Python, and most are frames and their source.
def _group_content(body: str) -> bool:
    """Whether ``body`` carries an exception group's ``  |`` / ``  +`` prefix."""
    return ("|" in body or "+" in body) and _GROUP_CONTENT.match(body) is not None


def _carets(body: str) -> bool:
    """Whether ``body`` is a line of ``^`` / ``~`` markers under a frame's source."""
    return ("^" in body or "~" in body) and _CARETS.match(body) is not None


class Traceback:
    """An open traceback of one stream: its lines so far and what they say.

    Fields: ``lines`` (1-based line numbers) and ``bodies`` (their text after the prefixes),
    ``opened_by`` (see :func:`opens`), ``rank``, ``sections`` (one per exception of a chain:
    ``{"exc": (type, message) or None, "frames": [[file, line, function, source, at_line]]}``),
    ``done`` (never set: a traceback ends when a line cannot continue it).
    """

    absorbs_collector = True

    def __init__(self, line: int, body: str, how: str, rank: int | None, raw: str):
        self.lines: list[int] = []
        self.bodies: list[str] = []
        self.opened_by = how
        self.rank = rank
        self.raw_first = raw
        self.base = 0 if how != "header" or _GROUP_HEADER.match(body) else _indent(body)
        self.sections: list[dict[str, Any]] = [{"exc": None, "frames": []}]
        self.group_exc: tuple[str, str | None] | None = None
        self.saw_assert = False
        self.done = False
        # "thread": after an excepthook header; "body": frames; "after": after an exception
        # line (only a chain continues); "chain": after a chain message (a header next)
        self.phase = "thread" if how == "header" and not _TB_LINE.match(body) \
            and not _GROUP_HEADER.match(body) else "body"
        self.tentative: list[tuple[int, str, str, bool]] = []   # (line, body, raw, collector)
        self._released: list[tuple[int, str, str, bool]] = []
        self._add(line, body)
        if how == "exception":
            m = _EXC.match(body)
            self.sections[0]["exc"] = (m["type"], m["msg"])

    # ------------------------------------------------------------------ reading lines
    def _frame_line(self, line: int, body: str) -> bool:
        if 'File "' not in body:
            return False
        m = _FRAME.match(body)
        if m is None:
            return False
        self.sections[-1]["frames"].append(
            [m["file"], as_int(m["line"]), m["func"], None, line])
        return True

    def _add(self, line: int, body: str, indent: int | None = None) -> None:
        self.lines.append(line)
        self.bodies.append(body)
        if ADP_ASSERT_SOURCE in body:
            self.saw_assert = True
        first = len(self.lines) == 1
        group = _group_content(body)
        if (first or (_indent(body) if indent is None else indent) > self.base or group) \
                and self._frame_line(line, body):
            return
        if first:
            m = _PY_FRAME_ABRIDGED.match(body)
            if m:
                self.sections[-1]["frames"].append([m["file"], None, m["func"], None, line])
            return
        if group and self.group_exc is None:
            inner = _GROUP_CONTENT.sub("", body)
            m = _EXC.match(inner)
            if m:
                self.group_exc = (m["type"], m["msg"])
                return
        frames = self.sections[-1]["frames"]
        if frames and frames[-1][3] is None and not _carets(body) and body.strip():
            code = _GROUP_CONTENT.sub("", body) if group else body
            frames[-1][3] = code.strip()   # the source line printed under its frame

    def accepts(self, body: str, has_logger: bool = False, collector: bool = False) -> bool:
        """Whether the stream's next line continues this traceback."""
        if has_logger and not collector:
            return False
        if collector:
            return True     # a collector's timestamp line inside the traceback
        if self.phase == "thread":
            return _TB_LINE.match(body) is not None or not body.strip()
        if self.phase == "after":
            return not body.strip() or _CHAIN.match(body) is not None
        if self.phase == "chain":
            return not body.strip() or _TB_LINE.match(body) is not None
        if _indent(body) > self.base and body.strip():
            return True
        if self.opened_by in ("exception", "abridged"):
            return False
        return _EXC.match(body.lstrip(" \t")) is not None

    def feed(self, line: int, body: str, raw: str, has_logger: bool = False,
             collector: bool = False) -> bool:
        """:meth:`accepts` the stream's next line and, if so, :meth:`add` it. The scanner's call
        per line: a frame or source line of the body (most of a traceback) takes one step."""
        if self.phase == "body" and not has_logger and not collector:
            indent = _indent(body)
            if indent > self.base and body.strip():   # what accepts and add then do
                if self.tentative:
                    self._commit()
                self._add(line, body, indent)
                return True
        if not self.accepts(body, has_logger, collector):
            return False
        self.add(line, body, raw, collector)
        return True

    def add(self, line: int, body: str, raw: str | None = None, collector: bool = False) -> None:
        """Append an accepted line."""
        if collector or not body.strip():
            if self.phase in ("after", "thread", "chain") or collector:
                self.tentative.append((line, body, raw if raw is not None else body, collector))
                return
        if self.phase == "thread":          # the Traceback line after an excepthook header
            self._commit()
            self.phase = "body"
            self._add(line, body)
            return
        if self.phase == "after":           # a chain message
            self._commit()
            self.phase = "chain"
            self.lines.append(line)
            self.bodies.append(body)
            return
        if self.phase == "chain":           # the next traceback of the chain
            self._commit()
            self.sections.append({"exc": None, "frames": []})
            self.phase = "body"
            self.lines.append(line)
            self.bodies.append(body)
            return
        self._commit()
        indent = _indent(body)
        if indent <= self.base and not _group_content(body):
            m = _EXC.match(body.lstrip(" \t"))
            if m:
                self.sections[-1]["exc"] = (m["type"], m["msg"])
                self.lines.append(line)
                self.bodies.append(body)
                self.phase = "after"
                return
        self._add(line, body, indent)

    def _commit(self) -> None:
        """Tentative lines (blank or collector lines) belong to the traceback after all."""
        for line, body, _raw, _c in self.tentative:
            self.lines.append(line)
            self.bodies.append(body)
        self.tentative = []

    def released(self) -> list[tuple[int, str, str, bool]]:
        """Lines read but not kept when the traceback ended: (line, body, raw, is collector).
        Trailing blank lines go back to the caller; collector lines stay only inside."""
        out, self.tentative = self.tentative, []
        return out

    # ------------------------------------------------------------------ results
    @property
    def is_fragment(self) -> bool:
        """Opened by an abridged first line that nothing followed: not a traceback after all."""
        return self.opened_by in ("exception", "abridged") and len(self.lines) == 1

    def _all_frames(self) -> list[tuple[int, list[Any]]]:
        return [(k, f) for k, sec in enumerate(self.sections) for f in sec["frames"]]

    def frame_rows(self) -> list[dict[str, Any]]:
        """Rows of ``traceback_frames`` (without ``source``), outermost first per section."""
        rows = []
        depth: dict[int, int] = {}
        for k, f in self._all_frames():
            d = depth[k] = depth.get(k, -1) + 1
            rows.append({"line": self.lines[0], "chain": k, "depth": d, "file": f[0],
                         "file_line": f[1], "function": f[2], "code": f[3], "at_line": f[4]})
        return rows

    def events(self) -> list[dict[str, Any]]:
        """The event rows: one per contiguous run of its lines (several only if interleaved)."""
        excs = [sec["exc"] for sec in self.sections if sec["exc"] is not None]
        exc_type, msg = excs[-1] if excs else (None, None)
        if exc_type is None and self.group_exc is not None:
            exc_type, msg = self.group_exc
        frames = [f for _k, f in self._all_frames()]
        last = self.sections[-1]["frames"] or frames
        inner = last[-1] if last else None
        executor = None
        for sec in reversed(self.sections):
            for f in reversed(sec["frames"]):
                if EXECUTOR_PATH in f[0].replace("\\", "/"):
                    executor = f
                    break
            if executor is not None:
                break
        func = inner[2] if inner else None
        kind = event_kinds.TRACEBACK
        if self.saw_assert or (func == ADP_FUNCTION and exc_type in (None, "AssertionError")):
            kind = event_kinds.ADP_ASSERT
            if exc_type is None:
                exc_type = "AssertionError"  # implied by the assert source line (PR #17278 form)
        chain = [f"{t}: {m}" if m else t for t, m in excs]
        typed = failure_messages.match(f"{exc_type}: {msg}") if exc_type and msg else None
        numbers: dict[str, Any] = {}
        if typed is not None and kind == event_kinds.TRACEBACK:
            kind = typed["kind"]     # a traceback ending in CUDA OOM, NCCL or store timeout
            numbers = {k: v for k, v in typed.items() if k in _TYPED_NUMBERS}
        base = {
            "rank": self.rank, "severity": "E", "message": msg, "exception_type": exc_type,
            "innermost_file": inner[0] if inner else None,
            "innermost_line": inner[1] if inner else None,
            "innermost_function": func,
            "executor_file": executor[0] if executor else None,
            "executor_line": executor[1] if executor else None,
            "executor_function": executor[2] if executor else None,
            "exception_chain": "\n".join(chain) if len(chain) > 1 else None,
            **numbers,
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
    if lines[-1] - lines[0] == len(lines) - 1:   # one run (lines only increase): one row
        return [{**base, "line": lines[0], "line_end": lines[-1], "text": "\n".join(bodies),
                 "kind": kind}]
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
