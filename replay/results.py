"""What a replay returns: decisions, the dummy ledger, leaks, the crash point, divergence.

Columns of :attr:`ReplayResult.decisions` (one row per replayed (iter, rank); rows stop at the
crash iteration):

    iter, rank            the frame's key
    active                len(active_requests) all-gathered at fetch (carried dummy included)
    real                  real requests in the frame
    schedulable           the pad predicate's count (real requests it counts + carried dummy)
    window_real           real requests in the micro-batch window
    expected              expected_num_active_requests
    expected_source       'recorded' | 'computed'
    carried_dummy         a dummy of this policy survived from an earlier iteration
    carried_last          that dummy is the last element of active_requests
    padded                the pad step appended a dummy
    pad_role              'context' | 'generation' | None
    alloc_failed          a dummy was wanted but could not be allocated (warning, no dummy)
    postpadded            a generation dummy was appended after scheduling (PR #17379)
    batch                 batch size offered to _can_queue (dummy included); NA on a crashed rank
    can_queue             fleet-wide decision; NA at the crash iteration
    can_queue_this_rank   batch > 0; NA at the crash iteration
    processed_prev        the previous batch was processed (§4); NA at the crash iteration
    surplus               active > expected at pad entry
    crash                 the rank died here (assert, failed allocation or hook exception)
    removed_path          how a dummy left this rank this iteration, or None
    dummy_alive           a dummy of this policy is on the rank after the iteration

Columns of :attr:`ReplayResult.ledger` (one row per dummy the policy created, by creation order):

    dummy                 sequence number (0-based)
    rank, iter_created    where and when it was created
    origin                'pad' | 'postpad'
    role                  'context' | 'generation'
    iter_removed          iteration it was removed, or NA (alive at the end or the run stopped)
    removal_path          'update_states_tp' | 'handle_responses' | 'rollback' | None
    skips_survived        skipped iterations it lived through
    leaked                skips_survived > 0
"""
from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from replay.config import RunConfig
from replay.policy import Policy

DECISION_COLUMNS = ("iter", "rank", "active", "real", "schedulable", "window_real", "expected",
                    "expected_source", "carried_dummy", "carried_last", "padded", "pad_role",
                    "alloc_failed", "postpadded", "batch", "can_queue", "can_queue_this_rank",
                    "processed_prev", "surplus", "crash", "removed_path", "dummy_alive")
LEDGER_COLUMNS = ("dummy", "rank", "iter_created", "origin", "role", "iter_removed",
                  "removal_path", "skips_survived", "leaked")
#: Recorded decisions compared with the replay, in this order at equal (iter, rank).
#: ``postpadded`` is compared only where a frame records it (traces/FORMAT.md).
DIVERGENCE_FIELDS = ("padded", "postpadded", "scheduled", "can_queue")


@dataclasses.dataclass(frozen=True)
class Leak:
    """A dummy that survived a skipped iteration.

    Fields:
        rank: the rank holding the dummy.
        iter_created: when the policy padded it.
        iter_skipped: the first skipped iteration it survived.
        cause_ranks: ranks whose zero batch made ``can_queue`` False at ``iter_skipped``.
        cause_states: per cause rank, its real requests ``(request_id, state_name)`` in list order.
        role: the dummy's role.
        dummy: its ledger sequence number.
    """

    rank: int
    iter_created: int
    iter_skipped: int
    cause_ranks: tuple[int, ...]
    cause_states: dict[int, tuple[tuple[int, str], ...]]
    role: str = "generation"
    dummy: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "iter_created": self.iter_created,
                "iter_skipped": self.iter_skipped, "cause_ranks": list(self.cause_ranks)}


#: Columns of :attr:`Leaks.df` (one row per leaked dummy).
LEAK_TABLE_COLUMNS = ("dummy", "rank", "role", "iter_created", "iter_skipped", "cause_ranks")


class Leaks(tuple):
    """The leaked dummies: a tuple of :class:`Leak` records that is also a table.

    ``res.leaks[0]``, ``len(res.leaks)`` and iteration give the records; ``res.leaks.df`` is the
    same as a DataFrame (columns ``LEAK_TABLE_COLUMNS``, the columns of ``inv.leaks`` without
    ``policy``), which notebooks display as a table.
    """

    __slots__ = ()

    @property
    def records(self) -> tuple["Leak", ...]:
        return tuple(self)

    @property
    def df(self) -> pd.DataFrame:
        return pd.DataFrame([{"dummy": x.dummy, "rank": x.rank, "role": x.role,
                              "iter_created": x.iter_created, "iter_skipped": x.iter_skipped,
                              "cause_ranks": tuple(x.cause_ranks)} for x in self],
                            columns=list(LEAK_TABLE_COLUMNS))

    def to_frame(self) -> pd.DataFrame:
        return self.df

    def _repr_html_(self) -> str:
        return self.df._repr_html_()

    def __repr__(self) -> str:
        if not self:
            return "Leaks(none)"
        return (f"Leaks({len(self)}: first on rank {self[0].rank} through the skip of iteration "
                f"{self[0].iter_skipped}; .df for the table)")


@dataclasses.dataclass(frozen=True)
class Crash:
    """Where the run stops.

    Fields:
        iter: the iteration.
        rank: the lowest crashing rank.
        ranks: every crashing rank.
        kind: 'assert' (entry assert), 'dummy_alloc_none' (TypeError on a None dummy) or 'hook'.
        expected: ``expected_num_active_requests`` on ``rank``.
        active: ``len(active_requests)`` on ``rank``.
        message: what the executor would raise.
    """

    iter: int
    rank: int
    ranks: tuple[int, ...]
    kind: str
    expected: int
    active: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"iter": self.iter, "rank": self.rank, "expected": self.expected, "active": self.active}


@dataclasses.dataclass(frozen=True)
class Divergence:
    """The first recorded decision the replay does not reproduce.

    Fields:
        iter, rank: the frame.
        field: 'padded', 'scheduled' or 'can_queue'.
        recorded, replayed: the two values.
    """

    iter: int
    rank: int
    field: str
    recorded: Any
    replayed: Any

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, eq=False)
class ReplayResult:
    """A run replayed under one policy.

    Fields:
        policy: the policy.
        config: the configuration replayed.
        run: the run key.
        decisions: per (iter, rank) decisions, columns in the module docstring.
        ledger: one row per dummy, columns in the module docstring.
        leaks: leaked dummies in ledger order.
        crash: where the run stopped, or None.
        skipped_iters: iterations the fleet skipped (``can_queue`` False), in order.
        first_divergence: first recorded decision not reproduced, or None.
        notes: remarks for reports (dropped iterations, assumptions hit).
        dropped_iters: iterations not replayed because some rank had no frame.
        frames: the replayed frames (for explanations).
    """

    policy: Policy
    config: RunConfig
    run: str
    decisions: pd.DataFrame
    ledger: pd.DataFrame
    leaks: tuple[Leak, ...]
    crash: Crash | None
    skipped_iters: tuple[int, ...]
    first_divergence: Divergence | None
    notes: tuple[str, ...] = ()
    dropped_iters: tuple[int, ...] = ()
    frames: Any = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.leaks, Leaks):
            object.__setattr__(self, "leaks", Leaks(self.leaks))

    def __repr__(self) -> str:
        """What, how big, the verdict (not the decision tables)."""
        what = {"crash": (f"crash at iteration {self.crash.iter} on rank {self.crash.rank} "
                          f"({self.crash.kind})" if self.crash is not None else ""),
                "leak": "leak", "clean": "clean"}[self.verdict]
        n = len(self.leaks)
        leaks = f", {n} leaked dumm{'y' if n == 1 else 'ies'}" if n else ""
        iters = int(self.decisions["iter"].nunique()) if len(self.decisions) else 0
        return (f"<ReplayResult {self.policy.name} on {self.run!r}: {what}{leaks}; {iters} "
                f"iterations x {self.config.tp_size} ranks, {len(self.ledger)} dummies, "
                f"{len(self.skipped_iters)} fleet-wide skips>")

    @property
    def ok(self) -> bool:
        """No leak and no crash."""
        return not self.leaks and self.crash is None

    @property
    def verdict(self) -> str:
        """``"crash"``, ``"leak"`` or ``"clean"``: the word reports and tables use."""
        if self.crash is not None:
            return "crash"
        return "leak" if self.leaks else "clean"

    def explain(self) -> list[str]:
        """One plain-English causal chain per leak, and one for the crash."""
        from replay.explain import explain
        return explain(self)

    @property
    def fatal_leak(self) -> "Leak | None":
        """The leaked dummy that was on the crashing rank when it crashed (latest one), or None."""
        if self.crash is None:
            return None
        on_rank = [leak for leak in self.leaks
                   if leak.rank in self.crash.ranks and leak.iter_created <= self.crash.iter]
        return max(on_rank, key=lambda leak: (leak.iter_created, leak.rank), default=None)

    def story(self) -> list[str]:
        """The chain that matters most first: the fatal leak and the crash, else the first leak."""
        from replay.explain import story
        return story(self)

    def warnings(self) -> list[tuple[int, int, str]]:
        """The warnings the executor would log: ``(iter, rank, message)``."""
        from replay.explain import warnings
        return warnings(self)

    def to_json(self) -> dict[str, Any]:
        """The per-policy object of ``forensics replay --json`` (issue #3 item 7)."""
        return {
            "leaks": [leak.to_json() for leak in self.leaks],
            "crash": None if self.crash is None else self.crash.to_json(),
            "skipped_iters": [int(x) for x in self.skipped_iters],
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_json(),
        }


def fleet_skips(decisions: pd.DataFrame) -> tuple[int, ...]:
    """Iterations whose replayed ``can_queue`` is False (NA at a crash row is not a skip)."""
    if decisions.empty:
        return ()
    skipped = decisions["iter"][decisions["can_queue"].astype("boolean").eq(False).fillna(False)]
    return tuple(int(x) for x in pd.unique(skipped))


def crash_message(kind: str, expected: int, active: int, hook_text: str | None = None) -> str:
    """What the executor raises for a crash of this kind."""
    if kind == "assert":
        return (f"AssertionError: expected_num_active_requests ({expected}) < len(active_requests) "
                f"({active}) in _pad_attention_dp_dummy_request")
    if kind == "dummy_alloc_none":
        return "TypeError: 'NoneType' object is not subscriptable (add_dummy_requests returned None)"
    return hook_text or "the pad hook raised"


def results_json(results: dict[str, ReplayResult]) -> dict[str, Any]:
    """``{"policies": {NAME: result.to_json()}}``."""
    return {"policies": {name: r.to_json() for name, r in results.items()}}


__all__ = [
    "DECISION_COLUMNS",
    "DIVERGENCE_FIELDS",
    "LEDGER_COLUMNS",
    "Crash",
    "Divergence",
    "LEAK_TABLE_COLUMNS",
    "Leak",
    "Leaks",
    "ReplayResult",
    "crash_message",
    "results_json",
]
