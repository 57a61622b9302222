"""Reader of request-state traces, format v1 (``traces/FORMAT.md``).

A trace file is JSON Lines: one run record first, then frame records (a rank's
``active_requests`` at entry to the pad step) and optional note records. The reader streams the
file (plain, gzip or zstd) and returns the ``runs``, ``frames``, ``requests``, ``events`` and
``unparsed`` tables in the exact schemas of ``forensics.dataset.schema``.

Example:
    >>> t = read_trace("run.jsonl", "run.jsonl")          # doctest: +SKIP
    >>> t.frames.num_rows, t.requests.num_rows             # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from forensics.dataset.schema import EVENTS, FRAMES, REQUESTS, RUNS, UNPARSED
from forensics.errors import TraceFormatError
from forensics.ingest.sources import open_binary
from replay.states import UnknownStateError, parse_state

#: The ``format`` value of a v1 run record.
FORMAT_NAME = "adp-trace"
#: The only version this reader accepts.
FORMAT_VERSION = 1
#: ``events.kind`` of a ``{"kind": "note"}`` record.
NOTE_EVENT_KIND = "trace_note"

_RUN_INTS = ("tp_size", "pp_size", "max_batch_size", "max_num_active_requests")
_RUN_BOOLS = ("disaggregated", "overlap_scheduler")
_HEAD_RE = re.compile(r'"kind"\s*:\s*"run"')
_FORMAT_RE = re.compile(r'"format"\s*:\s*"adp-trace"')


@dataclasses.dataclass(frozen=True)
class TraceTables:
    """The tables one trace file contributes to a dataset.

    Fields:
        runs: one row (the run record), schema ``RUNS``.
        frames: one row per frame record, schema ``FRAMES``.
        requests: one row per request of each frame, schema ``REQUESTS``.
        events: one ``trace_note`` row per note record, schema ``EVENTS``.
        unparsed: blank lines and records of unknown kind, verbatim, schema ``UNPARSED``.
    """

    runs: pa.Table
    frames: pa.Table
    requests: pa.Table
    events: pa.Table
    unparsed: pa.Table

    @property
    def run(self) -> str:
        """The run key (the run record's ``run_id``, else the source)."""
        return self.runs.column("run")[0].as_py()


def is_trace(head_text: str) -> bool:
    """True when the text starts (after blank lines) with a v1 trace run record."""
    for line in head_text.splitlines():
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except ValueError:
            # The head may cut a long first line; fall back to the two key markers.
            return s.startswith("{") and bool(_HEAD_RE.search(s)) and bool(_FORMAT_RE.search(s))
        return isinstance(obj, dict) and obj.get("kind") == "run" and obj.get("format") == FORMAT_NAME
    return False


def read_trace(path: str | os.PathLike, source: str | None = None) -> TraceTables:
    """Read one trace file (plain, .gz or .zst), streaming its lines.

    Args:
        path: the file.
        source: the name recorded in the ``source`` columns (default: the path as given).

    Raises:
        TraceFormatError: naming the file and line, for any break of the v1 format.
    """
    src = str(path) if source is None else source
    builder = _Builder(src, str(path))
    with open_binary(path) as f:
        for lineno, raw in enumerate(_lines(f), start=1):
            builder.add_line(raw, lineno)
    return builder.finish()


def tables_from_records(records: Iterable[dict], source: str) -> TraceTables:
    """Tables from in-memory records (record ``n`` is treated as line ``n``, 1-based)."""
    builder = _Builder(source, source)
    for lineno, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            raise TraceFormatError(f"record is not a JSON object: {rec!r:.80}", path=source, line=lineno)
        builder.add_record(rec, lineno, None)
    return builder.finish()


def _lines(f) -> Iterator[str]:
    pending = b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            break
        pending += chunk
        parts = pending.split(b"\n")
        pending = parts.pop()
        for p in parts:
            yield p.rstrip(b"\r").decode("utf-8", errors="replace")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", errors="replace")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Builder:
    """Accumulates columns while validating records in file order."""

    def __init__(self, source: str, path: str):
        self.source = source
        self.path = path
        self.run: str | None = None
        self.tp_size = 0
        self.runs: dict[str, list] = {n: [] for n in RUNS.names}
        self.frames: dict[str, list] = {n: [] for n in FRAMES.names}
        self.requests: dict[str, list] = {n: [] for n in REQUESTS.names}
        self.events: dict[str, list] = {n: [] for n in EVENTS.names}
        self.unparsed: dict[str, list] = {n: [] for n in UNPARSED.names}
        self.seen: set[tuple[int, int]] = set()
        self.first_record_seen = False

    def error(self, message: str, line: int) -> TraceFormatError:
        return TraceFormatError(message, path=self.path, line=line,
                                hint="see traces/FORMAT.md (request-state trace format v1)")

    def add_line(self, text: str, line: int) -> None:
        if not text.strip():
            self._unparsed(text, line)
            return
        try:
            rec = json.loads(text)
        except ValueError as e:
            raise self.error(f"not a JSON object ({e.msg})", line) from None
        if not isinstance(rec, dict):
            raise self.error(f"not a JSON object (a JSON {type(rec).__name__})", line)
        self.add_record(rec, line, text)

    def add_record(self, rec: dict, line: int, text: str | None) -> None:
        kind = rec.get("kind")
        if not self.first_record_seen:
            self.first_record_seen = True
            if kind != "run":
                raise self.error(f"missing run record: the first record has kind {kind!r}, "
                                 "expected 'run'", line)
            self._run(rec, line, text)
            return
        if kind == "frame":
            self._frame(rec, line)
        elif kind == "note":
            self._note(rec, line, text)
        elif kind == "run":
            raise self.error("a second run record (exactly one per file)", line)
        else:
            self._unparsed(text if text is not None else json.dumps(rec, sort_keys=True), line)

    def _unparsed(self, text: str, line: int) -> None:
        self.unparsed["source"].append(self.source)
        self.unparsed["line"].append(line)
        self.unparsed["text"].append(text)

    def _run(self, rec: dict, line: int, text: str | None) -> None:
        for key in ("format", "version", *_RUN_INTS, *_RUN_BOOLS, "build"):
            if key not in rec:
                raise self.error(f"run record: missing required field {key!r}", line)
        if rec["format"] != FORMAT_NAME:
            raise self.error(f"unsupported format {rec['format']!r} (this reader reads "
                             f"{FORMAT_NAME!r})", line)
        if rec["version"] != FORMAT_VERSION or isinstance(rec["version"], bool):
            raise self.error(f"unsupported version {rec['version']!r} (this reader reads "
                             f"version {FORMAT_VERSION})", line)
        for key in _RUN_INTS:
            if not _is_int(rec[key]) or rec[key] < 1:
                raise self.error(f"run record: {key} must be an int >= 1, got {rec[key]!r}", line)
        for key in _RUN_BOOLS:
            if not isinstance(rec[key], bool):
                raise self.error(f"run record: {key} must be true or false, got {rec[key]!r}", line)
        if not isinstance(rec["build"], str):
            raise self.error(f"run record: build must be a string, got {rec['build']!r}", line)
        enc = rec.get("encoder_decoder", False)
        if not isinstance(enc, bool):
            raise self.error(f"run record: encoder_decoder must be true or false, got {enc!r}", line)
        run_id = rec.get("run_id")
        if run_id is not None and not isinstance(run_id, str):
            run_id = str(run_id)
        self.run = run_id or self.source
        self.tp_size = rec["tp_size"]
        r = self.runs
        r["run"].append(self.run)
        r["source"].append(self.source)
        r["line"].append(line)
        for key in _RUN_INTS:
            r[key].append(rec[key])
        for key in _RUN_BOOLS:
            r[key].append(rec[key])
        r["encoder_decoder"].append(enc)
        r["build"].append(rec["build"])
        r["record_json"].append(text.strip() if text is not None else json.dumps(rec, sort_keys=True))

    def _frame(self, rec: dict, line: int) -> None:
        for key in ("iter", "rank", "requests"):
            if key not in rec:
                raise self.error(f"frame: missing required field {key!r}", line)
        it, rank, reqs = rec["iter"], rec["rank"], rec["requests"]
        if not _is_int(it) or it < 0:
            raise self.error(f"frame: iter must be an int >= 0, got {it!r}", line)
        if not _is_int(rank) or not 0 <= rank < self.tp_size:
            raise self.error(f"frame: rank {rank!r} out of range [0, {self.tp_size}) "
                             f"(tp_size {self.tp_size})", line)
        if not isinstance(reqs, list):
            raise self.error(f"frame: requests must be a list, got {type(reqs).__name__}", line)
        if (it, rank) in self.seen:
            raise self.error(f"duplicate frame (iter {it}, rank {rank}) in run {self.run!r}", line)
        self.seen.add((it, rank))
        q = self.requests
        n_dummy = 0
        for pos, req in enumerate(reqs):
            if not isinstance(req, dict):
                raise self.error(f"frame: request {pos} is not an object", line)
            if "id" not in req or "state" not in req:
                missing = "id" if "id" not in req else "state"
                raise self.error(f"frame: request {pos}: missing required field {missing!r}", line)
            if not _is_int(req["id"]):
                raise self.error(f"frame: request {pos}: id must be an int, got {req['id']!r}", line)
            try:
                state = parse_state(req["state"])
            except UnknownStateError as e:
                raise self.error(f"frame: request {pos}: {e}", line) from None
            dummy = req.get("dummy", False)
            if not isinstance(dummy, bool):
                raise self.error(f"frame: request {pos}: dummy must be true or false", line)
            n_dummy += dummy
            q["run"].append(self.run)
            q["iter"].append(it)
            q["rank"].append(rank)
            q["pos"].append(pos)
            q["request_id"].append(req["id"])
            q["state"].append(int(state))
            q["dummy"].append(dummy)
        f = self.frames
        f["run"].append(self.run)
        f["source"].append(self.source)
        f["line"].append(line)
        f["iter"].append(it)
        f["rank"].append(rank)
        f["num_requests"].append(len(reqs))
        f["num_dummies"].append(n_dummy)
        for key in ("expected", "scheduled"):
            v = rec.get(key)
            if v is not None and not _is_int(v):
                raise self.error(f"frame: {key} must be an int, got {v!r}", line)
            f[key].append(v)
        for key in ("padded", "can_queue", "alloc_ok"):
            v = rec.get(key)
            if v is not None and not isinstance(v, bool):
                raise self.error(f"frame: {key} must be true or false, got {v!r}", line)
            f[key].append(v)

    def _note(self, rec: dict, line: int, text: str | None) -> None:
        e = self.events
        msg = rec.get("message", rec.get("text"))
        if not isinstance(msg, str):
            msg = text.strip() if text is not None else json.dumps(rec, sort_keys=True)
        rank = rec.get("rank")
        it = rec.get("iter")
        row = {n: None for n in EVENTS.names}
        row.update(source=self.source, line=line, line_end=line, kind=NOTE_EVENT_KIND, message=msg,
                   rank=rank if _is_int(rank) else None, iter=it if _is_int(it) else None)
        for n in EVENTS.names:
            e[n].append(row[n])

    def finish(self) -> TraceTables:
        if self.run is None:
            raise self.error("missing run record: the trace is empty", 1)
        return TraceTables(
            runs=pa.table(self.runs, schema=RUNS),
            frames=pa.table(self.frames, schema=FRAMES),
            requests=pa.table(self.requests, schema=REQUESTS),
            events=pa.table(self.events, schema=EVENTS),
            unparsed=pa.table(self.unparsed, schema=UNPARSED),
        )


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "NOTE_EVENT_KIND",
    "TraceTables",
    "is_trace",
    "read_trace",
    "tables_from_records",
]
