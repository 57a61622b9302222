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

What each kind is and how an events row is classified: :mod:`forensics.signature_kinds`;
which versions can produce it ("a path that can leak"): :mod:`forensics.signature_policies`.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Sequence

import pandas as pd

from forensics.readers.sources import open_binary
from forensics.signature_kinds import (
    SignatureKind,
    candidate_events,
    classify,
    crash_location,
    name_specificity,
    other_crash_name,
    row_int,
    row_text,
)
from forensics.signature_policies import policies_for
from replay.config import RunConfig
from replay.policy import Policy

#: A consequence (event-loop error, MPI abort) counts as following a cause within this many lines
#: of the same source, or anywhere later in another source.
FOLLOW_LINES = 200
#: ... or at most this many lines before it: "Error in event loop: ..." is logged just before
#: the traceback it introduces.
LEAD_LINES = 3


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
    ev = candidate_events(events).sort_values(["source", "line"], kind="stable").reset_index(drop=True)
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
        rank = row_int(row.get("rank"))
        msg = row_text(row, "message")
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
                if name_specificity(name) > name_specificity(s.name):
                    s = dataclasses.replace(s, name=name, message=msg or s.message,
                                            code_location=crash_location(row) or s.code_location)
                out[same] = dataclasses.replace(s, count=s.count + 1,
                                                rank=s.rank if s.rank is not None else rank,
                                                line_end=max(s.line_end, row_int(
                                                    row.get("line_end")) or line))
                continue
        it = row_int(row.get("iter"))
        inferred = False
        if it is None and kind.is_crash:
            it = _infer_iter(iterations, source, line, rank)
            inferred = it is not None
        file = row_text(row, "innermost_file")
        fline = row_int(row.get("innermost_line"))
        loc = (f"{file}:{fline}" if fline is not None else file) if file else None
        if kind is SignatureKind.OTHER_CRASH and loc is None:
            loc = crash_location(row)
        if kind.is_cause:
            names, reason = match[kind]
        else:
            names, reason = (), ""  # resolved below, once every cause is known
        sig = Signature(kind=kind, source=source, line=line, line_end=row_int(row.get("line_end")) or line,
                        rank=rank, iter=it, iter_inferred=inferred, message=msg, code_location=loc,
                        function=row_text(row, "innermost_function") or None,
                        exception_type=row_text(row, "exception_type") or None,
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
    func = row_text(row, "innermost_function") or None
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
    "FOLLOW_LINES",
    "LEAD_LINES",
    "Signature",
    "crash_in_logs",
    "excerpt",
    "find_signatures",
    "outside_catalogue",
]
