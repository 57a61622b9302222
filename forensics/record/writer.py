"""Buffered writing of one per-rank trace file (``traces/FORMAT.md``, version 1).

The executor's thread only appends captured frames to a list; they are encoded and written in
one ``os.write`` per flush. A flush happens every :data:`FLUSH_EVERY_FRAMES` frames or
:data:`FLUSH_EVERY_SECONDS` seconds (so a SIGKILL loses at most that much), at exit (atexit), on
SIGTERM (where a handler could be installed safely) and right after a crash inside a wrapped
method. Encoding uses ``%``-templates rather than ``json.dumps``: with 64 requests a frame encodes
in a few microseconds instead of ~30.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import threading
import time
from typing import Any, Protocol

logger = logging.getLogger(__name__)

#: Flush after this many buffered frames.
FLUSH_EVERY_FRAMES = 256
#: Flush when a frame arrives this long after the previous flush.
FLUSH_EVERY_SECONDS = 2.0

_REQ = '{"id":%d,"state":%d},'
_REQ_DUMMY = '{"id":%d,"state":%d,"dummy":true},'


class FrameRecord:
    """One rank's frame of one iteration, as captured (encoded only when flushed).

    Fields:
        iter: the executor's ``iter_counter``.
        rank: attention-DP rank.
        ids: ``py_request_id`` of each active request, in list order.
        states: ``state_value`` ints (or state names when only ``state`` was readable).
        dummies: ``is_attention_dp_dummy`` of each request.
        expected: ``expected_num_active_requests`` at entry (None when unreadable).
        n_before: ``len(active_requests)`` at entry, to tell whether the pad step appended.
        padded: the pad step appended a dummy (None until the step returned).
        scheduled: batch size offered to ``_can_queue`` (None when not seen).
        can_queue: the fleet-wide decision (None when not seen).
        postpadded: ``_pad_empty_attention_dp_batch`` (PR #17379) appended a dummy; None when the
            build has no such method (then the field is left out: unknown).
        alloc_ok: False once ``kv_cache_manager.add_dummy_requests`` returned None during a pad
            call of this iteration; None otherwise (written only as ``false``).
        kv_precheck_ok: False once ``_has_adp_dummy_kv_capacity`` returned False during a pad
            call of this iteration; None otherwise (written only as ``false``).
    """

    __slots__ = ("iter", "rank", "ids", "states", "dummies", "expected", "n_before", "padded",
                 "scheduled", "can_queue", "postpadded", "alloc_ok", "kv_precheck_ok")

    def __init__(self, it, rank, ids, states, dummies, expected, n_before):
        self.iter = it
        self.rank = rank
        self.ids = ids
        self.states = states
        self.dummies = dummies
        self.expected = expected
        self.n_before = n_before
        self.padded = None
        self.scheduled = None
        self.can_queue = None
        self.postpadded = None
        self.alloc_ok = None
        self.kv_precheck_ok = None


def _tail(fr: FrameRecord) -> str:
    out = "]"
    if fr.expected is not None:
        out += ',"expected":%d' % fr.expected
    if fr.padded is not None:
        out += ',"padded":true' if fr.padded else ',"padded":false'
    if fr.scheduled is not None:
        out += ',"scheduled":%d' % fr.scheduled
    if fr.can_queue is not None:
        out += ',"can_queue":true' if fr.can_queue else ',"can_queue":false'
    if fr.postpadded is not None:
        out += ',"postpadded":true' if fr.postpadded else ',"postpadded":false'
    if fr.alloc_ok is False:
        out += ',"alloc_ok":false'
    if fr.kv_precheck_ok is False:
        out += ',"kv_precheck_ok":false'
    return out + "}\n"


def _encode_slow(fr: FrameRecord) -> str:
    reqs = []
    for rid, st, d in zip(fr.ids, fr.states, fr.dummies):
        r: dict[str, Any] = {"id": int(rid), "state": st if isinstance(st, (int, str)) else str(st)}
        if d:
            r["dummy"] = True
        reqs.append(r)
    rec: dict[str, Any] = {"kind": "frame", "iter": int(fr.iter), "rank": int(fr.rank),
                           "requests": reqs}
    for key in ("expected", "padded", "scheduled", "can_queue", "postpadded"):
        v = getattr(fr, key)
        if v is not None:
            rec[key] = bool(v) if key in ("padded", "can_queue", "postpadded") else int(v)
    if fr.alloc_ok is False:
        rec["alloc_ok"] = False
    if fr.kv_precheck_ok is False:
        rec["kv_precheck_ok"] = False
    return json.dumps(rec, separators=(",", ":"), default=str) + "\n"


def _body(fr: FrameRecord) -> str | None:
    """The ``requests`` list without brackets, or None when only the general path can encode it."""
    n = len(fr.ids)
    try:
        if True in fr.dummies:
            body = "".join([(_REQ_DUMMY if d else _REQ) % (i, s)
                            for i, s, d in zip(fr.ids, fr.states, fr.dummies)])
        else:
            flat: list[Any] = [None] * (2 * n)
            flat[0::2] = fr.ids
            flat[1::2] = fr.states
            body = (_REQ * n) % tuple(flat)
    except TypeError:  # a state name (str) or an unexpected type
        return None
    return body[:-1]


def _head(fr: FrameRecord) -> str:
    return '{"kind":"frame","iter":%d,"rank":%d,"requests":[' % (fr.iter, fr.rank)


def encode_frame(fr: FrameRecord) -> str:
    """One JSON line for a frame; ``%``-template fast path for int states."""
    if not fr.ids:
        return _head(fr) + _tail(fr)
    body = _body(fr)
    return _encode_slow(fr) if body is None else _head(fr) + body + _tail(fr)


class FrameEncoder:
    """Encodes a rank's frames, reusing the previous frame's request list when it is unchanged.

    In steady decoding most iterations hold the same requests in the same states, so comparing
    three lists (C speed) usually replaces formatting 64 requests.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._body = ""

    def encode(self, fr: FrameRecord) -> str:
        if not fr.ids:
            return _head(fr) + _tail(fr)
        key = self._key
        if key is not None and fr.ids == key[0] and fr.states == key[1] and fr.dummies == key[2]:
            body: str | None = self._body
        else:
            body = _body(fr)
            if body is None:
                return _encode_slow(fr)
            self._key, self._body = (fr.ids, fr.states, fr.dummies), body
        return _head(fr) + body + _tail(fr)


def encode_record(record: dict) -> str:
    """A run or note record as one JSON line."""
    return json.dumps(record, separators=(",", ":"), default=str) + "\n"


class TraceWriter:
    """Appends records to one trace file with buffered, signal-tolerant flushing.

    Args:
        fd: an open file descriptor (``O_WRONLY|O_APPEND``) the writer owns.
        path: the file's path, for messages.
    """

    def __init__(self, fd: int, path: str):
        self.fd = fd
        self.path = path
        self.broken = False
        self._pending: list[Any] = []          # FrameRecord or already-encoded str
        self._buf = b""                        # bytes being written
        self._off = 0                          # how much of _buf reached the file
        self._lock = threading.RLock()         # re-entrant: a SIGTERM flush may interrupt a flush
        self._last_flush = time.monotonic()
        self._encoder = FrameEncoder()

    def add(self, item: Any) -> None:
        """Queue a :class:`FrameRecord` (or an encoded line); flush when the buffer is due."""
        with self._lock:
            self._pending.append(item)
        if (len(self._pending) >= FLUSH_EVERY_FRAMES
                or time.monotonic() - self._last_flush >= FLUSH_EVERY_SECONDS):
            self.flush()

    def add_record(self, record: dict) -> None:
        """Queue a run or note record."""
        self.add(encode_record(record))

    def flush(self) -> None:
        """Encode and write everything queued. Never raises: an I/O error breaks the writer."""
        if self.broken:
            return
        with self._lock:
            try:
                while True:
                    if self._off >= len(self._buf):
                        if not self._pending:
                            break
                        items, self._pending = self._pending, []
                        enc = self._encoder.encode
                        self._buf = "".join(
                            [it if isinstance(it, str) else enc(it) for it in items]
                        ).encode("utf-8")
                        self._off = 0
                    # Advance the offset right after each write so a flush from a signal
                    # handler that interrupted this one continues where it stopped.
                    self._off += os.write(self.fd, memoryview(self._buf)[self._off:])
            except Exception as exc:  # disk full, closed fd, ...: stop writing, keep the executor
                self.broken = True
                logger.warning("adp-forensics: cannot write trace %s (%s); recording stopped",
                               self.path, exc)
            finally:
                self._last_flush = time.monotonic()

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self.fd >= 0:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = -1
                self.broken = True


def open_trace_file(directory: str, stem: str) -> tuple[int, str]:
    """Create ``directory/stem.jsonl`` exclusively; if it exists use ``stem.<pid>.jsonl``.

    A recorder never appends to or overwrites another process's trace (a reused directory, or the
    context and generation servers of a disaggregated run sharing one).
    """
    os.makedirs(directory, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    path = os.path.join(directory, stem + ".jsonl")
    try:
        return os.open(path, flags, 0o644), path
    except FileExistsError:
        alt = os.path.join(directory, f"{stem}.{os.getpid()}.jsonl")
        logger.warning("adp-forensics: %s exists; this process writes %s instead", path, alt)
        return os.open(alt, flags, 0o644), alt


class Flushable(Protocol):
    def flush(self) -> None: ...


_FLUSHABLES: list[Flushable] = []
_HOOKS = {"atexit": False, "sigterm": False}


def register(obj: Flushable) -> None:
    """Flush ``obj`` at exit and on SIGTERM (see :func:`install_sigterm_flush`)."""
    _FLUSHABLES.append(obj)
    if not _HOOKS["atexit"]:
        atexit.register(flush_all)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_after_fork)
        _HOOKS["atexit"] = True


def _forget_after_fork() -> None:
    # A forked child shares the parent's descriptors and copied its buffers: writing them again
    # would duplicate the parent's frames. The child records nothing of its own.
    for obj in _FLUSHABLES:
        w = getattr(obj, "writer", None)
        if w is not None:
            w.broken = True
        if hasattr(obj, "disabled"):
            obj.disabled = True
    _FLUSHABLES.clear()


def flush_all() -> None:
    """Flush every registered recorder; never raises."""
    for obj in list(_FLUSHABLES):
        try:
            obj.flush()
        except Exception:  # pragma: no cover - flush() itself never raises
            pass


def _on_sigterm(signum, frame) -> None:
    flush_all()
    # Die as SIGTERM would have killed us, so launchers see the usual status.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def install_sigterm_flush() -> bool:
    """Flush on SIGTERM, only where safe: in the main thread and when nobody handles SIGTERM yet.

    A handler installed later by the application replaces this one (then only atexit flushes).
    Python runs handlers between bytecodes of the main thread, so a main thread blocked inside a
    C call that ignores signals delays the flush until the launcher's SIGKILL; the periodic
    flush bounds what is lost then.
    """
    if _HOOKS["sigterm"]:
        return True
    try:
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return False
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):
        return False
    _HOOKS["sigterm"] = True
    return True
