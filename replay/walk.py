"""Replay a recorded run under one executor version (policy), iteration by iteration.

The model (domain doc §4-7; issue #3):

* **Inputs.** Per (iter, rank) frame: the real requests at pad entry (id, state, position).
  Recorded dummies are dropped; the policy's own dummies are carried instead, so a replay under
  ``fix-16161`` of a ``prefix-2026`` recording does not inherit the recording's leaked dummies.
* **Real requests keep their recorded states.** This is the main limit: a different policy would
  have changed real progress (a skip that did not happen under the replayed policy would have let
  requests advance, finish or be fetched at other times). Decisions are exact up to the first
  iteration where the replayed ``can_queue`` differs from the recorded one; after it they answer
  "what this version decides on the same request mix", not "what would have happened".
* **Carried dummy.** At most one per rank, state GENERATION_IN_PROGRESS, in ``active_requests``
  at the position it was appended: last iff no real request first seen on that rank after the
  iteration it was created is in the frame (``max_first_seen <= created``).
* **expected** is the recorded value when the frame has one and every rank's replayed count
  equals its recorded count (dummies included); else it is computed as in §5 (fair share of the
  all-gathered counts, floor ``max(counts before new requests)``, cap if the policy caps). The
  recorded value is also ignored when the recording's rule (cap or no cap) differs from the
  replayed policy's: a capped recording says nothing about an uncapped build's floor. A build
  that is not a catalogue name is taken as capped (``RunFrames.recorded_expected_applies``).
* **Model gates.** When the run record names no model and the policy's gates read it, the run
  is replayed once per model inside the gates and once outside (``replay.results.
  replay_both_ways``); the result is the worst of them and says how the verdict depends on it. "New" requests are those first seen on the rank at this iteration;
  at the run's first frame none are (whether they were just fetched is unknown), so there the
  floor is the largest count.
* **Entry check against recorded routing.** The recording's router placed new requests with the
  recording's ``expected``; under the replayed policy a rank may have no room for them (its
  carried dummy counts). The router never places a request on a rank at or above ``expected``,
  so such a request would have gone elsewhere: the check compares the count before this
  iteration's new requests (``replay.step.over_expected``). Under consistent routing this equals
  upstream's ``len(active_requests) > expected``. A hooked policy (real code) runs its own check
  on the recorded list, seeing the same semantics (``replay.standin_executor.routed_expected``).
* **Entry check, pad, schedule, post-pad, can_queue, removal**: ``replay.step.decide``. The real
  batch is the recorded ``scheduled`` minus a recorded dummy when recorded (exactly, minus a
  recorded ``postpadded`` dummy too, where the frame records ``postpadded``; without it a
  post-schedule dummy is inferred from ``scheduled`` exceeding the window, see
  ``replay.frames``), else the real requests in the micro-batch window, at most
  ``max_batch_size``; with the dummy the batch stays within ``max_batch_size``. A crash (entry assert, a None dummy used
  unchecked, a hook exception) stops the run at that iteration: its row is kept (pads of the other
  ranks happen before they block in ``_can_queue``) but ``can_queue`` is NA and nothing later
  is decided.
* **Leak**: a dummy that survives a skipped iteration (one :class:`~replay.results.Leak` per
  dummy, at its first skip). The cause ranks are the ranks with a zero batch that iteration.
* Iterations where some rank has no frame are dropped (listed in ``dropped_iters``).
* ``_handle_responses`` of the overlap loop's previous batch is not modelled beyond
  ``processed_prev``: a rank with batch 0 holds no dummy, so it changes no dummy's fate.
* A hooked policy (``Policy.pad_hook``) may not pad a second dummy beside a carried one (the real
  code counts the carried dummy, in the window, as schedulable); such a pad is ignored.

Speed: every iteration is first decided at once as ``(I, R)`` arrays assuming no carried dummy;
only the iterations that follow a skip with surviving dummies are redone one ``(R,)`` row at a
time until the fleet clears them. A hooked policy is walked row by row (its hook is Python).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import numpy as np

from replay.config import RunConfig
from replay.decision_tables import (
    decision_columns,
    decisions_frame,
    empty_decisions,
    ledger_frame,
    ledger_table,
)
from replay.errors import PolicyError
from replay.frames import RunFrames
from replay.model_variants import replay_both_ways
from replay.policy import FrameView, PadOutcome, Policy
from replay.resolve import resolve_policies, resolve_policy
from replay.results import (
    DIVERGENCE_FIELDS,
    Crash,
    Divergence,
    ReplayResult,
    crash_message,
)
from replay.states import RequestState
from replay.step import (
    CRASH_KIND_NAMES,
    PadDecision,
    StepInputs,
    StepOutputs,
    decide,
    decision_key,
    expected_step,
    rows_with_any,
)
from replay.table_storage import DeferredTable

_FIELDS = ("active", "expected", "expected_source", "surplus", "crash", "crash_kind", "padded",
           "role_context", "alloc_failed", "postpadded", "batch", "can_queue",
           "can_queue_this_rank", "processed_prev", "removed_path", "survives")


def run(frames: RunFrames, config: RunConfig | None = None,
        policy: Policy | str | None = None) -> ReplayResult:
    """Replay one run under one policy.

    Args:
        frames: the run (``RunFrames.from_dataset`` / ``from_records``).
        config: the configuration to replay; default the run record's.
        policy: a :class:`Policy` or a spec ``resolve_policy`` accepts.

    Returns:
        :class:`~replay.results.ReplayResult`.
    """
    if policy is None and isinstance(config, (Policy, str)):
        config, policy = None, config
    if policy is None:
        raise TypeError("run() needs a policy")
    pol = resolve_policy(policy)
    cfg = config or frames.config
    if cfg.tp_size != frames.num_ranks:
        raise ValueError(f"config tp_size {cfg.tp_size} != the run's {frames.num_ranks} ranks")
    models = pol.model_dependent(cfg)
    if models:  # the run does not name its model and a gate reads it: replay both ways
        return replay_both_ways(pol, cfg, models, lambda c: _run_one(frames, pol, c))
    return _run_one(frames, pol, cfg)


def _run_one(frames: RunFrames, pol: Policy, cfg: RunConfig) -> ReplayResult:
    """:func:`run` for one configuration."""
    I, R = frames.n_real.shape
    state = WalkState(I, R)
    if I:
        if pol.pad_hook is None:
            crash_row = walk_fast(frames, pol, cfg, state)
        else:
            crash_row = walk_hooked(frames, pol, cfg, state)
    else:
        crash_row = None
    return _result(frames, pol, cfg, state, crash_row)


def run_all(frames: RunFrames, policies: Iterable[Policy | str] | None = None,
            config: RunConfig | None = None) -> dict[str, ReplayResult]:
    """Replay one run under several policies (default: the whole catalogue), by policy name."""
    pols = resolve_policies(list(policies) if policies is not None else None)
    return {p.name: run(frames, config, p) for p in pols}


class WalkState:
    """The final decisions, filled by the walks: one ``(I, R)`` array per output field."""

    def __init__(self, I: int, R: int):
        self.out: dict[str, np.ndarray] = {}
        self.carried = np.zeros((I, R), bool)
        self.carried_last = np.zeros((I, R), bool)
        self.schedulable = np.zeros((I, R), np.int64)
        self.hook_messages: dict[tuple[int, int], str] = {}
        self._borrowed: set[str] = set()

    def set_all(self, o: StepOutputs, inp: StepInputs) -> None:
        # Rows of these are rewritten later (``writable``): an array ``decide`` made for this
        # call is taken as it is, a view or one named twice is copied, and a read-only one
        # (shared by the window's policies: ``RunFrames.base_expected``) or the inputs'
        # schedulable counts are copied only when a row of them is first written.
        taken: set[int] = set()
        out = {}
        self._borrowed = set()
        for k in _FIELDS:
            a = getattr(o, k)
            if isinstance(a, np.ndarray) and not a.flags.writeable:
                self._borrowed.add(k)
            elif not (isinstance(a, np.ndarray) and a.base is None and a.flags.c_contiguous
                      and id(a) not in taken):
                a = np.array(a)
            taken.add(id(a))
            out[k] = a
        self.out = out
        if inp.carried.any():
            self.schedulable = inp.sched_real + inp.carried
        else:   # ``sched_real + carried`` is ``sched_real`` (same dtype, same values)
            self.schedulable = inp.sched_real
            self._borrowed.add("schedulable")

    def writable(self, name: str) -> np.ndarray:
        """The array ``name`` (an output field or ``schedulable``), ready for rows to be
        written: one :meth:`set_all` borrowed is copied first."""
        if name in self._borrowed:
            self._borrowed.discard(name)
            if name == "schedulable":
                self.schedulable = np.array(self.schedulable)
            else:
                self.out[name] = np.array(self.out[name])
        return self.schedulable if name == "schedulable" else self.out[name]

    def set_row(self, i: int, o: StepOutputs, inp: StepInputs) -> None:
        for k in _FIELDS:
            self.writable(k)[i] = getattr(o, k)
        self.carried[i] = inp.carried
        self.carried_last[i] = inp.carried & inp.carried_last
        self.writable("schedulable")[i] = inp.sched_real + inp.carried


class Carry:
    """What crosses a window edge: the dummies that survived the window's last row.

    Fields:
        survives: ``(R,)`` a dummy is alive on the rank after the row.
        created: ``(R,)`` the iteration that dummy was created, -1 where none.
    """

    def __init__(self, R: int):
        self.survives = np.zeros(R, bool)
        self.created = np.full(R, -1, np.int64)


def decides_alike(pol: Policy, cfg: RunConfig) -> tuple | None:
    """Everything :func:`walk_fast` reads from a policy and its configuration (through
    ``RunFrames.inputs`` and ``replay.step.decide``): two policies with the same key decide
    every row alike, so one walk serves both (``replay.streaming.replay_windows``). None for
    a policy that is not a plain :class:`~replay.policy.Policy` or has a ``pad_hook`` (its
    code decides)."""
    if type(pol) is not Policy or pol.pad_hook is not None:
        return None
    return (cfg, pol.expected_rule, decision_key(pol, cfg))


def walk_fast(frames: RunFrames, pol: Policy, cfg: RunConfig, st: WalkState,
               carry: Carry | None = None) -> int | None:
    """Decide every row at once, then redo the rows that follow a skip with survivors.

    The redo runs in rounds: each round recomputes, in one batched ``decide``, every row whose
    carried dummies (from the row before) differ from those it was computed with. A chain of
    skips of length L takes L rounds; chains are short, so a few rounds settle the whole run.
    ``carry``: the dummies alive before the first row (a window edge), updated to those alive
    after the last row.
    """
    inp = frames.inputs(pol, cfg)
    base = decide(pol, cfg, inp, expected=frames.base_expected(pol, cfg, inp))
    st.set_all(base, inp)
    I, R = frames.n_real.shape
    out = st.out
    created_in = np.full((I, R), -1, np.int64)
    iters = frames.iters
    pending = rows_with_any(out["survives"][:-1]) + 1
    if carry is not None and carry.survives.any():
        pending = np.r_[0, pending]
    while pending.size:
        prev = pending - 1
        surv = out["survives"][prev]
        fresh = out["padded"][prev] | out["postpadded"][prev]
        born = np.where(fresh, iters[prev][:, None], created_in[prev])
        if prev[0] < 0:  # the row before the window: the carry
            surv[0], born[0] = carry.survives, carry.created
        c_in = surv
        cr_in = np.where(surv, born, -1)
        changed = (c_in != st.carried[pending]).any(axis=1) | (cr_in != created_in[pending]).any(axis=1)
        k = pending[changed]
        if not k.size:
            break
        c_in, cr_in = c_in[changed], cr_in[changed]
        c_last = c_in & (frames.max_first_seen[k] <= cr_in)
        sub = inp.take(k).with_carried(c_in, c_last)
        o = decide(pol, cfg, sub)
        for name in _FIELDS:
            st.writable(name)[k] = getattr(o, name)
        st.carried[k] = c_in
        st.carried_last[k] = c_last
        st.writable("schedulable")[k] = sub.sched_real + c_in
        created_in[k] = cr_in
        pending = k + 1
        pending = pending[pending < I]
    crashed = rows_with_any(out["crash"])
    if carry is not None:
        last = I - 1
        fresh = out["padded"][last] | out["postpadded"][last]
        carry.survives = out["survives"][last].copy()
        carry.created = np.where(carry.survives, np.where(fresh, iters[last], created_in[last]), -1)
    return int(crashed[0]) if crashed.size else None


def walk_hooked(frames: RunFrames, pol: Policy, cfg: RunConfig, st: WalkState,
                 carry: Carry | None = None) -> int | None:
    """Walk every row; the pad step of each frame is the policy's hook."""
    inp = frames.inputs(pol, cfg)
    I, R = frames.n_real.shape
    st.set_all(decide(pol, cfg, inp, pad=_no_pad((I, R))), inp)
    carry = carry if carry is not None else Carry(R)
    carried, created = carry.survives, carry.created
    # The dummy's role is decided outside the pad step upstream: the loop's model of it, where
    # the frames offer one, is handed to a lockstep hook (replay.standin_executor).
    role_of = getattr(frames, "dummy_role_context", None)
    roles = role_of(pol) if role_of is not None else None
    for i in range(I):
        carried_last = carried & (frames.max_first_seen[i] <= created)
        row_in = inp.take(i).with_carried(carried, carried_last)
        _, expected, _ = expected_step(pol, cfg, row_in)
        role = None if roles is None else bool(roles[i])
        pad = _hook_pad(frames, pol, cfg, i, row_in, created, expected, st, role)
        o = decide(pol, cfg, row_in, pad=pad)
        st.set_row(i, o, row_in)
        if o.crash.any():
            return i
        created = np.where(o.padded | o.postpadded, frames.iters[i], created)
        carried = o.survives
        created = np.where(carried, created, -1)
        carry.survives, carry.created = carried, created
    return None


def _no_pad(shape) -> PadDecision:
    z = np.zeros(shape, bool)
    return PadDecision(padded=z, role_context=z, alloc_failed=z, crash=z, surplus=z)


def _hook_pad(frames: RunFrames, pol: Policy, cfg: RunConfig, i: int, row_in: StepInputs,
              created: np.ndarray, expected: np.ndarray, st: WalkState,
              role: bool | None = None) -> PadDecision:
    R = frames.num_ranks
    res = {k: np.zeros(R, bool) for k in ("padded", "role_context", "alloc_failed", "crash", "surplus")}
    it = int(frames.iters[i])
    views = []
    for r in range(R):
        k = i * R + r
        a, b = frames.req_offsets[k], frames.req_offsets[k + 1]
        reqs = [(int(x), int(s), False) for x, s in zip(frames.req_id[a:b], frames.req_state[a:b])]
        if row_in.carried[r]:
            dummy = (0, int(RequestState.GENERATION_IN_PROGRESS), True)
            before = int((frames.req_first[a:b] <= created[r]).sum())
            # Requests first seen after the dummy's creation were appended after it.
            order = np.argsort(frames.req_first[a:b] > created[r], kind="stable")
            reqs = [reqs[j] for j in order]
            reqs.insert(before, dummy)
        views.append(FrameView(iter=it, rank=r, requests=tuple(reqs), expected=int(expected[r]),
                               config=cfg, alloc_ok=bool(row_in.alloc_ok[r]),
                               new_requests=int(row_in.new_real[r]),
                               kv_precheck_ok=bool(row_in.kv_precheck_ok[r])))
    for r, outcome in enumerate(hook_outcomes(pol, views, role)):
        res["padded"][r] = bool(outcome.padded)
        res["role_context"][r] = bool(outcome.padded) and outcome.role == "context"
        res["alloc_failed"][r] = bool(outcome.alloc_failed)
        res["crash"][r] = outcome.crash is not None
        res["surplus"][r] = bool(outcome.surplus_warning)
        if outcome.crash is not None:
            st.hook_messages[(it, r)] = outcome.crash
    return PadDecision(**res)


def hook_outcomes(pol: Policy, views: list[FrameView],
                   role: bool | None = None) -> list[PadOutcome]:
    """The hook's outcome for every rank of one iteration: in lockstep when the hook offers it
    (``pad_hook.fleet``: real code whose collectives span the replayed ranks; ``role`` is the
    loop's dummy role this iteration, None when not modelled), else per frame."""
    fleet = getattr(pol.pad_hook, "fleet", None)
    if fleet is not None:
        return fleet(views, role_context=role)
    out = []
    for view in views:
        try:
            out.append(pol.pad_hook(view))  # type: ignore[misc]
        except PolicyError:
            raise  # the stand-in lacks a name the code needs: a tool error, not a crash verdict
        except Exception as e:  # the hook is code under test: its exception is a crash verdict
            out.append(PadOutcome(padded=False, crash=f"{type(e).__name__}: {e}"))
    return out


@dataclasses.dataclass
class Rows:
    """A walked stretch of rows cut after the crash row: what decisions, ledger and verdicts
    are built from. ``survives``/``removed`` are the walk's with the crash row's undone (the
    crash iteration never reaches ``_can_queue``: no removal, no skip)."""

    n: int
    o: dict
    stopped: np.ndarray
    crashed_row: np.ndarray
    survives: np.ndarray
    removed: np.ndarray
    columns: dict


def cut_rows(frames: RunFrames, st: WalkState, crash_row: int | None) -> Rows | None:
    I, R = frames.n_real.shape
    n = I if crash_row is None else crash_row + 1
    if not n:
        return None
    o = {k: v[:n] for k, v in st.out.items()}
    crashed_row = np.zeros((n, R), bool)
    stopped = np.zeros(n, bool)
    survives = o["survives"].copy()
    removed = o["removed_path"].copy()
    if crash_row is not None:
        stopped[-1] = True
        crashed_row[-1] = o["crash"][-1]
        alive_at_stop = o["padded"][-1] | o["postpadded"][-1] | st.carried[n - 1]
        removed[-1] = 0
        survives[-1] = False
    else:
        alive_at_stop = survives[-1]
    cols = decision_columns(frames, o, st, n, stopped, crashed_row, removed, alive_at_stop)
    return Rows(n, o, stopped, crashed_row, survives, removed, cols)


def skipped_iters(frames: RunFrames, rows: Rows) -> tuple[int, ...]:
    """``fleet_skips(rows.decisions)`` from the arrays, without the DataFrame: can_queue is
    fleet-wide, NA at the stop row."""
    at = rows_with_any(~rows.o["can_queue"])
    at = at[~rows.stopped[at]]
    return tuple(int(x) for x in frames.iters[:rows.n][at])


def crash_record(frames: RunFrames, rows: Rows, st: WalkState) -> Crash:
    o = rows.o
    it = int(frames.iters[rows.n - 1])
    ranks = tuple(int(r) for r in np.flatnonzero(o["crash"][-1]))
    r0 = ranks[0]
    kind = CRASH_KIND_NAMES[int(o["crash_kind"][-1, r0])] or "assert"
    act, exp = int(o["active"][-1, r0]), int(o["expected"][-1, r0])
    msg = crash_message(kind, exp, act, st.hook_messages.get((it, r0)))
    return Crash(iter=it, rank=r0, ranks=ranks, kind=kind, expected=exp, active=act, message=msg)


def replay_notes(pol: Policy, cfg: RunConfig, dropped: tuple[int, ...]) -> tuple[str, ...]:
    """What the replay assumed (a real-code policy's guessed gates) and what it left out."""
    notes = list(getattr(pol, "assumptions", lambda _c: [])(cfg))
    if dropped:
        notes.append(f"{len(dropped)} iterations not replayed (some rank has no frame): "
                     + _span(dropped))
    return tuple(notes)


def _result(frames: RunFrames, pol: Policy, cfg: RunConfig, st: WalkState,
            crash_row: int | None) -> ReplayResult:
    notes = replay_notes(pol, cfg, frames.dropped_iters)
    rows = cut_rows(frames, st, crash_row) if st.out else None
    if rows is None:
        return ReplayResult(policy=pol, config=cfg, run=frames.run, decisions=empty_decisions(),
                            ledger=ledger_frame([], [], [], [], [], [], [], [], []), leaks=(),
                            crash=None, skipped_iters=(), first_divergence=None,
                            notes=notes, frames=frames, dropped_iters=frames.dropped_iters)
    ledger, leaks = ledger_table(frames, rows.o, st, rows.n, rows.survives, rows.removed, rows.crashed_row)
    crash = crash_record(frames, rows, st) if crash_row is not None else None
    div = first_divergence(frames, rows.o, rows.n, rows.stopped, rows.crashed_row)
    return ReplayResult(policy=pol, config=cfg, run=frames.run,
                        decisions=DeferredTable(functools.partial(decisions_frame, rows.columns)),
                        ledger=ledger, leaks=tuple(leaks), crash=crash,
                        skipped_iters=skipped_iters(frames, rows), first_divergence=div,
                        notes=notes, frames=frames, dropped_iters=frames.dropped_iters)


def _span(iters) -> str:
    iters = list(iters)
    shown = ", ".join(str(x) for x in iters[:10])
    return shown + (f", ... ({len(iters) - 10} more)" if len(iters) > 10 else "")


def first_divergence(frames, o, n, stopped, crashed_row) -> Divergence | None:
    R = frames.num_ranks
    padded = o["padded"]  # recorded `padded` is the pad step's (traces/FORMAT.md), not the post-pad
    rp, rs, rc = frames.rec_padded[:n], frames.rec_scheduled[:n], frames.rec_can_queue[:n]
    rpp = frames.rec_postpadded[:n]
    stop_mask = np.broadcast_to(stopped[:, None], (n, R))
    m_pad = (rp >= 0) & (rp.astype(bool) != padded) & ~crashed_row
    m_post = (rpp >= 0) & (rpp.astype(bool) != o["postpadded"]) & ~crashed_row
    m_sched = (rs >= 0) & (rs != o["batch"]) & ~crashed_row
    m_cq = (rc >= 0) & (rc.astype(bool) != o["can_queue"]) & ~stop_mask
    any_m = m_pad | m_post | m_sched | m_cq
    if not any_m.any():
        return None
    flat = int(np.argmax(any_m.ravel()))
    i, r = divmod(flat, R)
    it = int(frames.iters[i])
    for name, m, rec, rep in zip(DIVERGENCE_FIELDS, (m_pad, m_post, m_sched, m_cq),
                                 (bool(rp[i, r] == 1), bool(rpp[i, r] == 1), int(rs[i, r]),
                                  bool(rc[i, r] == 1)),
                                 (bool(padded[i, r]), bool(o["postpadded"][i, r]),
                                  int(o["batch"][i, r]), bool(o["can_queue"][i, r]))):
        if m[i, r]:
            return Divergence(iter=it, rank=r, field=name, recorded=rec, replayed=rep)
    return None  # pragma: no cover


__all__ = ["Carry", "Rows", "WalkState", "crash_record", "cut_rows", "decides_alike",
           "first_divergence", "hook_outcomes",
           "replay_notes", "run", "run_all", "skipped_iters", "walk_fast", "walk_hooked"]
