"""Capturing frames inside a live ``PyExecutor`` (the wrappers the bootstrap installs).

At entry to ``_pad_attention_dp_dummy_request`` the wrapper reads the rank's ``active_requests``
(``py_request_id``, ``state_value``, ``is_attention_dp_dummy``), ``iter_counter`` and
``expected_num_active_requests``; after the call it notes whether a dummy was appended. The
frame then waits for ``_can_queue`` of the same iteration (its batch size and fleet decision)
and is handed to the writer; if no ``_can_queue`` call comes, the next pad call or a flush hands
it over as it is.

Where the build has ``_pad_empty_attention_dp_batch`` (PR #17379: after scheduling, an empty batch
on a rank with active requests gets a dummy) it is wrapped too: every frame then records
``postpadded``, true when that call appended a dummy. During both pad calls
``kv_cache_manager.add_dummy_requests`` is observed through a shim set on the manager instance for
the call only; a None it returns is recorded as ``alloc_ok: false`` (traces/FORMAT.md). So is the
KV-capacity precheck ``_has_adp_dummy_kv_capacity`` where the build has it (a shim on the executor
instance): a False it returns is recorded as ``kv_precheck_ok: false``.

Nothing here may raise into the executor: a capture that fails writes a ``note`` record, logs
one warning and switches the recorder off for the rest of the process.
"""
from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from typing import Any, Callable

from forensics.record import writer as _writer
from forensics.record.run_facts import as_int, global_rank, run_record
from forensics.record.writer import FrameRecord, TraceWriter

logger = logging.getLogger(__name__)

#: Environment variable naming the trace directory; unset means "do not record".
TRACE_DIR_ENV = "ADP_FORENSICS_TRACE_DIR"
#: Optional run id shared by every rank's file (default: the absolute trace directory).
RUN_ID_ENV = "ADP_FORENSICS_RUN_ID"
#: Attribute under which an executor instance keeps its recorder.
RECORDER_ATTR = "_adp_forensics_recorder"
#: Attribute marking a wrapper (and pointing at the wrapped function).
ORIGINAL_ATTR = "__adp_forensics_original__"
#: The post-schedule pad of PR #17379 (absent in older builds: nothing to record then).
POSTPAD_METHOD = "_pad_empty_attention_dp_batch"
#: The KV-capacity precheck (PR #16279; on every path from NVIDIA 000515e on): observed during a
#: pad call, a False it returns is recorded as ``kv_precheck_ok: false``.
PRECHECK_METHOD = "_has_adp_dummy_kv_capacity"
#: Wrapped when present; their absence is normal for older builds and is not reported.
OPTIONAL_WRAPPERS = frozenset({POSTPAD_METHOD})
_MISSING = object()

_config: dict[str, Any] = {"trace_dir": None, "notes": [], "executors": 0}
_config_lock = threading.Lock()


def configure(trace_dir: str, notes: list[str] | None = None) -> None:
    """Set where traces go and the notes every file starts with (what could not be wrapped)."""
    _config["trace_dir"] = trace_dir
    _config["notes"] = list(notes or [])


def _slow_requests(reqs) -> tuple[list, list, list]:
    """Per-request reads for builds whose requests lack ``state_value`` or the dummy flag."""
    ids, states, dummies = [], [], []
    for r in reqs:
        ids.append(int(getattr(r, "py_request_id", getattr(r, "request_id", -1))))
        st = getattr(r, "state_value", None)
        if st is None:
            st = getattr(r, "state", None)
            value = getattr(st, "value", None)
            st = int(value) if isinstance(value, int) else getattr(st, "name", str(st))
        states.append(st)
        dummies.append(bool(getattr(r, "is_attention_dp_dummy",
                                    getattr(r, "py_is_attention_dp_dummy", False))))
    return ids, states, dummies


class Recorder:
    """Records one executor instance's frames into one per-rank file.

    Args:
        executor: the ``PyExecutor`` (read, never modified beyond the recorder attribute).
        trace_dir: the output directory.
        seq: 1 for the process's first executor; later ones (TensorRT-LLM may build a throw-away
            executor to size the KV cache first) write ``rank-<r>.exec<seq>.jsonl`` with the
            run id suffixed ``#exec<seq>`` so their restarted ``iter_counter`` never collides.
    """

    def __init__(self, executor: Any, trace_dir: str, seq: int = 1):
        self.disabled = False
        self.writer: TraceWriter | None = None
        self.pending: FrameRecord | None = None
        self.fast = True
        self.last_iter = -1
        self.own_iter = 0
        self.warned: set[str] = set()
        self.in_postpad = False
        self.watch_alloc_ok = True
        # The build pads after scheduling and that call is wrapped: postpadded is known per frame.
        self.postpad = getattr(getattr(type(executor), POSTPAD_METHOD, None), ORIGINAL_ATTR,
                               None) is not None
        self.grank = global_rank(executor)
        tp = as_int(getattr(getattr(executor, "dist", None), "tp_size", None))
        tp_rank = as_int(getattr(getattr(executor, "dist", None), "tp_rank", None))
        if tp_rank is None:
            tp_rank = self.grank % tp if tp else self.grank
        self.rank = tp_rank
        run_id = os.environ.get(RUN_ID_ENV) or os.path.abspath(trace_dir)
        dist = getattr(executor, "dist", None)
        pp_size = as_int(getattr(dist, "pp_size", None))
        pp_rank = as_int(getattr(dist, "pp_rank", None))
        if pp_size and pp_size > 1 and pp_rank is not None:
            # Every stage sees the same attention-DP ranks: one run per stage keeps
            # (iter, rank) unique within a run.
            run_id += f"#pp{pp_rank}"
        stem = f"rank-{self.grank}"
        if seq > 1:
            run_id += f"#exec{seq}"
            stem += f".exec{seq}"
        record = run_record(executor, self.rank, self.grank, run_id)
        fd, self.path = _writer.open_trace_file(trace_dir, stem)
        self.writer = TraceWriter(fd, self.path)
        self.writer.add_record(record)
        self.note(f"recording attention-DP rank {self.rank} (global rank {self.grank}, "
                  f"pid {os.getpid()}, host {socket.gethostname()})", global_rank=self.grank,
                  pid=os.getpid(), host=socket.gethostname())
        for text in _config["notes"]:
            self.note(text)
        self.writer.flush()
        _writer.register(self)

    # -- notes and failure ----------------------------------------------------------------------
    def note(self, message: str, **fields: Any) -> None:
        if self.writer is not None:
            self.writer.add_record({"kind": "note", "rank": self.rank, "message": message,
                                    **fields})

    def fail(self, where: str, exc: BaseException) -> None:
        """Switch off for good after a capture error: one note, one warning."""
        if self.disabled:
            return
        self.disabled = True
        msg = f"recorder disabled: {type(exc).__name__} while {where}: {exc}"
        logger.warning("adp-forensics: %s (rank %s)", msg, self.grank)
        try:
            self.pending = None
            self.note(msg)
            if self.writer is not None:
                self.writer.flush()
        except Exception:
            pass

    # -- the capture steps ----------------------------------------------------------------------
    def enter_pad(self, ex: Any) -> FrameRecord | None:
        """The frame at entry to the pad step (None when disabled or on a capture error)."""
        if self.disabled:
            return None
        try:
            if self.pending is not None:
                self._commit()
            reqs = ex.active_requests
            if self.fast:
                try:
                    ids = [r.py_request_id for r in reqs]
                    states = [r.state_value for r in reqs]
                    dummies = [r.is_attention_dp_dummy for r in reqs]
                except AttributeError as exc:
                    self.fast = False
                    self.note(f"requests lack an attribute ({exc}); reading them one by one")
                    ids, states, dummies = _slow_requests(reqs)
            else:
                ids, states, dummies = _slow_requests(reqs)
            it = getattr(ex, "iter_counter", None)
            if not isinstance(it, int):
                it = self.own_iter
            self.own_iter += 1
            if it <= self.last_iter:
                if "dup" not in self.warned:
                    self.warned.add("dup")
                    self.note(f"pad step entered twice in iteration {it}; only the first is "
                              "recorded", iter=it)
                return None
            self.last_iter = it
            expected = getattr(ex, "expected_num_active_requests", None)
            frame = FrameRecord(it, self.rank, ids, states, dummies,
                                expected if isinstance(expected, int) else as_int(expected),
                                len(reqs))
            if self.postpad:
                frame.postpadded = False
            return frame
        except Exception as exc:
            self.fail("capturing the frame at pad entry", exc)
            return None

    def exit_pad(self, ex: Any, frame: FrameRecord) -> None:
        try:
            frame.padded = len(ex.active_requests) > frame.n_before
            self.pending = frame
        except Exception as exc:
            self.fail("reading the pad result", exc)

    def crashed(self, frame: FrameRecord | None, where: str, exc: BaseException) -> None:
        """An exception leaves a wrapped method: write its iteration's frame and flush now."""
        try:
            if frame is not None and frame is not self.pending:
                if self.pending is not None:
                    self._commit()
                self.pending = frame
            fields: dict[str, Any] = {}
            if self.pending is not None:
                fields = {"iter": self.pending.iter, "expected": self.pending.expected,
                          "active": len(self.pending.ids)}
            self._commit()
            self.note(f"{type(exc).__name__} raised in {where}: {exc}"[:2000], **fields)
            if self.writer is not None:
                self.writer.flush()
        except Exception as inner:
            self.fail("saving the crashing iteration", inner)

    def watch_alloc(self, ex: Any, frame: FrameRecord | None) -> tuple | None:
        """Shim ``ex.kv_cache_manager.add_dummy_requests`` and ``ex._has_adp_dummy_kv_capacity``
        (the KV-capacity precheck, where the build has it) for one pad call: a None the first
        returns sets ``frame.alloc_ok = False``, a False the second returns sets
        ``frame.kv_precheck_ok = False``. Returns what :meth:`unwatch_alloc` restores (or None)."""
        if frame is None or self.disabled or not self.watch_alloc_ok:
            return None
        restores: list[tuple[Any, str, Any]] = []
        try:
            mgr = getattr(ex, "kv_cache_manager", None)
            original = getattr(mgr, "add_dummy_requests", None) if mgr is not None else None
            if callable(original) and getattr(original, ORIGINAL_ATTR, None) is None:
                restores.append((mgr, "add_dummy_requests",
                                 vars(mgr).get("add_dummy_requests", _MISSING)))

                def add_dummy_requests(*args, **kwargs):
                    result = original(*args, **kwargs)
                    if result is None:
                        frame.alloc_ok = False
                    return result

                setattr(add_dummy_requests, ORIGINAL_ATTR, original)
                mgr.add_dummy_requests = add_dummy_requests
            check = getattr(ex, PRECHECK_METHOD, None) \
                if getattr(type(ex), PRECHECK_METHOD, None) is not None else None
            if callable(check) and getattr(check, ORIGINAL_ATTR, None) is None:
                restores.append((ex, PRECHECK_METHOD, vars(ex).get(PRECHECK_METHOD, _MISSING)))

                def has_capacity(*args, **kwargs):
                    fits = check(*args, **kwargs)
                    if not fits:
                        frame.kv_precheck_ok = False
                    return fits

                setattr(has_capacity, ORIGINAL_ATTR, check)
                setattr(ex, PRECHECK_METHOD, has_capacity)
            return tuple(restores) or None
        except Exception as exc:  # e.g. a binding object without __dict__: record without it
            self.unwatch_alloc(tuple(restores) or None)
            self.watch_alloc_ok = False
            try:
                self.note(f"cannot observe kv_cache_manager.add_dummy_requests or "
                          f"{PRECHECK_METHOD} ({type(exc).__name__}: {exc}); alloc_ok and "
                          "kv_precheck_ok are not recorded")
            except Exception:
                pass
            return None

    def unwatch_alloc(self, token: tuple | None) -> None:
        """Put back what :meth:`watch_alloc` shimmed, as it was before."""
        if token is None:
            return
        for obj, name, own in reversed(token):
            try:
                if own is _MISSING:
                    delattr(obj, name)
                else:
                    setattr(obj, name, own)
            except Exception as exc:
                self.watch_alloc_ok = False
                self.fail(f"restoring {name}", exc)

    def enter_postpad(self, ex: Any, batch: Any) -> tuple | None:
        """Before ``_pad_empty_attention_dp_batch``: what tells afterwards whether it appended."""
        self.in_postpad = True
        fr = self.pending
        if fr is None or self.disabled:
            return None
        try:
            size = getattr(batch, "batch_size", None)
            return (fr, len(ex.active_requests), size if isinstance(size, int) else None,
                    self.watch_alloc(ex, fr))
        except Exception as exc:
            self.fail("capturing the post-schedule pad", exc)
            return None

    def exit_postpad(self, ex: Any, state: tuple | None, batch: Any, result: Any,
                     returned: bool) -> None:
        """After it: ``postpadded`` when ``active_requests`` or the batch grew; the new size."""
        self.in_postpad = False
        if state is None:
            return
        fr, n_before, size_before, token = state
        self.unwatch_alloc(token)
        if not returned or self.disabled:
            return
        try:
            grew = len(ex.active_requests) > n_before
            size = None
            for b in (result, batch):  # some shapes return the batch, others pad it in place
                s = getattr(b, "batch_size", None)
                if isinstance(s, int):
                    size = s
                    break
            if size is not None:
                grew = grew or (size_before is not None and size > size_before)
                fr.scheduled = size
            fr.postpadded = bool(fr.postpadded) or grew
        except Exception as exc:
            self.fail("reading the post-schedule pad result", exc)

    def on_schedule(self, result: Any) -> None:
        fr = self.pending
        if fr is None or self.disabled:
            return
        try:
            batch = result[0] if isinstance(result, tuple) else result
            size = getattr(batch, "batch_size", None)
            if isinstance(size, int):
                fr.scheduled = size
        except Exception as exc:
            self.fail("reading the scheduled batch", exc)

    def on_can_queue(self, batch: Any, result: Any) -> None:
        fr = self.pending
        if fr is None or self.disabled:
            return
        try:
            size = getattr(batch, "batch_size", None)
            if isinstance(size, int):
                fr.scheduled = size
            can = result[0] if isinstance(result, tuple) else result
            fr.can_queue = bool(can)
            self._commit()
        except Exception as exc:
            self.fail("reading the can_queue decision", exc)

    def _commit(self) -> None:
        fr, self.pending = self.pending, None
        if fr is not None and self.writer is not None:
            self.writer.add(fr)

    def flush(self) -> None:
        """Hand over a waiting frame and write everything (atexit, SIGTERM); never raises."""
        try:
            if self.pending is not None and not self.disabled:
                self._commit()
            if self.writer is not None:
                self.writer.flush()
        except Exception:
            pass


_FAILED = object()


def recorder_of(ex: Any) -> Recorder | None:
    """The executor's recorder, created on first use; None when recording is impossible."""
    try:
        rec = ex.__dict__.get(RECORDER_ATTR)
    except Exception:
        return None
    if rec is not None:
        return None if rec is _FAILED else rec
    with _config_lock:
        rec = ex.__dict__.get(RECORDER_ATTR)
        if rec is None:
            try:
                _config["executors"] += 1
                rec = Recorder(ex, _config["trace_dir"], _config["executors"])
            except Exception as exc:
                logger.warning("adp-forensics: cannot record this executor (%s: %s)",
                               type(exc).__name__, exc)
                rec = _FAILED
            try:
                setattr(ex, RECORDER_ATTR, rec)
            except Exception:
                return None
    return None if rec is _FAILED else rec


def wrap_pad(original: Callable) -> Callable:
    """Wrap ``_pad_attention_dp_dummy_request``: capture at entry, note padding after."""

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        rec = recorder_of(self) if _config["trace_dir"] else None
        if rec is None or rec.in_postpad:
            # Inside _pad_empty_attention_dp_batch (some shapes call the pad step from there):
            # that wrapper records this iteration's post-pad and watches the allocation.
            return original(self, *args, **kwargs)
        frame = rec.enter_pad(self)
        token = rec.watch_alloc(self, frame)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as exc:
            rec.unwatch_alloc(token)
            # The NVBug 6438685 assert fires here: the frame of this iteration must reach disk
            # (with alloc_ok false when the TypeError comes from a dummy allocation's None).
            rec.crashed(frame, original.__name__, exc)
            raise
        rec.unwatch_alloc(token)
        if frame is not None:
            rec.exit_pad(self, frame)
        return result

    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper


def _observe_result(original: Callable, on_result: Callable[[Recorder, tuple, dict, Any], None]
                    ) -> Callable:
    """Wrap ``original`` so the recorder sees its result, or records the crash it raises."""

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        rec = getattr(self, RECORDER_ATTR, None)
        if rec is None or rec is _FAILED:
            return original(self, *args, **kwargs)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as exc:
            rec.crashed(None, original.__name__, exc)
            raise
        on_result(rec, args, kwargs, result)
        return result

    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper


def wrap_can_queue(original: Callable) -> Callable:
    """Wrap ``_can_queue(scheduled_batch)``: attach batch size and decision, hand the frame over."""

    def on_result(rec: Recorder, args: tuple, kwargs: dict, result: Any) -> None:
        rec.on_can_queue(args[0] if args else kwargs.get("scheduled_batch"), result)

    return _observe_result(original, on_result)


def wrap_schedule(original: Callable) -> Callable:
    """Wrap ``_schedule()``: the batch size, in case ``_can_queue`` is absent or not reached."""

    def on_result(rec: Recorder, args: tuple, kwargs: dict, result: Any) -> None:
        rec.on_schedule(result)

    return _observe_result(original, on_result)


def wrap_postpad(original: Callable) -> Callable:
    """Wrap ``_pad_empty_attention_dp_batch(scheduled_batch)`` (PR #17379): note whether it
    appended a dummy (``postpadded``) and whether its dummy allocation returned None."""

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        rec = getattr(self, RECORDER_ATTR, None)
        if rec is None or rec is _FAILED:
            return original(self, *args, **kwargs)
        batch = args[0] if args else kwargs.get("scheduled_batch")
        state = rec.enter_postpad(self, batch)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as exc:
            rec.exit_postpad(self, state, batch, None, returned=False)
            rec.crashed(None, original.__name__, exc)
            raise
        rec.exit_postpad(self, state, batch, result, returned=True)
        return result

    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper


#: Method name -> wrapper factory, in the order they are installed.
WRAPPERS: dict[str, Callable[[Callable], Callable]] = {
    "_pad_attention_dp_dummy_request": wrap_pad,
    "_schedule": wrap_schedule,
    POSTPAD_METHOD: wrap_postpad,
    "_can_queue": wrap_can_queue,
}
