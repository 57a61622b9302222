"""The tables of one request-state trace (``traces/FORMAT.md``), built from its records in file
order: the run record's validation, frame and request rows, notes and unparsed lines, and the
duplicate-frame check across batches. :mod:`forensics.readers.trace_v1` reads the file and feeds
its records (or the compiled scanner's frame columns) to a :class:`TraceBuilder`.
"""
from __future__ import annotations

import dataclasses
import json
from array import array
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.dataset.names import state_names
from forensics.dataset.schema import EVENTS, FRAMES, REQUESTS, RUNS, UNPARSED
from forensics.errors import TraceFormatError
from forensics.readers.frame_columns import FIXED, OPTIONAL, FrameColumns
from forensics.readers.frame_keys import FrameKeys
from forensics.readers.repeated_text import repeated
from forensics.readers.surrogates import escaped
from replay.states import (CURRENT_NUMBERING, RequestState, UnknownStateError, numbering_decoder,
                           parse_state)

#: The ``format`` value of a v1 run record.
FORMAT_NAME = "adp-trace"
#: The newest version this reader reads (and the simulator and recorder write).
FORMAT_VERSION = 2
#: Every version this reader reads: v1 with stated assumptions (traces/FORMAT.md: integer states
#: use today's numbering, the model is not named).
READ_VERSIONS = (1, 2)
#: ``events.kind`` of a ``{"kind": "note"}`` record.
NOTE_EVENT_KIND = "trace_note"

_RUN_INTS = ("tp_size", "pp_size", "max_batch_size", "max_num_active_requests")
_RUN_BOOLS = ("disaggregated", "overlap_scheduler")

# Optional recorded decisions of a frame, from the schema (every column after the fixed ones):
# int64 columns must be JSON ints, bool columns true/false; absent or null stays null.
_FRAME_INTS = tuple(f.name for f in FRAMES if f.name not in FIXED and pa.types.is_integer(f.type))
_FRAME_BOOLS = tuple(f.name for f in FRAMES if f.name not in FIXED and pa.types.is_boolean(f.type))

# Fast path of the state lookup: exact names, prefixed names and int values. Anything else
# (other case, spaces, digit strings, bad values) goes through ``parse_state`` and its errors.
_NAME_CODES: dict[Any, int] = {}
for _s in RequestState:
    _NAME_CODES[_s.name] = int(_s)
    _NAME_CODES[f"LlmRequestState.{_s.name}"] = int(_s)
#: v1 traces: integer states are today's values (the assumption traces/FORMAT.md states).
_STATE_CODES: dict[Any, int] = {**_NAME_CODES, **{int(_s): int(_s) for _s in RequestState}}


@dataclasses.dataclass(frozen=True)
class TraceTables:
    """The tables one trace file (or one batch of it, see
    :func:`~forensics.readers.trace_v1.iter_trace`) contributes.

    Fields:
        runs: one row (the run record), schema ``RUNS``; empty in every batch but the first.
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
        """The run key (the run record's ``run_id``, else the source); first batch only."""
        return self.runs.column("run")[0].as_py()


def decode_line(line: bytes) -> str:
    """One line's text (newline and a ``\\r`` before it dropped, bad UTF-8 replaced)."""
    return line.rstrip(b"\n").rstrip(b"\r").decode("utf-8", errors="replace")


def _is_int(v: Any, bits: int = 64) -> bool:
    """A JSON integer that fits the signed column it is stored in (a bool is not an int here)."""
    return (isinstance(v, int) and not isinstance(v, bool)
            and -(1 << (bits - 1)) <= v < (1 << (bits - 1)))


def _first_repeat(keys: np.ndarray, seen: FrameKeys) -> int:
    """Index of the first key (in order) equal to an earlier key or to one in ``seen``."""
    n = keys.size
    first = n
    if n > 1:
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        later = order[1:][sk[1:] == sk[:-1]]  # stable: the later of equal keys
        if later.size:
            first = int(later.min())
    if n:
        hit = seen.hits(keys)
        if hit.any():
            first = min(first, int(np.argmax(hit)))
    return first if first < n else -1


class TraceBuilder:
    """Accumulates one batch of columns while validating records in file order.

    Requests are kept as typed arrays (id, state, dummy); their ``iter``/``rank``/``pos`` come
    from the frame columns at flush time. Frame keys ``iter * tp_size + rank`` of the batch are
    checked for duplicates at flush (and before any other error, so the first bad line wins)
    against the sorted keys of every earlier batch.
    """

    def __init__(self, source: str, path: str):
        self.source = source
        self.path = path
        self.run: str | None = None
        self.tp_size = 0
        self.codes: dict[Any, int] = _STATE_CODES  # per run record: names + its declared ints
        self.int_codes: dict[int, int] | None = None
        self.runs: dict[str, list] = {n: [] for n in RUNS.names}
        self.first_record_seen = False
        self.seen = FrameKeys()  # keys of flushed batches
        self._new_batch()

    def _new_segments(self) -> None:
        # Frames of the batch before the ones in the lists: vectorised runs and sealed lists.
        self.segments: list[FrameColumns] = []
        self.sealed_frames = 0
        self.sealed_requests = 0

    def _new_batch(self) -> None:
        self.frames: dict[str, list] = {n: [] for n in ("line", "iter", "rank", "num_requests",
                                                        "num_dummies", *OPTIONAL)}
        self.req_id = array("q")
        self.req_state = array("h")
        self.req_dummy = array("b")
        self.keys = array("q")
        self.key_lines = array("q")
        self.events: dict[str, list] = {n: [] for n in EVENTS.names}
        self.unparsed: dict[str, list] = {n: [] for n in UNPARSED.names}
        self._new_segments()

    @property
    def n_frames(self) -> int:
        return self.sealed_frames + len(self.frames["line"])

    @property
    def n_requests(self) -> int:
        return self.sealed_requests + len(self.req_id)

    def add_frames(self, cols: FrameColumns) -> None:
        """Append frames read by the compiled scanner (``json_scan``), after the ones so far.

        Their keys join the batch's for the one duplicate check of both paths.
        """
        self._seal()
        self.keys.frombytes((cols.iter * self.tp_size + cols.rank).astype(np.int64).tobytes())
        self.key_lines.frombytes(cols.line.astype(np.int64).tobytes())
        self.segments.append(cols)
        self.sealed_frames += cols.n_frames
        self.sealed_requests += int(cols.req_id.size)

    def _seal(self) -> None:
        """Move the frames in the lists to ``segments`` (typed columns, same rows)."""
        f = self.frames
        if not f["line"]:
            return
        self.segments.append(FrameColumns(
            line=np.asarray(f["line"], np.int64), iter=np.asarray(f["iter"], np.int64),
            rank=np.asarray(f["rank"], np.int32), num_requests=np.asarray(f["num_requests"], np.int32),
            num_dummies=np.asarray(f["num_dummies"], np.int32),
            optional={k: pa.array(f[k], FRAMES.field(k).type) for k in OPTIONAL},
            req_id=np.frombuffer(self.req_id, np.int64).copy(),
            req_state=np.frombuffer(self.req_state, np.int16).copy(),
            req_dummy=np.frombuffer(self.req_dummy, np.int8).astype(bool)))
        self.sealed_frames += len(f["line"])
        self.sealed_requests += len(self.req_id)
        for col in f.values():
            col.clear()
        self.req_id = array("q")
        self.req_state = array("h")
        self.req_dummy = array("b")

    def error(self, message: str, line: int) -> TraceFormatError:
        return TraceFormatError(message, path=self.path, line=line,
                                hint="see traces/FORMAT.md (request-state trace format, "
                                     f"versions {', '.join(map(str, READ_VERSIONS))})")

    def raise_pending_duplicate(self) -> None:
        """Raise the first duplicate frame of this batch, if any (it precedes the current line)."""
        if not len(self.keys):
            return
        keys = np.frombuffer(self.keys, np.int64)
        i = _first_repeat(keys, self.seen)
        if i >= 0:
            it, rank = divmod(int(keys[i]), self.tp_size)
            raise self.error(f"duplicate frame (iter {it}, rank {rank}) in run {self.run!r}",
                             int(self.key_lines[i]))

    def add_line(self, text: str, line: int) -> None:
        try:
            if not text.strip():
                self._unparsed(text, line)
                return
            try:
                rec = json.loads(text)
            except ValueError as e:
                raise self.error(f"not a JSON object ({e.msg})", line) from None
            except RecursionError:
                raise self.error("not a JSON object (nested too deeply)", line) from None
            if not isinstance(rec, dict):
                raise self.error(f"not a JSON object (a JSON {type(rec).__name__})", line)
            self._record(rec, line, text)
        except TraceFormatError:
            self.raise_pending_duplicate()
            raise

    def add_record(self, rec: dict, line: int, text: str | None) -> None:
        try:
            self._record(rec, line, text)
        except TraceFormatError:
            self.raise_pending_duplicate()
            raise

    def _record(self, rec: dict, line: int, text: str | None) -> None:
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
        if rec["version"] not in READ_VERSIONS or isinstance(rec["version"], bool):
            raise self.error(f"unsupported version {rec['version']!r} (this reader reads "
                             f"versions {', '.join(map(str, READ_VERSIONS))})", line)
        model = rec.get("model_arch")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise self.error(f"run record: model_arch must be a non-empty string or null, got "
                             f"{model!r}", line)
        numbering = rec.get("state_numbering")
        if numbering is None:
            # v1: integers are today's values (stated assumption); v2: only names without one.
            self.int_codes = None if rec["version"] >= 2 else numbering_decoder(CURRENT_NUMBERING)
        else:
            try:
                self.int_codes = numbering_decoder(numbering)
            except UnknownStateError as e:
                raise self.error(f"run record: {e}", line) from None
        self.codes = {**_NAME_CODES, **(self.int_codes or {})}
        for key in _RUN_INTS:
            if not _is_int(rec[key], 32) or rec[key] < 1:
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
        run_id = escaped(run_id) if run_id is not None else None
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
        r["build"].append(escaped(rec["build"]))
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
        try:
            self.keys.append(it * self.tp_size + rank)
        except OverflowError:
            raise self.error(f"frame: iter {it} is too large", line) from None
        self.key_lines.append(line)
        ids, states, dummies = self.req_id, self.req_state, self.req_dummy
        codes = self.codes
        n_dummy = 0
        n_before = len(ids)
        try:
            for pos, req in enumerate(reqs):
                if type(req) is dict:
                    rid = req.get("id")
                    st = req.get("state")
                    dummy = req.get("dummy", False)
                    code = codes.get(st) if type(st) is str or type(st) is int else None
                    if code is not None and type(rid) is int and (dummy is False or dummy is True):
                        ids.append(rid)
                        states.append(code)
                        dummies.append(dummy)
                        n_dummy += dummy
                        continue
                rid, code, dummy = self._request(pos, req, line)
                ids.append(rid)
                states.append(code)
                dummies.append(dummy)
                n_dummy += dummy
        except OverflowError:
            del ids[n_before:], states[n_before:], dummies[n_before:]
            raise self.error("frame: a request id is outside the signed 64-bit range", line) from None
        opt = {}
        for key in OPTIONAL:
            v = rec.get(key)
            if v is not None:
                if key in _FRAME_INTS and not _is_int(v):
                    raise self.error(f"frame: {key} must be an int, got {v!r}", line)
                if key in _FRAME_BOOLS and not isinstance(v, bool):
                    raise self.error(f"frame: {key} must be true or false, got {v!r}", line)
            opt[key] = v
        f = self.frames
        f["line"].append(line)
        f["iter"].append(it)
        f["rank"].append(rank)
        f["num_requests"].append(len(reqs))
        f["num_dummies"].append(n_dummy)
        for key in OPTIONAL:
            f[key].append(opt[key])

    def _request(self, pos: int, req: Any, line: int) -> tuple[int, int, bool]:
        """The slow, exact validation of one request: ``(id, state value, dummy)`` or an error."""
        if not isinstance(req, dict):
            raise self.error(f"frame: request {pos} is not an object", line)
        if "id" not in req or "state" not in req:
            missing = "id" if "id" not in req else "state"
            raise self.error(f"frame: request {pos}: missing required field {missing!r}", line)
        if not _is_int(req["id"]):
            raise self.error(f"frame: request {pos}: id must be an int, got {req['id']!r}", line)
        raw = req["state"]
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw.strip())
        if _is_int(raw):
            if self.int_codes is None:
                raise self.error(f"frame: request {pos}: integer state {raw} but the run record "
                                 "declares no state_numbering (write state names, or declare "
                                 "the numbering: traces/FORMAT.md)", line)
            if raw not in self.int_codes:
                raise self.error(f"frame: request {pos}: unknown request state value {raw} in the "
                                 "declared state_numbering", line)
            return int(req["id"]), self.int_codes[raw], self._dummy(req, pos, line)
        try:
            state = parse_state(raw)
        except UnknownStateError as e:
            raise self.error(f"frame: request {pos}: {e}", line) from None
        return int(req["id"]), int(state), self._dummy(req, pos, line)

    def _dummy(self, req: dict, pos: int, line: int) -> bool:
        dummy = req.get("dummy", False)
        if not isinstance(dummy, bool):
            raise self.error(f"frame: request {pos}: dummy must be true or false", line)
        return dummy

    def _note(self, rec: dict, line: int, text: str | None) -> None:
        e = self.events
        msg = rec.get("message", rec.get("text"))
        if not isinstance(msg, str):
            msg = text.strip() if text is not None else json.dumps(rec, sort_keys=True)
        msg = escaped(msg)
        rank = rec.get("rank")
        it = rec.get("iter")
        row = {n: None for n in EVENTS.names}
        row.update(source=self.source, line=line, line_end=line, kind=NOTE_EVENT_KIND, message=msg,
                   text=text.strip() if text is not None else json.dumps(rec, sort_keys=True),
                   rank=rank if _is_int(rank, 32) else None, iter=it if _is_int(it) else None)
        for n in EVENTS.names:
            e[n].append(row[n])

    def flush(self) -> TraceTables:
        """The batch so far as tables (after the duplicate check); starts a new batch."""
        self.raise_pending_duplicate()
        keys = np.frombuffer(self.keys, np.int64)
        self.seen.add(keys)
        self._seal()
        cols = FrameColumns.concat(self.segments)
        n = cols.n_frames
        run = self.run if self.run is not None else ""
        counts = cols.num_requests.astype(np.int64)
        frame_iter = cols.iter
        frame_rank = cols.rank
        n_req = int(counts.sum())
        pos = _positions(counts, n_req)
        frames = {"run": repeated(run, n), "source": repeated(self.source, n),
                  "line": pa.array(cols.line), "iter": pa.array(frame_iter),
                  "rank": pa.array(frame_rank), "num_requests": pa.array(cols.num_requests),
                  "num_dummies": pa.array(cols.num_dummies), **cols.optional}
        requests = {"run": repeated(run, n_req),
                    "iter": pa.array(np.repeat(frame_iter, counts)),
                    "rank": pa.array(np.repeat(frame_rank, counts)), "pos": pa.array(pos),
                    "request_id": pa.array(cols.req_id), "state": state_names(cols.req_state),
                    "state_value": pa.array(cols.req_state),
                    "dummy": _bools(cols.req_dummy)}
        out = TraceTables(
            runs=pa.table(self.runs, schema=RUNS),
            frames=pa.table([frames[c] for c in FRAMES.names], schema=FRAMES),
            requests=pa.table([requests[c] for c in REQUESTS.names], schema=REQUESTS),
            events=pa.table(self.events, schema=EVENTS),
            unparsed=pa.table(self.unparsed, schema=UNPARSED),
        )
        self.runs = {n: [] for n in RUNS.names}
        self._new_batch()
        return out

    def stopped(self, error: Any, tail: bytes | None, line: int) -> TraceTables:
        """The last batch of a trace whose decompression stopped: the cut last line kept
        verbatim in ``unparsed``, and an ``input_corrupt``/``input_truncated`` event one past
        the last line read (as for logs and stats)."""
        if tail:
            self._unparsed(decode_line(tail), line)
            line += 1
        if self.run is None:
            raise self.error(f"{error}, before a complete run record", line)
        row = {n: None for n in EVENTS.names}
        row.update(source=self.source, line=line, line_end=line, severity="E",
                   kind=getattr(error, "kind", "input_truncated"),
                   message=f"{error}; kept {line - 1} lines, the rest is lost")
        for n in EVENTS.names:
            self.events[n].append(row[n])
        return self.finish()

    def finish(self) -> TraceTables:
        """The last batch; checks that the file had a run record."""
        if self.run is None:
            raise self.error("missing run record: the trace is empty", 1)
        return self.flush()


def _positions(counts: np.ndarray, total: int) -> pa.Array:
    """Each request's position in its frame (int32), for frames of ``counts`` requests (int64,
    ``total`` in all): one cumulative sum of steps of 1, the step at a frame's first request
    going back to 0 (half the CPU of ``arange - repeat(starts)``, measured on a fleet trace's
    batches)."""
    steps = np.ones(total, np.int32)
    if total:
        steps[0] = 0
        ends = np.cumsum(counts[:-1])          # the next frame's first request
        back = (counts[:-1] > 0) & (ends < total)   # distinct positions where counts > 0
        steps[ends[back]] = 1 - counts[:-1][back]
    return pa.array(np.cumsum(steps, dtype=np.int32))


def _bools(values: np.ndarray) -> pa.Array:
    """A bool column from a numpy bool array, its bits packed by numpy (a third of the CPU of
    ``pa.array``'s conversion, measured)."""
    return pa.Array.from_buffers(pa.bool_(), values.size,
                                 [None, pa.py_buffer(np.packbits(values, bitorder="little"))])


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "NOTE_EVENT_KIND",
    "READ_VERSIONS",
    "TraceBuilder",
    "TraceTables",
    "decode_line",
]
