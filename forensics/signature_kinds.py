"""What a crash-related log event is: the signature kinds and the rules that classify an
``events`` row (``forensics.readers.event_kinds``) as one of them.

:func:`classify` names the kind of one row; :func:`other_crash_name` names a crash outside the pad
step (``C++ assertion failed: mNextBlocks.empty()``, ``KeyError in process_res``, ``NCCL error``);
:func:`candidate_events` selects, vectorised, the rows that may be signatures at all. The table of
kinds and what produces each is in :mod:`forensics.crash_signatures`.
"""
from __future__ import annotations

import enum
import re
from typing import Optional

import numpy as np
import pandas as pd

from forensics.readers import event_kinds as K

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



def row_text(row: pd.Series, name: str) -> str:
    v = row.get(name)
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else str(v)


def row_int(v) -> Optional[int]:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return int(v)


def classify(row: pd.Series) -> Optional[SignatureKind]:
    """The signature kind of one events row, or None when it is not crash-related."""
    kind = row_text(row, "kind")
    msg = row_text(row, "message")
    func = row_text(row, "innermost_function")
    exc = row_text(row, "exception_type")
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
    kind = row_text(row, "kind")
    msg = row_text(row, "message")
    failed = row_text(row, "severity") in _FAILURE_SEVERITIES or kind in _TRACEBACK_KINDS \
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
        exc = row_text(row, "exception_type") or "Python exception"
        func = row_text(row, "innermost_function")
        return f"{exc} in {func}" if func else exc
    if kind == K.CPP_BACKTRACE:
        return "C++ exception (backtrace)"
    if kind == K.DIST_TIMEOUT:
        return "torch.distributed store timeout"
    return None


def crash_location(row: pd.Series) -> Optional[str]:
    """The source location an other-crash names in its message (``kvCacheManager.cpp:257``)."""
    msg = row_text(row, "message")
    m = _CPP_ASSERT_TEXT.search(msg)
    if m and m.group("loc"):
        return m.group("loc")
    m = _SOURCE_LOCATION.search(msg)
    return m.group(0) if m else None


#: How specific a name is: a later print of the same crash with a more specific name renames it.
def name_specificity(name: Optional[str]) -> int:
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


def candidate_events(events: pd.DataFrame) -> pd.DataFrame:
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



__all__ = [
    "PAD_FUNCTION",
    "REPLAY_CRASH_KIND",
    "SignatureKind",
    "candidate_events",
    "classify",
    "crash_location",
    "name_specificity",
    "other_crash_name",
    "row_int",
    "row_text",
]
