"""Leaks grouped by mechanism: one paragraph for the many dummies one cause leaks.

A replay of the NVBug 6438685 sample leaks 22 dummies under the 2026 build, every one the same
way: a rank holding only requests the scheduler refuses gets no dummy, offers batch 0, the
fleet skips the step and the dummies padded on the other ranks stay. Told leak by leak that is
22 near-identical paragraphs. A :class:`Mechanism` is the leaks that share why the batch was
zero (:func:`replay.explain.zero_batch_kind` of each cause rank), the dummy's role and origin,
and why the skip did not roll it back; it counts them, says what became of them, and names
the fatal one (the dummy the crash follows from). The per-leak chains stay in
:func:`replay.explain.explain`.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING

from replay.explain import (describe_requests, leak_origin, leak_outcome, ledger_entry, removal_text,
                            replayed_config, rollback_clause, zero_batch_kind)
from replay.states import micro_batch_window

if TYPE_CHECKING:  # pragma: no cover
    from replay.results import Leak, ReplayResult


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """Leaks that happened the same way.

    Fields:
        causes: why the cause ranks offered batch 0 (:data:`replay.explain.ZERO_BATCH_KINDS`),
            sorted, each once.
        role: the leaked dummies' role (``generation``, ``context``).
        origin: ``padded`` or ``post-padded``.
        rollback: why the skip did not roll the dummies back (``""`` when nothing to say).
        leaks: the leaks, the fatal one first, then in ledger order.
        outcomes: how many leaks ended each way (:data:`replay.explain.OUTCOMES`).
        fatal: the leak the crash follows from, when it is one of these.
        text: the paragraph that tells it.
    """

    causes: tuple[str, ...]
    role: str
    origin: str
    rollback: str
    leaks: tuple["Leak", ...]
    outcomes: dict[str, int]
    fatal: "Leak | None"
    text: str

    @property
    def skipped_iters(self) -> tuple[int, ...]:
        """The fleet-wide skips these dummies survived first, in order, each once."""
        return tuple(sorted({int(lk.iter_skipped) for lk in self.leaks}))


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _iters(iters: tuple[int, ...], limit: int = 6) -> str:
    shown = ", ".join(str(i) for i in iters[:limit])
    more = len(iters) - limit
    return shown + (f", ... ({more} more)" if more > 0 else "")


def _why(res: ReplayResult, kind: str) -> str:
    pol = res.policy
    if kind == "predicate_wider":
        pred = pol.predicate(replayed_config(res))
        window = micro_batch_window(res.config.encoder_decoder)
        return (f"{pol.name}'s pad predicate ({pred.describe()}) counts requests outside the "
                f"scheduler's window {window!r}, so a rank holding only those got no dummy and "
                f"offered batch 0")
    if kind == "alloc_refused":
        return (f"add_dummy_requests returned None on a rank that needed a dummy, so {pol.name} "
                f"skipped padding and the rank offered batch 0")
    if kind == "scheduler_refused":
        return ("the pad predicate counted requests as schedulable but the scheduler took none "
                "of them (e.g. no KV capacity), so a rank got no dummy and offered batch 0")
    if kind == "expected_zero":
        return "a rank whose expected_num_active_requests was 0 got no dummy and offered batch 0"
    return "a rank got no dummy and offered batch 0"


def _fates(res: ReplayResult, leaks: tuple[Leak, ...], kinds: list[str]) -> str:
    """``21 were removed later by _update_request_states_tp (...)``: the non-fatal outcomes."""
    parts = []
    removed = [lk for lk, k in zip(leaks, kinds) if k in ("removed", "warned", "raised_floor")]
    if removed:
        paths = Counter(str(ledger_entry(res, lk).removal_path) for lk in removed)
        how = "; ".join(f"{n} by {removal_text(p)}" if len(paths) > 1 else f"by {removal_text(p)}"
                        for p, n in paths.most_common())
        parts.append(f"{_plural(len(removed), 'was', 'were')} removed later, {how}")
    warned = kinds.count("warned")
    if warned:
        parts.append(f"{warned} of them first made a rank count above expected ({res.policy.name} "
                     f"only warns, PR #17278)")
    floor = kinds.count("raised_floor")
    if floor:
        parts.append(f"{floor} of them first raised expected above pp_size*max_batch_size = {res.config.cap} "
                     f"({res.policy.name} has no cap, so no assert)")
    alive = kinds.count("alive")
    if alive:
        end = (f"when the run stopped at iter {res.crash.iter}" if res.crash is not None
               else "at the end of the trace")
        parts.append(f"{_plural(alive, 'was', 'were')} still alive {end}")
    return "; ".join(parts)


def mechanisms(res: ReplayResult) -> list[Mechanism]:
    """The result's leaks grouped by mechanism, the one holding the fatal leak first, then in
    the order of their first leak. Reads the decisions, frames and ledger rows of the leaks
    (a streamed result: :meth:`ReplayResult.mechanisms` passes the rows the chains need)."""
    groups: dict[tuple, list[Leak]] = {}
    for leak in res.leak_records:             # the fatal leak first, then ledger order
        causes = tuple(sorted({zero_batch_kind(res, leak.iter_skipped, c)
                               for c in leak.cause_ranks}))
        key = (causes, leak.role, leak_origin(res, leak), rollback_clause(res, leak))
        groups.setdefault(key, []).append(leak)
    out = []
    for (causes, role, origin, rollback), members in groups.items():
        leaks = tuple(members)
        kinds = [leak_outcome(res, lk)[0] for lk in leaks]
        fatal = res.fatal_leak if res.fatal_leak in leaks else None
        out.append(Mechanism(causes=causes, role=role, origin=origin, rollback=rollback,
                             leaks=leaks, outcomes=dict(Counter(kinds)), fatal=fatal,
                             text=_text(res, causes, role, origin, rollback, leaks, kinds, fatal)))
    return out


def _text(res, causes, role, origin, rollback, leaks, kinds, fatal) -> str:
    skips = tuple(sorted({int(lk.iter_skipped) for lk in leaks}))
    example = fatal if fatal is not None else leaks[0]
    cause = example.cause_ranks[0] if example.cause_ranks else None
    head = (f"{_plural(len(leaks), f'{role} dummy', f'{role} dummies')} {origin} and leaked at "
            f"{_plural(len(skips), 'fleet-wide skip', 'fleet-wide skips')} "
            f"(iter{'s' if len(skips) > 1 else ''} {_iters(skips)}): ")
    why = " and ".join(_why(res, k) for k in causes) if causes else "a rank offered batch 0"
    if cause is not None:
        fr = res.frames
        i = int(fr.iters.searchsorted(example.iter_skipped))
        why += (f" (at iter {example.iter_skipped} rank {cause} held "
                f"{describe_requests(fr.requests_of(i, cause))})")
    text = (head + why + "; can_queue went False everywhere, the step and the request-state "
            "update were skipped, and the dummies padded on the other ranks stayed"
            + (f" ({rollback})." if rollback else "."))
    rest = [k for lk, k in zip(leaks, kinds) if lk is not fatal]
    fates = _fates(res, tuple(lk for lk in leaks if lk is not fatal), rest)
    if fates:
        text += " " + fates[0].upper() + fates[1:] + "."
    if fatal is not None:
        text += (f" Fatal: the dummy {origin} on rank {fatal.rank} at iter {fatal.iter_created}; "
                 + leak_outcome(res, fatal)[1])
    return text


__all__ = ["Mechanism", "mechanisms"]
