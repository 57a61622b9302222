"""What an executor version does around the pad dummy, as data (domain doc §4-7).

A :class:`Policy` is a frozen record of behaviours; the step semantics in ``replay.step`` read
it. The catalogue of named versions is ``replay.catalogue``; adding a version touches that file only.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Optional

import numpy as np

from replay.config import RunConfig
from replay.states import (ALL_STATES, NOT_SCHEDULABLE_STATES, RequestState, micro_batch_window,
                           states_mask)


class Predicate(enum.Enum):
    """How ``num_schedulable`` is counted before deciding to pad."""

    #: ``len(active_requests)``: every request counts (aggregated path, every version).
    ALL = "all"
    #: 2025 legacy with a transceiver: all but DISAGG_GENERATION_INIT / _TRANS_IN_PROGRESS
    #: (so GENERATION_TO_COMPLETE and DISAGG_CONTEXT_WAIT_SCHEDULER count).
    NOT_AWAITING_KV = "not-awaiting-kv"
    #: PR #16161/#16279: the micro-batch window ``[CONTEXT_INIT, GENERATION_TO_COMPLETE)``.
    WINDOW = "window"
    #: PR #16921: ``scheduler.is_request_in_schedulable_state`` (7, 8, 9 refused, else the window).
    SCHEDULER = "scheduler"

    def mask(self, config: RunConfig) -> np.ndarray:
        """Boolean mask over ``ALL_STATES`` of the states this predicate counts."""
        if self is Predicate.ALL:
            return np.ones(len(ALL_STATES), dtype=bool)
        if self is Predicate.NOT_AWAITING_KV:
            return ~states_mask([RequestState.DISAGG_GENERATION_INIT,
                                 RequestState.DISAGG_GENERATION_TRANS_IN_PROGRESS])
        window = micro_batch_window(config.encoder_decoder).mask()
        if self is Predicate.WINDOW:
            return window
        return window & ~states_mask(NOT_SCHEDULABLE_STATES)

    def describe(self) -> str:
        return {
            Predicate.ALL: "len(active_requests): every request counts",
            Predicate.NOT_AWAITING_KV: ("requests not awaiting KV (all but DISAGG_GENERATION_INIT and "
                                        "DISAGG_GENERATION_TRANS_IN_PROGRESS; GENERATION_TO_COMPLETE counts)"),
            Predicate.WINDOW: "requests in the scheduler window [CONTEXT_INIT, GENERATION_TO_COMPLETE)",
            Predicate.SCHEDULER: "scheduler.is_request_in_schedulable_state (window, minus states 7/8/9)",
        }[self]


class EntryCheck(enum.Enum):
    """What happens when ``len(active_requests) > expected_num_active_requests`` at pad entry."""

    ASSERT = "assert"   # AssertionError: the rank's event loop dies, the fleet follows
    WARN = "warn"       # PR #17278: "active_requests (N) exceeds expected ...; tolerating"


class AllocFailure(enum.Enum):
    """What happens when ``kv_cache_manager.add_dummy_requests`` returns None."""

    CRASH = "crash"     # result used unchecked: TypeError on None[0]
    SKIP = "skip"       # PR #16161: warn "Cannot allocate ... pad dummy" and skip padding


@dataclasses.dataclass(frozen=True)
class Policy:
    """One executor version's behaviour around the pad dummy.

    Fields:
        name: stable catalogue name (``prefix-2026``).
        title: one-line description.
        prs: upstream pull requests it models (``"#16161"``), most relevant first.
        disagg_predicate: the count with a KV-cache transceiver (disaggregated serving).
        aggregated_predicate: the count without one.
        scheduler_gate_pp1: the disaggregated predicate and the transactional dummy apply only
            when ``pp_size == 1``; otherwise the legacy count and plain dummy are used (PR #16921).
        cap: ``expected_num_active_requests`` is capped at ``max_num_active_requests``.
        entry_check: assert or warn on a surplus at pad entry.
        alloc_failure: behaviour when the dummy cannot be allocated.
        rollback_on_skip: a dummy padded this iteration is rolled back by
            ``_finalize_adp_dummy_allocation(False)`` when the fleet skips (PR #16921).
        postpad_empty_batch: after scheduling, a rank with active requests and an empty batch gets
            a generation dummy if below the cap (PR #17379).
        notes: further facts worth stating in reports.
        pad_hook: when set, the pad step of each (iter, rank) is decided by calling it with a
            :class:`FrameView` (real TensorRT-LLM code or a user's candidate, issue #6) instead of
            the vectorised predicate; the rest of the loop follows this policy's other fields.
        source: where a hooked policy's code came from (path, revision), for reports.
    """

    name: str
    title: str
    prs: tuple[str, ...]
    disagg_predicate: Predicate
    aggregated_predicate: Predicate = Predicate.ALL
    scheduler_gate_pp1: bool = False
    cap: bool = True
    entry_check: EntryCheck = EntryCheck.ASSERT
    alloc_failure: AllocFailure = AllocFailure.CRASH
    rollback_on_skip: bool = False
    postpad_empty_batch: bool = False
    notes: str = ""
    pad_hook: Optional[Callable[["FrameView"], "PadOutcome"]] = dataclasses.field(
        default=None, compare=False, repr=False)
    source: str = ""

    def gated(self, config: RunConfig) -> bool:
        """True when the version's newest (disaggregated, transactional) path is active."""
        return config.disaggregated and (not self.scheduler_gate_pp1 or config.pp_size == 1)

    def predicate(self, config: RunConfig) -> Predicate:
        """The predicate this version uses for a run of this configuration."""
        if not config.disaggregated:
            return self.aggregated_predicate
        if self.scheduler_gate_pp1 and config.pp_size != 1:
            return Predicate.NOT_AWAITING_KV
        return self.disagg_predicate

    def rolls_back(self, config: RunConfig) -> bool:
        """Whether a pending dummy is rolled back on a skipped iteration for this configuration."""
        return self.rollback_on_skip and self.gated(config)

    def describe(self) -> dict[str, object]:
        """A plain summary for reports and ``--json`` output."""
        return {
            "name": self.name,
            "title": self.title,
            "prs": list(self.prs),
            "predicate_disaggregated": self.disagg_predicate.describe(),
            "predicate_aggregated": self.aggregated_predicate.describe(),
            "scheduler_gate_pp1": self.scheduler_gate_pp1,
            "expected_capped": self.cap,
            "entry_check": self.entry_check.value,
            "alloc_failure": self.alloc_failure.value,
            "removal_paths": self.removal_paths(),
            "rollback_on_skip": self.rollback_on_skip,
            "postpad_empty_batch": self.postpad_empty_batch,
            "notes": self.notes,
        }

    def removal_paths(self) -> list[str]:
        """Where a dummy can be removed under this version (domain doc §7)."""
        paths = ["update_states_tp (last element only, when can_queue)",
                 "handle_responses (anywhere in the list, when responses are handled)"]
        if self.rollback_on_skip:
            paths.append("finalize_adp_dummy_allocation(can_queue=False) rollback of a pending dummy")
        return paths


@dataclasses.dataclass(frozen=True)
class FrameView:
    """What a per-frame pad hook sees: one rank's ``active_requests`` at pad entry.

    Fields:
        iter, rank: the frame's key.
        requests: ``(request_id, state_value, is_dummy)`` in list order, the policy's carried
            dummy (if any) included at its position.
        expected: ``expected_num_active_requests`` this iteration.
        config: the run configuration.
        alloc_ok: False when ``add_dummy_requests`` must return None this iteration.
        new_requests: how many real requests were first seen on this rank this iteration (the
            recording routed them; see ``replay.step.over_expected`` for why this matters).
    """

    iter: int
    rank: int
    requests: tuple[tuple[int, int, bool], ...]
    expected: int
    config: RunConfig
    alloc_ok: bool = True
    new_requests: int = 0


@dataclasses.dataclass(frozen=True)
class PadOutcome:
    """What a pad hook decided for one frame.

    Fields:
        padded: a dummy was appended.
        role: ``"generation"`` or ``"context"`` for the appended dummy.
        alloc_failed: the dummy was wanted but could not be allocated (and was skipped).
        crash: the code raised; ``"ExceptionType: message"`` (the run stops here).
        surplus_warning: the code warned about ``len(active) > expected`` and went on.
        warnings: every warning the code logged, verbatim.
    """

    padded: bool
    role: str = "generation"
    alloc_failed: bool = False
    crash: Optional[str] = None
    surplus_warning: bool = False
    warnings: tuple[str, ...] = ()
