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

:attr:`ReplayResult.leaks` (one row per leaked dummy, the fatal one first, then in ledger order)
is a DataFrame whose columns and dtypes are ``replay.leak_table``'s; the :class:`Leak` records,
row for row, are :attr:`ReplayResult.leak_records`.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from replay.config import RunConfig
from replay.policy import Policy
from replay.table_storage import DeferredTable, StoredTable, filter_frame

if TYPE_CHECKING:
    from replay.model_variants import GatedReplay

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


def fatal_first(leaks, crash) -> tuple[tuple[Leak, ...], "Leak | None"]:
    """The leaks in the order results, reports and the plugin show them, and the fatal one.

    The fatal leak is the latest-created dummy (then highest rank) on a crashing rank created
    at or before the crash: the one on that rank when it crashed. It comes first, then the
    others in ledger order (by ``dummy``; the sort is stable)."""
    ordered = sorted(leaks, key=lambda lk: lk.dummy)
    fatal = None
    if crash is not None:
        on_rank = [lk for lk in ordered if lk.rank in crash.ranks and lk.iter_created <= crash.iter]
        fatal = max(on_rank, key=lambda lk: (lk.iter_created, lk.rank), default=None)
    if fatal is None:
        return tuple(ordered), None
    return (fatal,) + tuple(lk for lk in ordered if lk is not fatal), fatal


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


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class ReplayResult:
    """A run replayed under one policy.

    Fields:
        policy: the policy.
        config: the configuration replayed.
        run: the run key.
        decisions: per (iter, rank) decisions, columns in the module docstring (a property: a
            streamed replay keeps them in a file, read on first use; :meth:`read_decisions`
            reads a part).
        ledger: one row per dummy, columns in the module docstring (likewise).
        leaks: the leaked dummies as a DataFrame, one row each, the fatal one first, then in
            ledger order (columns and dtypes ``replay.leak_table.LEAK_DTYPES``, a property).
        leak_records: the same as :class:`Leak` records (with the cause ranks' request
            states), in the same order, row for row.
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
    leak_records: tuple[Leak, ...]
    crash: Crash | None
    skipped_iters: tuple[int, ...]
    first_divergence: Divergence | None
    notes: tuple[str, ...]
    dropped_iters: tuple[int, ...]
    frames: Any = dataclasses.field(repr=False)
    gated: "GatedReplay | None" = dataclasses.field(default=None, repr=False)

    def __init__(self, policy: Policy, config: RunConfig, run: str,
                 decisions: pd.DataFrame | StoredTable | DeferredTable,
                 ledger: pd.DataFrame | StoredTable,
                 leak_records: tuple[Leak, ...] = (), crash: Crash | None = None,
                 skipped_iters: tuple[int, ...] = (), first_divergence: Divergence | None = None,
                 notes: tuple[str, ...] = (), dropped_iters: tuple[int, ...] = (),
                 frames: Any = None, gated: "GatedReplay | None" = None,
                 leaks: tuple[Leak, ...] | None = None):
        # ``leaks=``: the records under the name the constructor took before ``leaks`` became
        # the table (code building results keeps working).
        if leaks is not None:
            if leak_records:
                raise TypeError("ReplayResult() takes leak_records or leaks (records), not both")
            leak_records = leaks
        if isinstance(leak_records, pd.DataFrame):
            raise TypeError("ReplayResult(leak_records=...) takes Leak records, not a table")
        leak_records, fatal = fatal_first(leak_records, crash)
        object.__setattr__(self, "_fatal", fatal)
        object.__setattr__(self, "_leak_table", None)
        for k, v in (("policy", policy), ("config", config), ("run", run),
                     ("leak_records", leak_records),
                     ("crash", crash), ("skipped_iters", skipped_iters),
                     ("first_divergence", first_divergence), ("notes", notes),
                     ("dropped_iters", dropped_iters), ("frames", frames), ("gated", gated)):
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_tables", {"decisions": decisions, "ledger": ledger})
        object.__setattr__(self, "_files", {k: v for k, v in self._tables.items()
                                            if isinstance(v, StoredTable)})

    def with_changes(self, **changes: Any) -> "ReplayResult":
        """A copy with some fields changed (``dataclasses.replace`` cannot see the tables)."""
        kw = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        kw.update(decisions=self._files.get("decisions", self._tables["decisions"]),
                  ledger=self._files.get("ledger", self._tables["ledger"]))
        kw.update(changes)
        return ReplayResult(**kw)

    def keep_files_with(self, owner: Any) -> None:
        """Keep ``owner`` (the ``TemporaryDirectory`` of the files) alive as long as this
        result, or a view of it, can read its stored tables (and those of its model variants)."""
        for t in self._files.values():
            t.owner = owner
        if self.gated is not None:
            for _, variant in self.gated.variants:
                if variant is not self:
                    variant.keep_files_with(owner)

    @property
    def leaks(self) -> pd.DataFrame:
        """The leaked dummies, one row each, the fatal one first (``replay.leak_table``); the
        records, row for row, are :attr:`leak_records`."""
        if self._leak_table is None:
            from replay.leak_table import leak_frame
            object.__setattr__(self, "_leak_table", leak_frame(self.leak_records, self._fatal))
        return self._leak_table

    @property
    def stored(self) -> bool:
        """The decisions and ledger live in Parquet files (a streamed replay)."""
        return "decisions" in self._files

    @property
    def decisions(self) -> pd.DataFrame:
        return self._table("decisions")

    @property
    def ledger(self) -> pd.DataFrame:
        return self._table("ledger")

    def _table(self, name: str) -> pd.DataFrame:
        t = self._tables[name]
        if isinstance(t, StoredTable):  # read once, on first use
            t = t.read()
            self._tables[name] = t
        elif isinstance(t, DeferredTable):
            t = t.build()
            self._tables[name] = t
        return t

    def read_decisions(self, filters: list[tuple] | None = None,
                       columns: list[str] | None = None) -> pd.DataFrame:
        """The decisions rows ``filters`` keep (``[(column, op, value), ...]``), only ``columns``:
        from the file of a streamed replay without reading the rest."""
        return self._read("decisions", filters, columns)

    def read_ledger(self, filters: list[tuple] | None = None,
                    columns: list[str] | None = None) -> pd.DataFrame:
        """Like :meth:`read_decisions`, for the ledger."""
        return self._read("ledger", filters, columns)

    def _read(self, name: str, filters, columns) -> pd.DataFrame:
        if name in self._files and isinstance(self._tables[name], StoredTable):
            return self._files[name].read(filters, columns)   # not read whole yet: filter the file
        out = filter_frame(self._table(name), filters)
        return out[list(columns)] if columns is not None else out

    def decision_frames(self, columns: list[str]):
        """The decisions' ``columns`` as DataFrames: a row group at a time from the file of a
        streamed replay (bounded memory), else the table in one piece."""
        t = self._tables["decisions"]
        if isinstance(t, StoredTable):
            yield from t.frames(columns)
        else:
            yield self.decisions[list(columns)]

    def decision_batches(self, columns: list[str]):
        """The decisions' ``columns`` as Arrow record batches: a row group at a time from the
        file of a streamed replay (bounded memory, no pandas conversion), else the table in
        one batch."""
        t = self._tables["decisions"]
        if isinstance(t, StoredTable):
            yield from t.batches(columns)
        else:
            yield pa.RecordBatch.from_pandas(self.decisions[list(columns)], preserve_index=False)

    def at_iterations(self, iters) -> ReplayResult:
        """This result with the decisions of some iterations only (the same leaks, crash, skips
        and ledger): what a figure or a chain of a few iterations needs from a long run."""
        wanted = sorted({int(x) for x in iters})
        dec = self.read_decisions([("iter", "in", wanted)])
        return self.with_changes(decisions=dec)

    def _explain_view(self) -> ReplayResult:
        """For a streamed replay: the decisions, frames and ledger rows the chains read (the
        leaks' creation and removal iterations, the crash), as an in-memory result."""
        if not self.stored:
            return self
        dummies = [lk.dummy for lk in self.leak_records]
        parts = [self.read_ledger([("dummy", "in", dummies)])] if dummies else []
        need = ({int(lk.iter_created) for lk in self.leak_records}
                | {int(lk.iter_skipped) for lk in self.leak_records})
        if parts:
            need |= {int(x) for x in parts[0]["iter_removed"].dropna()}
        if self.crash is not None:
            need.add(int(self.crash.iter))
            before = self.read_ledger([("rank", "in", list(self.crash.ranks)),
                                       ("iter_created", "<", int(self.crash.iter))])
            parts.append(before.groupby("rank", sort=False).tail(1))
        led = self.read_ledger([("dummy", "<", 0)])
        if parts:
            led = pd.concat([led] + parts, ignore_index=True).drop_duplicates("dummy")
            led = led.sort_values("dummy", kind="stable").reset_index(drop=True)
        frames = self.frames.at(need) if need else None
        return self.with_changes(decisions=self.at_iterations(need).decisions, ledger=led,
                                 frames=frames)

    def __repr__(self) -> str:
        """What, how big, the verdict (not the decision tables)."""
        what = {"crash": (f"crash at iteration {self.crash.iter} on rank {self.crash.rank} "
                          f"({self.crash.kind})" if self.crash is not None else ""),
                "leak": "leak", "clean": "clean"}[self.verdict]
        n = len(self.leak_records)
        leaks = f", {n} leaked dumm{'y' if n == 1 else 'ies'}" if n else ""
        iters = int(self.decisions["iter"].nunique()) if len(self.decisions) else 0
        return (f"<ReplayResult {self.policy.name} on {self.run!r}: {what}{leaks}; {iters} "
                f"iterations x {self.config.tp_size} ranks, {len(self.ledger)} dummies, "
                f"{len(self.skipped_iters)} fleet-wide skips>")

    @property
    def ok(self) -> bool:
        """No leak and no crash."""
        return not self.leak_records and self.crash is None

    @property
    def verdict(self) -> str:
        """``"crash"``, ``"leak"`` or ``"clean"``: the word reports and tables use."""
        if self.crash is not None:
            return "crash"
        return "leak" if self.leak_records else "clean"

    @property
    def verdict_text(self) -> str:
        """The verdict with its model condition when the run's model is unknown and the version's
        gates read it: ``"leak unless the model is DeepSeek-V4"``; else :attr:`verdict`."""
        return self.gated.summary() if self.gated is not None else self.verdict

    def under_model(self, model: "str | None") -> "ReplayResult":
        """The replay under one model assumption (``None``: a model outside every gate); the
        result itself when the run named its model or no gate reads it."""
        if self.gated is None:
            return self
        return self.gated.variant(model)

    def explain(self) -> list[str]:
        """One plain-English causal chain per leak, and one for the crash."""
        from replay.explain import explain
        return explain(self._explain_view())

    @property
    def fatal_leak(self) -> "Leak | None":
        """The leaked dummy that was on the crashing rank when it crashed (latest one), or None."""
        return self._fatal

    @property
    def first_leak(self) -> "Leak | None":
        """The first leaked dummy in ledger order (the earliest created), or None."""
        return min(self.leak_records, key=lambda lk: lk.dummy, default=None)

    def story(self) -> list[str]:
        """The chain that matters most first: the fatal leak and the crash, else the first leak."""
        from replay.explain import story
        return story(self._explain_view())

    def warnings(self) -> list[tuple[int, int, str]]:
        """The warnings the executor would log: ``(iter, rank, message)``."""
        from replay.explain import warnings
        return warnings(self)

    def to_json(self) -> dict[str, Any]:
        """The per-policy object of ``forensics replay --json`` (issue #3 item 7).

        ``verdict`` is the worst outcome over the model assumptions when the run's model is
        unknown (``leaks``/``crash`` are that replay's); ``verdict_text`` and ``model_unknown``
        say how it depends on the model (``model_unknown`` is null when it does not).
        """
        return {
            "verdict": self.verdict,
            "verdict_text": self.verdict_text,
            "leaks": [leak.to_json() for leak in sorted(self.leak_records, key=lambda x: x.dummy)],
            "crash": None if self.crash is None else self.crash.to_json(),
            "skipped_iters": [int(x) for x in self.skipped_iters],
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_json(),
            "model_unknown": None if self.gated is None else self.gated.to_json(),
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
    "Leak",
    "fatal_first",
    "ReplayResult",
    "crash_message",
    "fleet_skips",
    "results_json",
]
