"""The catalogue of executor versions, by stable name. Adding a version touches this file only.

Each entry cites the upstream pull request it models; the facts are paraphrased in
``../shared/docs/adp-executor.md`` §5-6 (no upstream code is copied here).
"""
from __future__ import annotations

from replay.policy import AllocFailure, EntryCheck, Policy, Predicate
from replay.errors import PolicyError

_LEGACY = Policy(
    name="legacy-2025",
    title="2025 executor: legacy predicate, no cap on expected",
    prs=("#12208 (predicate later moved, same count)",),
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=False,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    notes=("expected = max(ceil(total/tp), max(counts)) has no cap, so a leaked dummy raises the "
           "floor and the entry assert cannot trip: dummies leak silently."),
)

_PREFIX = Policy(
    name="prefix-2026",
    title="2026 build before the fix: legacy predicate, cap on expected, assert (NVBug 6438685)",
    prs=("#12208", "NVBug 6438685"),
    disagg_predicate=Predicate.NOT_AWAITING_KV,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.CRASH,
    notes=("GENERATION_TO_COMPLETE counts as schedulable but the scheduler refuses it; a rank "
           "holding only such requests schedules 0, the fleet skips, padded dummies leak and a "
           "rank at the cap plus its leaked dummy asserts."),
)

_FIX = Policy(
    name="fix-16161",
    title="window predicate on the disaggregated path, None-guarded dummy allocation",
    prs=("#16161", "#16279"),
    disagg_predicate=Predicate.WINDOW,
    aggregated_predicate=Predicate.ALL,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.SKIP,
    notes=("The aggregated path (no transceiver) keeps counting GENERATION_TO_COMPLETE on purpose "
           "(an upstream test pins it), so dummies can still leak there. #16279 merged the change "
           "scoped to one model family; #16161 was closed as its duplicate."),
)

_SCHED = Policy(
    name="sched-aware-16921",
    title="scheduler-aware predicate, pending dummy rolled back when the fleet skips",
    prs=("#16921",),
    disagg_predicate=Predicate.SCHEDULER,
    aggregated_predicate=Predicate.ALL,
    scheduler_gate_pp1=True,
    cap=True,
    entry_check=EntryCheck.ASSERT,
    alloc_failure=AllocFailure.SKIP,
    rollback_on_skip=True,
    notes=("Delegation and the transactional dummy apply with a transceiver and pp_size 1; "
           "pipeline-parallel and aggregated runs stay on the legacy count and a plain dummy."),
)

_TOLERANT = Policy(
    name="tolerant-17278",
    title="surplus warning instead of the entry assert",
    prs=("#17278", "#16921"),
    disagg_predicate=Predicate.SCHEDULER,
    aggregated_predicate=Predicate.ALL,
    scheduler_gate_pp1=True,
    cap=True,
    entry_check=EntryCheck.WARN,
    alloc_failure=AllocFailure.SKIP,
    rollback_on_skip=True,
    notes="A leaked dummy no longer crashes the fleet; it is warned about and wastes capacity.",
)

_POSTPAD = Policy(
    name="postpad-17379",
    title="post-schedule padding of an empty batch",
    prs=("#17379", "#17278", "#16921"),
    disagg_predicate=Predicate.SCHEDULER,
    aggregated_predicate=Predicate.ALL,
    scheduler_gate_pp1=True,
    cap=True,
    entry_check=EntryCheck.WARN,
    alloc_failure=AllocFailure.SKIP,
    rollback_on_skip=True,
    postpad_empty_batch=True,
    notes=("A rank with active requests but an empty batch gets a generation dummy after "
           "scheduling (if below the cap and the dummy can be allocated), so it no longer "
           "forces a fleet-wide skip."),
)

_NEWEST = Policy(
    name="newest",
    title="newest main: scheduler-aware, transactional, tolerant, post-pad, refused dummy tolerated",
    prs=("#18157", "#17379", "#17278", "#16921", "#16161"),
    disagg_predicate=Predicate.SCHEDULER,
    aggregated_predicate=Predicate.ALL,
    scheduler_gate_pp1=True,
    cap=True,
    entry_check=EntryCheck.WARN,
    alloc_failure=AllocFailure.SKIP,
    rollback_on_skip=True,
    postpad_empty_batch=True,
    notes=("Pipeline-parallel and aggregated ADP stay on the legacy count, so a dummy can still "
           "leak there (now only warned about)."),
)

#: Every catalogue policy by name, oldest first.
CATALOGUE: dict[str, Policy] = {p.name: p for p in
                                (_LEGACY, _PREFIX, _FIX, _SCHED, _TOLERANT, _POSTPAD, _NEWEST)}


def get_policy(name: str) -> Policy:
    """Look a catalogue policy up by name, with the known names in the error."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}",
                          hint="known policies: " + ", ".join(CATALOGUE)) from None


def policy_names() -> list[str]:
    return list(CATALOGUE)
