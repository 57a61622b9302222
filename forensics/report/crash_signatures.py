"""Crash signatures in the logs, each matched to the executor versions that can produce it.

A signature is read from the ``events`` table (``forensics.readers.event_kinds``):

=======================  ===============================================  ===========================
signature                events                                           produced by policies with
=======================  ===============================================  ===========================
``entry-assert``         ``adp_assert`` (full or abridged traceback)      ``EntryCheck.ASSERT``, a cap,
                                                                          and a path that can leak
``surplus-warning``      ``adp_surplus_tolerated`` (PR #17278)            ``EntryCheck.WARN``
``alloc-failure-warning````adp_dummy_alloc_failed`` ("Cannot allocate")    ``AllocFailure.SKIP``
``alloc-failure-crash``  a traceback in the pad step on a None dummy      ``AllocFailure.CRASH``
``kv-precheck-warning``  ``adp_dummy_no_kv_capacity`` ("Unable to fit")   a KV-capacity precheck
                                                                          on some path
``event-loop-error``     ``event_loop_error`` after one of the above      those of the one it follows
``mpi-abort``            ``mpi_abort`` after one of the above             those of the one it follows
``other-crash``          any other crash: a Python traceback, a C++       none (the catalogue models
                         assertion or backtrace, an NCCL or CUDA error    the pad step only)
                         (``cuda_oom``, ``nccl_timeout``, ...)
=======================  ===============================================  ===========================

An ``other-crash`` is named (:attr:`Signature.title`: ``C++ assertion failed: mNextBlocks.empty()``,
``KeyError in process_res``, ``NCCL error``, ...) with its location; prints of one crash close
together in a file (the message, its backtrace, its traceback) are one signature, named by the
most specific of them.

"A path that can leak" is derived from the policy fields, never from names: on a path (aggregated,
disaggregated with pp 1, disaggregated with pp > 1) a dummy can survive a fleet-wide skip when the
pad predicate counts a state the micro-batch scheduler refuses (so a rank gets no dummy yet
schedules 0, domain doc §1) and the version does not roll a pending dummy back on a skip
(PR #16921). With dummy allocation failures in the logs, a version that skips padding on a failed
allocation (PR #16161) can also leave a rank at batch 0 and so leak on any path without rollback;
so can a failed KV-capacity precheck.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from forensics.readers import event_kinds as K
from replay.config import RunConfig
from replay.policy import AllocFailure, EntryCheck, Policy
from replay.states import micro_batch_window

#: The pad step's function name in ``py_executor.py``.
PAD_FUNCTION = "_pad_attention_dp_dummy_request"
_ASSERT_TEXT = re.compile(r"expected_num_active_requests\s*>=\s*len\(\s*self\.active_requests\s*\)")
_SURPLUS_TEXT = re.compile(r"exceeds\s+expected_num_active_requests", re.I)
_ALLOC_TEXT = re.compile(r"cannot allocate.*dummy", re.I)
_PRECHECK_TEXT = re.compile(r"unable to fit the complete attention-DP dummy KV allocation|"
                            r"cannot afford even a padding dummy", re.I)
_NONE_TEXT = re.compile(r"NoneType|None\b", re.I)
_EVENT_LOOP_TEXT = re.compile(r"Error in event loop", re.I)
_MPI_ABORT_TEXT = re.compile(r"MPI_ABORT was invoked", re.I)
_CPP_ASSERT_TEXT = re.compile(r"Assertion failed:?\s*(?P<cond>.*?)\s*(?:\((?P<loc>[^()\s]+:\d+)\))?\s*$")
_NCCL_TEXT = re.compile(r"\bNCCL error\b|\bnccl[A-Z]\w*Error\b|collective operation timeout")
_CUDA_TEXT = re.compile(r"\bCUDA error\b|CUDA out of memory|\bcudaError\w+|illegal memory access"
                        r"|\bOutOfMemoryError\b|device-side assert")
#: ``file.cpp:123``-like source locations in a message.
_SOURCE_LOCATION = re.compile(r"[\w./-]+\.(?:cpp|cu|cuh|h|hpp|cc|py):\d+")
#: Event kinds that are a crash of their own (their parsers read them so).
_CRASH_KINDS = (K.CPP_BACKTRACE, K.CUDA_DEVICE_ASSERT, K.NCCL_TIMEOUT, K.CUDA_OOM, K.DIST_TIMEOUT)
#: Severities of a logged failure.
_FAILURE_SEVERITIES = ("E", "F")
#: Traceback kinds (the parser names the continuation of an interleaved traceback differently
#: across versions, hence the lookups with a default).
_TRACEBACK_KINDS = (K.TRACEBACK, getattr(K, "CONTINUED", "continued"),
                    getattr(K, "TRACEBACK_CONTINUED", "traceback_continued"))
#: A consequence (event-loop error, MPI abort) counts as following a cause within this many lines
#: of the same source, or anywhere later in another source.
FOLLOW_LINES = 200
#: ... or at most this many lines before it: "Error in event loop: ..." is logged just before
#: the traceback it introduces.
LEAD_LINES = 3


class SignatureKind(enum.Enum):
    """What a crash-related log event is."""

    ENTRY_ASSERT = "entry-assert"
    SURPLUS_WARNING = "surplus-warning"
    ALLOC_FAILURE_WARNING = "alloc-failure-warning"
    ALLOC_FAILURE_CRASH = "alloc-failure-crash"
    KV_PRECHECK_WARNING = "kv-precheck-warning"
    EVENT_LOOP_ERROR = "event-loop-error"
    MPI_ABORT = "mpi-abort"
    OTHER_CRASH = "other-crash"

    @property
    def is_crash(self) -> bool:
        """The rank's event loop died of it (warnings do not kill anything)."""
        return self in (SignatureKind.ENTRY_ASSERT, SignatureKind.ALLOC_FAILURE_CRASH,
                        SignatureKind.EVENT_LOOP_ERROR, SignatureKind.MPI_ABORT,
                        SignatureKind.OTHER_CRASH)

    @property
    def is_cause(self) -> bool:
        """A pad-dummy signature in its own right (not a consequence of another, nor a crash
        the catalogue does not model)."""
        return self not in (SignatureKind.EVENT_LOOP_ERROR, SignatureKind.MPI_ABORT,
                            SignatureKind.OTHER_CRASH)


#: Replay ``Crash.kind`` -> the signature it leaves in the logs.
REPLAY_CRASH_KIND = {"assert": SignatureKind.ENTRY_ASSERT,
                     "dummy_alloc_none": SignatureKind.ALLOC_FAILURE_CRASH}


@dataclasses.dataclass(frozen=True)
class Signature:
    """One crash-related event found in the logs.

    Fields:
        kind: what it is.
        source, line, line_end: where it is in the input (1-based lines).
        rank: the rank that logged it, or None.
        iter: the executor iteration (``iter_counter``) it happened in, or None; for a traceback,
            the last iteration line printed before it in the same file (that line's ``iter`` is
            the body that crashed, domain doc §8).
        iter_inferred: ``iter`` came from a preceding iteration line, not the event itself.
        message: the event's text.
        code_location: ``file:line`` of the innermost frame (``py_executor.py:2150``), or the
            file alone for abridged tracebacks without line numbers, or None.
        function: innermost function, or None.
        exception_type: ``AssertionError``..., or None.
        policies: catalogue names of the versions that can produce it, oldest first.
        reason: why those policies (paths, fields).
        follows: for a consequence, the index (in the signature list) of the cause it follows.
        count: warnings folded into this one (same kind and rank), or prints of the same crash
            (the executor logs the traceback, then its thread re-raises it); at least 1.
        name: what crashed, in words, for an ``other-crash`` (``KeyError in process_res``);
            None for the pad-dummy kinds, whose kind says it.
    """

    kind: SignatureKind
    source: str
    line: int
    line_end: int
    rank: Optional[int]
    iter: Optional[int]
    iter_inferred: bool
    message: str
    code_location: Optional[str]
    function: Optional[str]
    exception_type: Optional[str]
    policies: tuple[str, ...]
    reason: str
    follows: Optional[int] = None
    count: int = 1
    name: Optional[str] = None

    @property
    def where(self) -> str:
        """``source:line`` of the event in the input."""
        return f"{self.source}:{self.line}"

    @property
    def title(self) -> str:
        """The crash named: ``name`` when there is one, else the kind."""
        return self.name or self.kind.value

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "source": self.source, "line": self.line,
                "line_end": self.line_end, "rank": self.rank, "iter": self.iter,
                "iter_inferred": self.iter_inferred, "message": self.message,
                "code_location": self.code_location, "function": self.function,
                "exception_type": self.exception_type, "policies": list(self.policies),
                "reason": self.reason, "follows": self.follows, "count": self.count,
                "name": self.name}


# --- which policies can produce what -------------------------------------------------------------

#: The paths a run can take, for when the configuration is not known (logs alone).
def _paths(config: RunConfig | None) -> list[tuple[str, RunConfig]]:
    if config is not None:
        return [(_path_name(config), config)]
    return [("aggregated", RunConfig(tp_size=2, disaggregated=False)),
            ("disaggregated, pp_size 1", RunConfig(tp_size=2, disaggregated=True, pp_size=1)),
            ("disaggregated, pp_size > 1", RunConfig(tp_size=2, disaggregated=True, pp_size=2))]


def _path_name(config: RunConfig) -> str:
    if not config.disaggregated:
        return "aggregated"
    return "disaggregated, pp_size 1" if config.pp_size == 1 else "disaggregated, pp_size > 1"


def predicate_wider_than_scheduler(policy: Policy, config: RunConfig) -> bool:
    """The pad predicate counts a state the micro-batch scheduler refuses (domain doc §1.1)."""
    counted = policy.predicate(config).mask(config)
    window = micro_batch_window(config.encoder_decoder).mask()
    return bool(np.any(counted & ~window))


def leak_paths(policy: Policy, config: RunConfig | None = None, *,
               alloc_failures: bool = False) -> list[str]:
    """The paths on which a dummy of this policy can survive a fleet-wide skip, with the reason.

    Args:
        policy: the version.
        config: the run's configuration; None tries every path.
        alloc_failures: dummy allocations are known to fail in this run, so a version that skips
            padding on a failure can leave a rank at batch 0.
    """
    out = []
    for name, cfg in _paths(config):
        if policy.rolls_back(cfg):
            continue
        why = []
        if predicate_wider_than_scheduler(policy, cfg):
            why.append("predicate counts states the scheduler refuses")
        if alloc_failures and policy.alloc_failure_for(cfg) is AllocFailure.SKIP:
            why.append("a failed dummy allocation leaves a rank at batch 0")
        if why:
            out.append(f"{name} ({'; '.join(why)}; no rollback on a skip)")
    return out


def policies_for(kind: SignatureKind, policies: Sequence[Policy], config: RunConfig | None = None,
                 *, alloc_failures: bool = False) -> tuple[tuple[str, ...], str]:
    """Names of the policies that can produce a signature, and why."""
    names: list[str] = []
    reasons: list[str] = []
    for p in policies:
        if kind is SignatureKind.ENTRY_ASSERT:
            if p.entry_check is not EntryCheck.ASSERT or not p.cap:
                continue
            paths = leak_paths(p, config, alloc_failures=alloc_failures)
            if not paths:
                continue
            names.append(p.name)
            reasons.append(f"{p.name}: asserts at pad entry, expected is capped, leaks on "
                           + ", ".join(paths))
        elif kind is SignatureKind.SURPLUS_WARNING:
            if p.entry_check is EntryCheck.WARN:
                names.append(p.name)
                reasons.append(f"{p.name}: warns instead of asserting ({', '.join(p.prs[:1])})")
        elif kind is SignatureKind.ALLOC_FAILURE_WARNING:
            # Per path: a gated version tolerates a refused dummy only inside its gate.
            if any(p.alloc_failure_for(c) is AllocFailure.SKIP for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: a None dummy is warned about and padding skipped")
        elif kind is SignatureKind.KV_PRECHECK_WARNING:
            if any(p.prechecks(c) for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: prechecks the dummy's KV capacity and skips padding "
                               "when it cannot fit")
        elif kind is SignatureKind.ALLOC_FAILURE_CRASH:
            if any(p.alloc_failure_for(c) is AllocFailure.CRASH for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: uses the dummy allocation result unchecked")
    if not names:
        return (), "no catalogue policy produces it" + (f" on a {_path_name(config)} run" if config else "")
    return tuple(names), "; ".join(reasons)


# --- reading the events table --------------------------------------------------------------------

def _text(row: pd.Series, name: str) -> str:
    v = row.get(name)
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else str(v)


def _opt_int(v) -> Optional[int]:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return int(v)


def classify(row: pd.Series) -> Optional[SignatureKind]:
    """The signature kind of one events row, or None when it is not crash-related."""
    kind = _text(row, "kind")
    msg = _text(row, "message")
    func = _text(row, "innermost_function")
    exc = _text(row, "exception_type")
    if kind == K.ADP_ASSERT or _ASSERT_TEXT.search(msg):
        return SignatureKind.ENTRY_ASSERT
    if kind == K.ADP_SURPLUS_TOLERATED or (kind in (K.LOG, K.CPP_LOG) and _SURPLUS_TEXT.search(msg)):
        return SignatureKind.SURPLUS_WARNING
    if kind == K.ADP_DUMMY_ALLOC_FAILED or (kind in (K.LOG, K.CPP_LOG) and _ALLOC_TEXT.search(msg)):
        return SignatureKind.ALLOC_FAILURE_WARNING
    if kind == K.ADP_DUMMY_NO_KV_CAPACITY or (kind in (K.LOG, K.CPP_LOG)
                                              and _PRECHECK_TEXT.search(msg)):
        return SignatureKind.KV_PRECHECK_WARNING
    if kind in _TRACEBACK_KINDS and func == PAD_FUNCTION:
        if exc == "AssertionError":
            return SignatureKind.ENTRY_ASSERT
        if exc == "TypeError" or _NONE_TEXT.search(msg):
            return SignatureKind.ALLOC_FAILURE_CRASH
    if kind == K.EVENT_LOOP_ERROR or (kind == K.LOG and _EVENT_LOOP_TEXT.search(msg)):
        return SignatureKind.EVENT_LOOP_ERROR
    if kind == K.MPI_ABORT or _MPI_ABORT_TEXT.search(msg):
        return SignatureKind.MPI_ABORT
    if other_crash_name(row) is not None:
        return SignatureKind.OTHER_CRASH
    return None


def other_crash_name(row: pd.Series) -> Optional[str]:
    """What crashed, in words, when an events row is a crash outside the pad step (a Python
    traceback, a C++ assertion or backtrace, an NCCL or CUDA failure), else None."""
    kind = _text(row, "kind")
    msg = _text(row, "message")
    failed = _text(row, "severity") in _FAILURE_SEVERITIES or kind in _TRACEBACK_KINDS \
        or kind in _CRASH_KINDS
    if not failed:
        return None
    if kind == K.NCCL_TIMEOUT or _NCCL_TEXT.search(msg):
        return "NCCL collective timeout" if "timeout" in (kind + msg).lower() else "NCCL error"
    if kind == K.CUDA_OOM or "out of memory" in msg.lower():
        return "CUDA out of memory"
    if kind == K.CUDA_DEVICE_ASSERT or "device-side assert" in msg:
        return "CUDA device-side assert"
    if _CUDA_TEXT.search(msg):
        return "CUDA error"
    m = _CPP_ASSERT_TEXT.search(msg)
    if m is not None and ("[TensorRT-LLM]" in msg or kind in (K.CPP_LOG, K.CPP_BACKTRACE)):
        cond = m.group("cond")
        return f"C++ assertion failed: {cond[:120]}" if cond else "C++ assertion failed"
    if kind in _TRACEBACK_KINDS:
        exc = _text(row, "exception_type") or "Python exception"
        func = _text(row, "innermost_function")
        return f"{exc} in {func}" if func else exc
    if kind == K.CPP_BACKTRACE:
        return "C++ exception (backtrace)"
    if kind == K.DIST_TIMEOUT:
        return "torch.distributed store timeout"
    return None


def _other_location(row: pd.Series) -> Optional[str]:
    """The source location an other-crash names in its message (``kvCacheManager.cpp:257``)."""
    msg = _text(row, "message")
    m = _CPP_ASSERT_TEXT.search(msg)
    if m and m.group("loc"):
        return m.group("loc")
    m = _SOURCE_LOCATION.search(msg)
    return m.group(0) if m else None


#: How specific a name is: a later print of the same crash with a more specific name renames it.
def _specificity(name: Optional[str]) -> int:
    if not name:
        return 0
    if name.startswith(("NCCL", "CUDA", "C++ assertion", "torch.distributed")):
        return 3
    if name.startswith("C++ exception"):
        return 1
    return 2


#: Event kinds that may be a signature whatever their text.
_SIGNATURE_KINDS = (K.ADP_ASSERT, K.ADP_SURPLUS_TOLERATED, K.ADP_DUMMY_ALLOC_FAILED,
                    K.ADP_DUMMY_NO_KV_CAPACITY, K.EVENT_LOOP_ERROR, K.MPI_ABORT) + _TRACEBACK_KINDS \
    + _CRASH_KINDS
_ANY_TEXT = re.compile("|".join(p.pattern for p in (_ASSERT_TEXT, _SURPLUS_TEXT, _ALLOC_TEXT,
                                                     _PRECHECK_TEXT, _EVENT_LOOP_TEXT,
                                                     _MPI_ABORT_TEXT)), re.I)
#: Text of an other-crash in a failure line (``[E]``, ``[ERROR]``).
_FAILURE_TEXT = re.compile("|".join(p.pattern for p in (_NCCL_TEXT, _CUDA_TEXT))
                           + r"|Assertion failed")


def _candidates(events: pd.DataFrame) -> pd.DataFrame:
    """The rows that may be signatures, selected vectorised (a big log has millions of events)."""
    kind = events["kind"].astype(str)
    msg = events["message"] if "message" in events.columns else pd.Series("", index=events.index)
    msg = msg.astype("string").fillna("")
    text = msg.str.contains(_ANY_TEXT, regex=True).to_numpy(dtype=bool)
    if "severity" in events.columns:
        failure = events["severity"].astype("string").isin(_FAILURE_SEVERITIES).to_numpy(
            dtype=bool, na_value=False)
        text |= failure & msg.str.contains(_FAILURE_TEXT, regex=True).to_numpy(dtype=bool)
    return events[kind.isin(_SIGNATURE_KINDS) | text]


def _infer_iter(iterations: pd.DataFrame | None, source: str, line: int,
                rank: Optional[int]) -> Optional[int]:
    """The ``iter`` of the last iteration line before ``line`` in ``source`` (same rank if any)."""
    if iterations is None or not len(iterations):
        return None
    it = iterations[(iterations["source"] == source) & (iterations["line"] < line)
                    & iterations["iter"].notna()]
    if rank is not None and "rank" in it.columns:
        same = it[it["rank"] == rank]
        if len(same):
            it = same
    if not len(it):
        return None
    return int(it.sort_values("line")["iter"].iloc[-1])


def find_signatures(events: pd.DataFrame, policies: Sequence[Policy], *,
                    config: RunConfig | None = None,
                    iterations: pd.DataFrame | None = None) -> list[Signature]:
    """Every crash-related event, matched to the policies that can produce it.

    Warnings of one kind on one rank are folded into their first occurrence with a ``count`` (a
    tolerant build may warn every iteration); crash events are kept one by one. Consequences (event-loop error, MPI abort) take
    the policies of the cause they follow.

    Args:
        events: the dataset's ``events`` table.
        policies: the versions to match against (usually the whole catalogue).
        config: the run configuration when a trace recorded it; None tries every path.
        iterations: the dataset's ``iterations`` table, to date tracebacks.

    Returns:
        Signatures in input order (source, line).
    """
    if events is None or not len(events):
        return []
    ev = _candidates(events).sort_values(["source", "line"], kind="stable").reset_index(drop=True)
    kinds = [classify(row) for _, row in ev.iterrows()]
    # A refused allocation or a failed KV precheck both leave a rank at batch 0.
    alloc_failures = any(k in (SignatureKind.ALLOC_FAILURE_WARNING,
                               SignatureKind.KV_PRECHECK_WARNING) for k in kinds)
    match = {k: policies_for(k, policies, config, alloc_failures=alloc_failures)
             for k in SignatureKind if k.is_cause}
    out: list[Signature] = []
    folded: dict[tuple, int] = {}
    for (_, row), kind in zip(ev.iterrows(), kinds):
        if kind is None:
            continue
        source, line = str(row["source"]), int(row["line"])
        rank = _opt_int(row.get("rank"))
        msg = _text(row, "message")
        key = (kind, rank)
        if not kind.is_crash and key in folded:
            i = folded[key]
            out[i] = dataclasses.replace(out[i], count=out[i].count + 1)
            continue
        again = _reprint_of(out, kind, source, line, rank, row)
        if again is not None:
            out[again] = dataclasses.replace(out[again], count=out[again].count + 1)
            continue
        if kind is SignatureKind.OTHER_CRASH:
            name = other_crash_name(row)
            same = _same_other_crash(out, source, line, rank)
            if same is not None:   # another print of that crash: the most specific name wins
                s = out[same]
                if _specificity(name) > _specificity(s.name):
                    s = dataclasses.replace(s, name=name, message=msg or s.message,
                                            code_location=_other_location(row) or s.code_location)
                out[same] = dataclasses.replace(s, count=s.count + 1,
                                                rank=s.rank if s.rank is not None else rank,
                                                line_end=max(s.line_end, _opt_int(
                                                    row.get("line_end")) or line))
                continue
        it = _opt_int(row.get("iter"))
        inferred = False
        if it is None and kind.is_crash:
            it = _infer_iter(iterations, source, line, rank)
            inferred = it is not None
        file = _text(row, "innermost_file")
        fline = _opt_int(row.get("innermost_line"))
        loc = (f"{file}:{fline}" if fline is not None else file) if file else None
        if kind is SignatureKind.OTHER_CRASH and loc is None:
            loc = _other_location(row)
        if kind.is_cause:
            names, reason = match[kind]
        else:
            names, reason = (), ""  # resolved below, once every cause is known
        sig = Signature(kind=kind, source=source, line=line, line_end=_opt_int(row.get("line_end")) or line,
                        rank=rank, iter=it, iter_inferred=inferred, message=msg, code_location=loc,
                        function=_text(row, "innermost_function") or None,
                        exception_type=_text(row, "exception_type") or None,
                        policies=names, reason=reason,
                        name=other_crash_name(row) if kind is SignatureKind.OTHER_CRASH else None)
        if not kind.is_crash:
            folded[key] = len(out)
        out.append(sig)
    for i, sig in enumerate(out):
        if sig.kind.is_cause:
            continue
        cause = _cause_before(out, sig.source, sig.line, sig.rank)
        if cause is not None:
            out[i] = dataclasses.replace(
                sig, policies=out[cause].policies, follows=cause,
                reason=f"follows the {out[cause].kind.value} at {out[cause].where}")
        else:
            out[i] = dataclasses.replace(
                sig, reason="no pad-dummy crash signature before it: not explained by the catalogue")
    return out


def _reprint_of(found: list[Signature], kind: SignatureKind, source: str, line: int,
                rank: Optional[int], row: pd.Series) -> Optional[int]:
    """Index of the crash this traceback prints again, or None.

    The executor logs "Error in event loop" with the traceback, then the thread re-raises it
    ("Exception in thread ... (_event_loop_wrapper)"): one crash, two tracebacks.
    """
    if kind not in (SignatureKind.ENTRY_ASSERT, SignatureKind.ALLOC_FAILURE_CRASH):
        return None
    func = _text(row, "innermost_function") or None
    for i in range(len(found) - 1, -1, -1):
        s = found[i]
        if (s.kind is kind and s.source == source and s.rank == rank and s.function == func
                and 0 < line - s.line <= FOLLOW_LINES + (s.line_end - s.line)):
            return i
    return None


def _same_other_crash(found: list[Signature], source: str, line: int,
                      rank: Optional[int]) -> Optional[int]:
    """Index of the other-crash this event prints again (same file, same rank or one unknown,
    within ``FOLLOW_LINES`` of its end), or None."""
    for i in range(len(found) - 1, -1, -1):
        s = found[i]
        if (s.kind is SignatureKind.OTHER_CRASH and s.source == source
                and (s.rank == rank or s.rank is None or rank is None)
                and 0 <= line - s.line_end <= FOLLOW_LINES):
            return i
    return None


def _cause_before(found: list[Signature], source: str, line: int, rank: Optional[int]) -> Optional[int]:
    """Index of the crash cause (assert or allocation crash) a consequence follows.

    In the same file: the latest cause from ``LEAD_LINES`` after it to ``FOLLOW_LINES`` before it
    (same rank when both name one). Files of other ranks carry no common clock, so a cause in another file counts
    wherever it is; a same-file cause wins.
    """
    same = other = None
    for i, s in enumerate(found):
        if not s.kind.is_cause or not s.kind.is_crash:
            continue
        if s.source != source:
            other = i if other is None else other
            continue
        if not (-LEAD_LINES <= line - s.line <= FOLLOW_LINES + (s.line_end - s.line)):
            continue
        if rank is not None and s.rank is not None and s.rank != rank:
            continue
        same = i
    return same if same is not None else other


def excerpt(sig: Signature, *, max_lines: int = 12) -> str:
    """The event's lines verbatim from its input when still readable, else its parsed details.

    Abridged tracebacks carry no message of their own; the original lines say most.
    """
    try:
        from forensics.readers.sources import open_binary
        lines: list[str] = []
        with open_binary(sig.source) as f:
            for n, raw in enumerate(f, start=1):
                if n > sig.line_end or len(lines) >= max_lines:
                    break
                if n >= sig.line:
                    lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
        if lines:
            more = sig.line_end - sig.line + 1 - len(lines)
            return "\n".join(lines) + (f"\n... ({more} more lines)" if more > 0 else "")
    except Exception:  # the input moved or is unreadable: fall back to what was parsed
        pass
    parts = [p for p in (sig.exception_type, sig.message) if p]
    where = " ".join(p for p in (f"in {sig.function}" if sig.function else "",
                                 f"({sig.code_location})" if sig.code_location else "") if p)
    return ": ".join(parts) + (f" {where}" if where else "") if parts or where else sig.kind.value


def outside_catalogue(sig: Signature) -> str:
    """Why a crash that is no pad-dummy signature stays unexplained: the crash named, where it
    is, and what the tool can and cannot say about it."""
    at = f" at {sig.code_location}" if sig.code_location else ""
    who = f", rank {sig.rank}" if sig.rank is not None else ""
    when = (f", after iteration {sig.iter}" if sig.iter_inferred else f", iteration {sig.iter}") \
        if sig.iter is not None else ""
    return (f"the logs show a crash the catalogue does not model: {sig.title}{at} (logged at "
            f"{sig.where}{who}{when}), with no pad-dummy signature before it (no pad-step "
            "assertion, surplus warning or dummy allocation failure); the tool can say where and "
            "when it was logged, not why: its replays model only the attention-DP pad step")


def crash_in_logs(signatures: Iterable[Signature]) -> Optional[Signature]:
    """The crash the logs show: the first pad-dummy crash cause, else the first crash the
    catalogue does not model (``other-crash``), else the first consequence (MPI abort, ...)."""
    sigs = list(signatures)
    for s in sigs:
        if s.kind.is_crash and s.kind.is_cause:
            return s
    for s in sigs:
        if s.kind is SignatureKind.OTHER_CRASH:
            return s
    for s in sigs:
        if s.kind.is_crash:
            return s
    return None


__all__ = [
    "PAD_FUNCTION",
    "REPLAY_CRASH_KIND",
    "Signature",
    "SignatureKind",
    "classify",
    "crash_in_logs",
    "excerpt",
    "find_signatures",
    "other_crash_name",
    "outside_catalogue",
    "leak_paths",
    "policies_for",
    "predicate_wider_than_scheduler",
]
