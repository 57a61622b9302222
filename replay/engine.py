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
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from replay.config import RunConfig
from replay.errors import PolicyError
from replay.frames import RunFrames
from replay.heap import release_arrow, trim, usable_cores
from replay.policy import FrameView, PadOutcome, Policy
from replay.resolve import resolve_policy
from replay.results import (
    DIVERGENCE_FIELDS,
    Crash,
    DeferredTable,
    Divergence,
    Leak,
    Piece,
    ReplayResult,
    TableWriter,
    crash_message,
)
from replay.stage_clock import CLOCK
from replay.states import RequestState
from replay.step import (
    CRASH_KIND_NAMES,
    EXPECTED_SOURCE_NAMES,
    REMOVAL_PATH_NAMES,
    PadDecision,
    StepInputs,
    StepOutputs,
    decide,
    expected_step,
)

log = logging.getLogger(__name__)

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
        from replay.results import replay_both_ways
        return replay_both_ways(pol, cfg, models, lambda c: _run_one(frames, pol, c))
    return _run_one(frames, pol, cfg)


def _run_one(frames: RunFrames, pol: Policy, cfg: RunConfig) -> ReplayResult:
    """:func:`run` for one configuration."""
    I, R = frames.n_real.shape
    state = _State(I, R)
    if I:
        if pol.pad_hook is None:
            crash_row = _walk_fast(frames, pol, cfg, state)
        else:
            crash_row = _walk_hooked(frames, pol, cfg, state)
    else:
        crash_row = None
    return _result(frames, pol, cfg, state, crash_row)


def run_all(frames: RunFrames, policies: Iterable[Policy | str] | None = None,
            config: RunConfig | None = None) -> dict[str, ReplayResult]:
    """Replay one run under several policies (default: the whole catalogue), by policy name."""
    from replay.resolve import resolve_policies
    pols = resolve_policies(list(policies) if policies is not None else None)
    return {p.name: run(frames, config, p) for p in pols}


def replay_input(inputs, policies: Iterable[Policy | str] | None = None, *, run: str | None = None,
                 cache_dir=None, directory: str | Path | None = None,
                 window: int | None = None) -> dict[str, ReplayResult]:
    """Replay a dataset or raw inputs (ingested on the fly) under several policies.

    A run of more than ``STREAM_MIN_FRAMES`` frames is streamed (:func:`replay_windows`):
    memory holds one window, decisions and ledgers go to Parquet files read when used; the
    results are the same as in memory.

    Args:
        inputs: a dataset directory, or files ``forensics ingest`` accepts.
        policies: policy names/specs (default: the whole catalogue).
        run: the run to replay when the input holds several.
        cache_dir: where raw inputs are ingested (default: a temporary directory).
        directory: where a streamed replay writes its files (default: a temporary directory
            removed once no result uses it); given, the replay is always streamed.
        window: iterations per window (default ``replay.frames.WINDOW_FRAMES`` frames); a
            run longer than one window of this size is streamed.

    Raises:
        ReplayError: bad input (``forensics.errors.ForensicsError``, exit code 2 in the CLI);
            NoReaderError when no reader is installed (``replay.feed``).
    """
    from replay.resolve import resolve_policies
    pols = resolve_policies(list(policies) if policies else None)  # bad names fail before ingest
    from replay.feed import readers
    ds = readers().as_dataset(inputs, cache_dir=cache_dir)
    windows = stream_windows(ds, run, window, always=directory is not None)
    if windows is not None:
        return replay_windows(windows, pols, directory)
    frames = RunFrames.from_dataset(ds, run=run)
    return run_all(frames, pols)


#: Runs of more frames than this are replayed in windows (:func:`replay_windows`) by
#: :func:`replay_input` and ``forensics fleet``: in memory a frame costs ~0.7 KB with its
#: decisions, so this bounds a replay to a few hundred MB; shorter runs stay in memory, where
#: a replay costs less CPU.
STREAM_MIN_FRAMES = 1 << 19


def stream_windows(ds: Any, run: str | None = None, window: int | None = None, *,
                   always: bool = False):
    """The run as :class:`replay.frames.FrameWindows` when it should be streamed (more than
    ``STREAM_MIN_FRAMES`` frames, or a ``window`` smaller than the run, or ``always``), else
    None (replay it in memory). Datasets of other readers (no ``batches``) are not windowed."""
    if not hasattr(ds, "batches"):
        return None
    from replay.frames import FrameWindows
    windows = FrameWindows(ds, run=run, size=window)
    frames = len(windows.iters) * windows.num_ranks
    if always or (window is not None and len(windows) > 1) or frames > STREAM_MIN_FRAMES:
        return windows
    return None


class _State:
    """The final decisions, filled by the walks: one ``(I, R)`` array per output field."""

    def __init__(self, I: int, R: int):
        self.out: dict[str, np.ndarray] = {}
        self.carried = np.zeros((I, R), bool)
        self.carried_last = np.zeros((I, R), bool)
        self.schedulable = np.zeros((I, R), np.int64)
        self.hook_messages: dict[tuple[int, int], str] = {}

    def set_all(self, o: StepOutputs, inp: StepInputs) -> None:
        self.out = {k: np.array(getattr(o, k)) for k in _FIELDS}
        self.schedulable = inp.sched_real + inp.carried

    def set_row(self, i: int, o: StepOutputs, inp: StepInputs) -> None:
        for k in _FIELDS:
            self.out[k][i] = getattr(o, k)
        self.carried[i] = inp.carried
        self.carried_last[i] = inp.carried & inp.carried_last
        self.schedulable[i] = inp.sched_real + inp.carried


class Carry:
    """What crosses a window edge: the dummies that survived the window's last row.

    Fields:
        survives: ``(R,)`` a dummy is alive on the rank after the row.
        created: ``(R,)`` the iteration that dummy was created, -1 where none.
    """

    def __init__(self, R: int):
        self.survives = np.zeros(R, bool)
        self.created = np.full(R, -1, np.int64)


def _walk_fast(frames: RunFrames, pol: Policy, cfg: RunConfig, st: _State,
               carry: Carry | None = None) -> int | None:
    """Decide every row at once, then redo the rows that follow a skip with survivors.

    The redo runs in rounds: each round recomputes, in one batched ``decide``, every row whose
    carried dummies (from the row before) differ from those it was computed with. A chain of
    skips of length L takes L rounds; chains are short, so a few rounds settle the whole run.
    ``carry``: the dummies alive before the first row (a window edge), updated to those alive
    after the last row.
    """
    inp = frames.inputs(pol, cfg)
    base = decide(pol, cfg, inp)
    st.set_all(base, inp)
    I, R = frames.n_real.shape
    out = st.out
    created_in = np.full((I, R), -1, np.int64)
    iters = frames.iters
    pending = np.flatnonzero(out["survives"][:-1].any(axis=1)) + 1
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
        for name in out:
            out[name][k] = getattr(o, name)
        st.carried[k] = c_in
        st.carried_last[k] = c_last
        st.schedulable[k] = sub.sched_real + c_in
        created_in[k] = cr_in
        pending = k + 1
        pending = pending[pending < I]
    crashed = np.flatnonzero(out["crash"].any(axis=1))
    if carry is not None:
        last = I - 1
        fresh = out["padded"][last] | out["postpadded"][last]
        carry.survives = out["survives"][last].copy()
        carry.created = np.where(carry.survives, np.where(fresh, iters[last], created_in[last]), -1)
    return int(crashed[0]) if crashed.size else None


def _walk_hooked(frames: RunFrames, pol: Policy, cfg: RunConfig, st: _State,
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
              created: np.ndarray, expected: np.ndarray, st: _State,
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
class _Rows:
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



def _rows(frames: RunFrames, st: _State, crash_row: int | None) -> _Rows | None:
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
    cols = _decision_columns(frames, o, st, n, stopped, crashed_row, removed, alive_at_stop)
    return _Rows(n, o, stopped, crashed_row, survives, removed, cols)


def _skipped_iters(frames: RunFrames, rows: _Rows) -> tuple[int, ...]:
    """``fleet_skips(rows.decisions)`` from the arrays, without the DataFrame: can_queue is
    fleet-wide, NA at the stop row."""
    skip = (~rows.o["can_queue"]).any(axis=1) & ~rows.stopped
    return tuple(int(x) for x in frames.iters[:rows.n][skip])


def _crash(frames: RunFrames, rows: _Rows, st: _State) -> Crash:
    o = rows.o
    it = int(frames.iters[rows.n - 1])
    ranks = tuple(int(r) for r in np.flatnonzero(o["crash"][-1]))
    r0 = ranks[0]
    kind = CRASH_KIND_NAMES[int(o["crash_kind"][-1, r0])] or "assert"
    act, exp = int(o["active"][-1, r0]), int(o["expected"][-1, r0])
    msg = crash_message(kind, exp, act, st.hook_messages.get((it, r0)))
    return Crash(iter=it, rank=r0, ranks=ranks, kind=kind, expected=exp, active=act, message=msg)


def _notes(pol: Policy, cfg: RunConfig, dropped: tuple[int, ...]) -> tuple[str, ...]:
    """What the replay assumed (a real-code policy's guessed gates) and what it left out."""
    notes = list(getattr(pol, "assumptions", lambda _c: [])(cfg))
    if dropped:
        notes.append(f"{len(dropped)} iterations not replayed (some rank has no frame): "
                     + _span(dropped))
    return tuple(notes)


def _result(frames: RunFrames, pol: Policy, cfg: RunConfig, st: _State,
            crash_row: int | None) -> ReplayResult:
    notes = _notes(pol, cfg, frames.dropped_iters)
    rows = _rows(frames, st, crash_row) if st.out else None
    if rows is None:
        return ReplayResult(policy=pol, config=cfg, run=frames.run, decisions=_empty_decisions(),
                            ledger=_ledger_frame([], [], [], [], [], [], [], [], []), leaks=(),
                            crash=None, skipped_iters=(), first_divergence=None,
                            notes=notes, frames=frames, dropped_iters=frames.dropped_iters)
    ledger, leaks = _ledger(frames, rows.o, st, rows.n, rows.survives, rows.removed, rows.crashed_row)
    crash = _crash(frames, rows, st) if crash_row is not None else None
    div = _first_divergence(frames, rows.o, rows.n, rows.stopped, rows.crashed_row)
    return ReplayResult(policy=pol, config=cfg, run=frames.run,
                        decisions=DeferredTable(functools.partial(_decisions_frame, rows.columns)),
                        ledger=ledger, leaks=tuple(leaks), crash=crash,
                        skipped_iters=_skipped_iters(frames, rows), first_divergence=div,
                        notes=notes, frames=frames, dropped_iters=frames.dropped_iters)


# ----------------------------------------------------------------------------- streaming

class StreamReplay:
    """One policy replayed window after window (:class:`replay.frames.FrameWindows`).

    The dummies alive after a window's last row (:class:`Carry`) enter the next window's first
    row, and the ledger keeps the dummies not yet removed open across the edge, so the result
    is the whole-run :func:`run`'s, while memory holds one window. Decisions and ledger rows go
    to Parquet files as each window is decided (``replay.results.TableWriter``).
    """

    def __init__(self, policy: Policy, config: RunConfig, directory: str | Path,
                 shared: SharedWindows | None = None):
        self.policy, self.config = policy, config
        R = config.tp_size
        directory = Path(directory)
        empty_dec, empty_led = _empty_tables()
        self._shared = shared
        self._pieces: list[Piece] = []
        # Reads of the decisions filter row groups by iteration (windows of a figure, a chain).
        self._dec = TableWriter(directory / "decisions.parquet", empty_dec.copy(),
                                statistics=["iter"])
        self._led = TableWriter(directory / "ledger.parquet", empty_led.copy(), sort_by="dummy")
        self._ledger = _LedgerStream(R)
        self._carry = Carry(R)
        self._skipped: list[int] = []
        self._div: Divergence | None = None
        self.crash: Crash | None = None

    @property
    def stopped(self) -> bool:
        return self.crash is not None

    def feed(self, frames: RunFrames) -> None:
        """Decide one window (the next in iteration order); nothing once the run crashed."""
        if self.stopped or not frames.num_iters:
            return
        with CLOCK.stage("replay decide"):
            st = _State(*frames.n_real.shape)
            walk = _walk_fast if self.policy.pad_hook is None else _walk_hooked
            crash_row = walk(frames, self.policy, self.config, st, self._carry)
            rows = _rows(frames, st, crash_row)
        with CLOCK.stage("replay write"):
            self._write_decisions(frames, rows)
        with CLOCK.stage("replay decide"):
            self._skipped.extend(_skipped_iters(frames, rows))
            if self._div is None:
                self._div = _first_divergence(frames, rows.o, rows.n, rows.stopped,
                                              rows.crashed_row)
        with CLOCK.stage("ledger"):
            self._ledger.feed(frames, rows, self._led)
        if crash_row is not None:
            self.crash = _crash(frames, rows, st)

    def _write_decisions(self, frames: RunFrames, rows: _Rows) -> None:
        """Write the window's decisions, or, when another stream of the replay decided the
        window alike (:class:`SharedWindows`), only note where its rows are."""
        if self._shared is None:
            self._dec.write(_decisions_arrow(rows.columns))
            return
        iters = frames.iters[:rows.n]
        mine = Piece(self._dec.path, self._dec.rows, rows.n * frames.num_ranks,
                     int(iters[0]), int(iters[-1]))
        piece = self._shared.claim(_digest(rows.columns), mine)
        self._pieces.append(piece)
        if piece is mine:
            self._dec.write(_decisions_arrow(rows.columns))
        elif len(self._pieces) == 1:
            self._dec.describe(_decisions_arrow(rows.columns))

    def finish(self, windows: Any) -> ReplayResult:
        """The result (decisions and ledger read from the files when used)."""
        with CLOCK.stage("ledger"):
            leaks = self._ledger.finish(self._led)
        with CLOCK.stage("replay write"):
            decisions = self._dec.close(self._pieces if self._shared is not None else None)
            ledger = self._led.close()
        return ReplayResult(policy=self.policy, config=self.config, run=windows.run,
                            decisions=decisions, ledger=ledger, leaks=leaks,
                            crash=self.crash, skipped_iters=tuple(self._skipped),
                            first_divergence=self._div, notes=_notes(self.policy, self.config, windows.dropped_iters),
                            frames=windows, dropped_iters=windows.dropped_iters)


class SharedWindows:
    """The decisions of a window that several streams of one replay decide alike, written once.

    Policies often decide a window alike (on a fleet hour's run, 18 policy and model streams
    decide every window in one of 3 ways, measured): the first stream to decide a window's
    decisions writes them, and the others note where those rows are (``replay.results.Piece``),
    so their results read the same rows. Alike means equal column arrays, compared by their
    XXH3-128 digest (:func:`_digest`), iterations included. Safe across the threads of
    :func:`replay_windows`.
    """

    def __init__(self):
        import threading
        self._lock = threading.Lock()
        self._pieces: dict[bytes, Piece] = {}

    def claim(self, digest: bytes, piece: Piece) -> Piece:
        """The piece holding the rows of ``digest``: ``piece`` when no stream wrote them yet
        (the caller writes them), else the one that did."""
        with self._lock:
            return self._pieces.setdefault(digest, piece)


def _digest(cols: dict) -> bytes:
    """XXH3-128 of a window's decision columns (:func:`_decision_columns`): names, kinds,
    dtypes, shapes and values, everything the written table is built from."""
    import xxhash
    h = xxhash.xxh3_128()
    for name, (kind, *rest) in cols.items():
        h.update(f"{name}:{kind};".encode())
        for x in rest:
            if isinstance(x, np.ndarray):
                h.update(f"{x.dtype.str}{x.shape};".encode())
                h.update(np.ascontiguousarray(x).data)
            else:
                h.update(repr(x).encode())
    return h.digest()


class _LedgerStream:
    """The dummy ledger built window by window: ``_ledger``'s pairing (a dummy is removed at the
    first removal on its rank at or after its creation row; its skips are the surviving rows in
    between) with the dummies still alive at a window's end kept open into the next."""

    def __init__(self, R: int):
        self.seq = 0
        self.open: list[dict] = []        # per open dummy: its ledger fields so far and its leak
        self.leaks: list[Leak] = []

    def feed(self, frames: RunFrames, rows: _Rows, out: TableWriter) -> None:
        o, n, survives, removed = rows.o, rows.n, rows.survives, rows.removed
        iters = frames.iters[:n]
        cs = np.cumsum(survives, axis=0)
        done: list[dict] = []
        still: list[dict] = []
        for d in self.open:                                  # dummies from earlier windows
            q = np.flatnonzero(removed[:, d["rank"]])
            if q.size:
                d["skips"] += int(cs[q[0], d["rank"]])
                d["iter_removed"] = int(iters[q[0]])
                d["path"] = REMOVAL_PATH_NAMES[int(removed[q[0], d["rank"]])]
                done.append(d)
            else:
                d["skips"] += int(cs[n - 1, d["rank"]])
                still.append(d)
        new = o["padded"] | o["postpadded"]
        ci, cr = np.nonzero(new)                             # row-major: ordered by (iter, rank)
        ri, rr = np.nonzero(removed)
        stride = n + 1
        rkey = np.sort(rr.astype(np.int64) * stride + ri)
        pos = np.searchsorted(rkey, cr.astype(np.int64) * stride + ci, side="left")
        pos_c = np.minimum(pos, max(rkey.size - 1, 0))
        has_rm = (pos < rkey.size) & (rkey[pos_c] // stride == cr) if rkey.size else np.zeros(ci.size, bool)
        rm_row = np.where(has_rm, rkey[pos_c] % stride if rkey.size else 0, -1)
        end_row = np.where(has_rm, rm_row, n - 1)
        skips = cs[end_row, cr] - np.where(ci > 0, cs[np.maximum(ci - 1, 0), cr], 0)
        origin = np.where(o["postpadded"][ci, cr], "postpad", "pad")
        role = np.where(o["role_context"][ci, cr] & o["padded"][ci, cr], "context", "generation")
        seq = self.seq + np.arange(ci.size)
        self.seq += int(ci.size)
        for k in np.flatnonzero(~has_rm | (skips > 0)):      # open ones, and leaks: need the frames
            d = {"dummy": int(seq[k]), "rank": int(cr[k]), "iter_created": int(iters[ci[k]]),
                 "origin": str(origin[k]), "role": str(role[k]), "skips": int(skips[k]),
                 "iter_removed": None, "path": None,
                 "leak": _leak(frames, o, int(ci[k]), int(cr[k]), str(role[k]), int(seq[k]))}
            if has_rm[k]:
                d["iter_removed"] = int(iters[rm_row[k]])
                d["path"] = REMOVAL_PATH_NAMES[int(removed[rm_row[k], cr[k]])]
                done.append(d)
            else:
                still.append(d)
        plain = has_rm & (skips == 0)                        # created and removed here, no skip
        if plain.any():
            out.write(_ledger_frame(seq[plain], cr[plain], iters[ci[plain]], origin[plain], role[plain],
                                    [int(iters[a]) for a in rm_row[plain]],
                                    [REMOVAL_PATH_NAMES[int(removed[a, b])]
                                     for a, b in zip(rm_row[plain], cr[plain])],
                                    skips[plain], np.zeros(int(plain.sum()), bool)))
        self._close(done, out)
        self.open = still

    def _close(self, done: list[dict], out: TableWriter) -> None:
        if not done:
            return
        done.sort(key=lambda d: d["dummy"])
        out.write(_ledger_frame([d["dummy"] for d in done], [d["rank"] for d in done],
                                [d["iter_created"] for d in done], [d["origin"] for d in done],
                                [d["role"] for d in done], [d["iter_removed"] for d in done],
                                [d["path"] for d in done], [d["skips"] for d in done],
                                [d["skips"] > 0 for d in done]))
        self.leaks.extend(d["leak"] for d in done if d["skips"] > 0)

    def finish(self, out: TableWriter) -> tuple[Leak, ...]:
        """Close the dummies alive at the end (or at the crash); the leaks in ledger order."""
        self._close(self.open, out)
        self.open = []
        return tuple(sorted(self.leaks, key=lambda lk: lk.dummy))


def replay_windows(windows: Any, policies: Iterable[Policy | str], directory: str | Path | None,
                   progress=None, threads: int | None = None) -> dict[str, ReplayResult]:
    """Replay a run under several policies in one pass over its windows, in bounded memory.

    Args:
        windows: :class:`replay.frames.FrameWindows` of the run.
        policies: policies or specs.
        directory: where each policy's ``decisions.parquet`` and ``ledger.parquet`` go (one
            subdirectory per policy, numbered in the order given); None: a temporary directory
            removed once no result (or view of one) uses its files. A window decided alike by
            several policies is written once, in the first one's file (:class:`SharedWindows`):
            a policy's ``decisions.parquet`` holds the windows it decided first, and its
            result reads its rows wherever they are.
        progress: called with ``(window, windows)`` before each window.
        threads: threads deciding the policies of a window at once (default: the usable cores;
            1 when a policy has a ``pad_hook``); the next window is read meanwhile. Each policy's stream is its own state, so the
            results do not depend on it; NumPy, Arrow and the Parquet writes release the GIL.

    Returns:
        Results by policy name, equal to :func:`run_all`'s on the whole run; their decisions
        and ledger are read from the files when used (``ReplayResult.read_decisions``).
    """
    from replay.results import combine_model_variants, model_variants
    pols = [resolve_policy(p) for p in policies]
    cfg = windows.config
    owner = None
    if directory is None:
        import tempfile
        owner = tempfile.TemporaryDirectory(prefix="adp-replay-")
        directory = owner.name
    # A policy whose gates read a model the run does not name is streamed once per model
    # (replay.results.model_variants), like run()'s replay both ways.
    streams: dict[str, list[tuple[str | None, StreamReplay]]] = {}
    models_of = {p.name: p.model_dependent(cfg) for p in pols}
    shared = SharedWindows()
    for i, p in enumerate(pols):
        base = Path(directory) / f"{i:02d}-{_file_name(p.name)}"
        models = models_of[p.name]
        if models:
            streams[p.name] = [(m, StreamReplay(p, c, base / f"model-{j}", shared))
                               for j, (m, c) in enumerate(model_variants(cfg, models))]
        else:
            streams[p.name] = [(None, StreamReplay(p, cfg, base, shared))]
    every = [s for group in streams.values() for _, s in group]
    total = len(windows)
    n = max(1, min(threads or usable_cores(), len(every)))
    if any(s.policy.pad_hook is not None for s in every):
        # a hook is Python (it holds the GIL: no gain) and may keep state that the model
        # variants of one policy share (the stand-in executor of real code): never two at once
        n = 1
    if n == 1:
        for k, frames in enumerate(windows):
            if progress is not None:
                progress(k, total)
            for s in every:
                s.feed(frames)
            del frames
            trim()
            if all(s.stopped for s in every):
                break
    else:
        _feed_threaded(windows, every, n, progress, total)
    out = {}
    for p in pols:
        group = streams[p.name]
        if len(group) == 1:
            out[p.name] = group[0][1].finish(windows)
        else:
            out[p.name] = combine_model_variants(p, cfg, models_of[p.name],
                                                 [(m, s.finish(windows)) for m, s in group])
    if owner is not None:
        for r in out.values():
            r.keep_files_with(owner)
    return out


def _feed_released(stream: Any, frames: Any) -> None:
    stream.feed(frames)
    release_arrow()


def _feed_threaded(windows: Any, streams: list, n: int, progress, total: int) -> None:
    """:func:`replay_windows`' loop with ``n`` threads feeding the streams of a window and one
    reading the next window."""
    from concurrent.futures import ThreadPoolExecutor

    it = iter(windows)
    end = object()
    predicates = list(dict.fromkeys(s.policy.predicate(s.config) for s in streams))

    def read_next():
        release_arrow()   # this thread's share of the last window's Arrow buffers
        frames = next(it, end)
        if frames is not end:
            with CLOCK.stage("frames"):
                for p in predicates:   # shared per-window caches, filled before the threads
                    frames.sched_real(p)   # share them (here, beside the deciding, not between)
        return frames

    with ThreadPoolExecutor(max_workers=n) as pool, ThreadPoolExecutor(max_workers=1) as reader:
        ahead = reader.submit(read_next)
        k = 0
        while True:
            frames = ahead.result()
            if frames is end:
                break
            if progress is not None:
                progress(k, total)
            live = [s for s in streams if not s.stopped]
            ahead = reader.submit(read_next)
            for f in [pool.submit(_feed_released, s, frames) for s in live]:
                f.result()
            del frames
            trim()
            k += 1
            if all(s.stopped for s in streams):
                break
        ahead.cancel()


def _file_name(name: str) -> str:
    """A policy name as a file name (``trtllm:PATH@REV`` and ``py:FILE:FN`` hold separators)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60]


def _span(iters) -> str:
    iters = list(iters)
    shown = ", ".join(str(x) for x in iters[:10])
    return shown + (f", ... ({len(iters) - 10} more)" if len(iters) > 10 else "")


@functools.cache
def _categories(names: tuple) -> pd.CategoricalDtype:
    """The categorical dtype of ``names`` (None left out), built once: building and validating
    it costs about 1 ms per column, a third of a small replay's CPU (measured on the bundled
    sample: 10 policies, 3 categorical columns in each table)."""
    return pd.CategoricalDtype([x for x in names if x is not None])


def _cat(codes: np.ndarray, names: tuple) -> pd.Categorical:
    c = np.asarray(codes, np.int64).ravel()
    if None in names:
        c = c - 1  # code 0 (None) becomes -1 (missing)
    return pd.Categorical.from_codes(c, dtype=_categories(names))


def _nullable(values: np.ndarray, mask: np.ndarray, dtype: str) -> pd.arrays.ExtensionArray:
    return pd.array(values.ravel(), dtype=dtype) if not mask.any() else \
        pd.arrays.BooleanArray(values.ravel().astype(bool), mask.ravel()) if dtype == "boolean" else \
        pd.arrays.IntegerArray(values.ravel().astype(np.int64), mask.ravel())


def _decision_columns(frames, o, st, n, stopped, crashed_row, removed, alive_at_stop) -> dict:
    """The decisions table's columns as arrays, one entry per column in
    ``DECISION_COLUMNS`` order: ``("plain", values)``, ``("cat", codes, names)`` (code 0 is
    missing when ``names[0]`` is None) or ``(dtype, values, mask)`` for the nullable ``Int64`` and
    ``boolean`` columns. Both forms of the table are built from these (:func:`_decisions_frame`,
    :func:`_decisions_arrow`)."""
    R = frames.num_ranks
    stop_mask = np.broadcast_to(stopped[:, None], (n, R))
    role = np.where(o["padded"], np.where(o["role_context"], 1, 2), 0)
    alive = o["survives"].copy()
    alive[-1] = alive_at_stop if stopped[-1] else alive[-1]
    return {
        "iter": ("plain", np.repeat(frames.iters[:n], R)),
        "rank": ("plain", np.tile(np.arange(R, dtype=np.int64), n)),
        "active": ("plain", o["active"].ravel()),
        "real": ("plain", frames.n_real[:n].ravel()),
        "schedulable": ("plain", st.schedulable[:n].ravel()),
        "window_real": ("plain", frames.window_real[:n].ravel()),
        "expected": ("plain", o["expected"].ravel()),
        "expected_source": ("cat", o["expected_source"], EXPECTED_SOURCE_NAMES),
        "carried_dummy": ("plain", st.carried[:n].ravel()),
        "carried_last": ("plain", st.carried_last[:n].ravel()),
        "padded": ("plain", o["padded"].ravel()),
        "pad_role": ("cat", role, (None, "context", "generation")),
        "alloc_failed": ("plain", o["alloc_failed"].ravel()),
        "postpadded": ("plain", o["postpadded"].ravel()),
        "batch": ("Int64", o["batch"], crashed_row),
        "can_queue": ("boolean", o["can_queue"], stop_mask),
        "can_queue_this_rank": ("boolean", o["can_queue_this_rank"], stop_mask),
        "processed_prev": ("boolean", o["processed_prev"], stop_mask),
        "surplus": ("plain", o["surplus"].ravel() | (o["crash"] & (o["crash_kind"] == 1)).ravel()),
        "crash": ("plain", o["crash"].ravel()),
        "removed_path": ("cat", removed, REMOVAL_PATH_NAMES),
        "dummy_alive": ("plain", alive.ravel()),
    }


def _decisions_frame(cols: dict) -> pd.DataFrame:
    out = {}
    for name, (kind, *rest) in cols.items():
        if kind == "plain":
            out[name] = rest[0]
        elif kind == "cat":
            out[name] = _cat(*rest)
        else:
            out[name] = _nullable(rest[0], rest[1], kind)
    return pd.DataFrame(out)


def _decisions_arrow(cols: dict):
    """The decisions as an Arrow table of the schema ``pa.Table.from_pandas`` gives
    :func:`_decisions_frame` (pandas metadata included, so it reads back as the same
    DataFrame), built from the arrays without a DataFrame: a streamed replay writes every
    decision of a long run (measured on a dataset of 32 ranks x 20k iterations: the post-mortem
    0.7 s CPU less, about 6 %)."""
    import pyarrow as pa
    schema = _decisions_schema(cols)
    arrays = []
    for field, (kind, *rest) in zip(schema, cols.values()):
        if kind == "plain":
            arrays.append(pa.array(np.ascontiguousarray(rest[0]), type=field.type))
        elif kind == "cat":
            codes, names = rest
            c = np.asarray(codes).ravel()
            if None in names:
                c = c.astype(np.int64) - 1
            idx = pa.array(c.astype(np.int8), mask=c < 0 if None in names else None,
                           type=field.type.index_type)
            arrays.append(pa.DictionaryArray.from_arrays(
                idx, pa.array([x for x in names if x is not None], type=field.type.value_type)))
        else:
            values, mask = rest[0].ravel(), rest[1].ravel()
            arrays.append(pa.array(values.astype(bool if kind == "boolean" else np.int64),
                                   mask=mask if mask.any() else None, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _decisions_schema(cols: dict):
    """The Arrow schema (pandas metadata included) that ``pa.Table.from_pandas`` gives the
    frame of ``cols``, from an empty frame of the same dtypes (one per set of dtypes)."""
    import pyarrow as pa
    key = tuple((name, kind, rest[0].dtype.str) for name, (kind, *rest) in cols.items())
    schema = _SCHEMAS.get(key)
    if schema is None:
        empty = {name: (kind, *(x[:0] if isinstance(x, np.ndarray) else x for x in rest))
                 for name, (kind, *rest) in cols.items()}
        schema = _SCHEMAS[key] = pa.Table.from_pandas(_decisions_frame(empty),
                                                      preserve_index=False).schema
    return schema


_SCHEMAS: dict = {}


@functools.lru_cache(maxsize=1)
def _empty_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Empty decisions and ledger tables, built once (categoricals are slow to build and every
    policy's stream starts from a copy)."""
    return _empty_decisions(), _ledger_frame([], [], [], [], [], [], [], [], [])


def _empty_decisions() -> pd.DataFrame:
    from replay.results import DECISION_COLUMNS
    return pd.DataFrame({c: [] for c in DECISION_COLUMNS})


def _ledger_frame(seq, rank, created, origin, role, iter_removed, path, skips, leaked) -> pd.DataFrame:
    return pd.DataFrame({
        "dummy": np.asarray(seq, np.int64),
        "rank": np.asarray(rank, np.int64),
        "iter_created": np.asarray(created, np.int64),
        "origin": pd.Categorical(origin, dtype=_categories(("pad", "postpad"))),
        "role": pd.Categorical(role, dtype=_categories(("context", "generation"))),
        "iter_removed": pd.array(iter_removed, dtype="Int64"),
        "removal_path": pd.Categorical(path, dtype=_categories(REMOVAL_PATH_NAMES)),
        "skips_survived": np.asarray(skips, np.int64),
        "leaked": np.asarray(leaked, bool),
    })


def _ledger(frames, o, st, n, survives, removed, crashed_row):
    iters = frames.iters[:n]
    new = o["padded"] | o["postpadded"]
    ci, cr = np.nonzero(new)                          # row-major: ordered by (iter, rank)
    ri, rr = np.nonzero(removed)
    stride = n + 1
    ckey = cr.astype(np.int64) * stride + ci
    rkey_order = np.argsort(rr.astype(np.int64) * stride + ri, kind="stable")
    rkey = (rr.astype(np.int64) * stride + ri)[rkey_order]
    pos = np.searchsorted(rkey, ckey, side="left")
    pos_c = np.minimum(pos, max(rkey.size - 1, 0))
    has_rm = (pos < rkey.size) & (rkey[pos_c] // stride == cr) if rkey.size else np.zeros(ci.size, bool)
    rm_row = np.where(has_rm, rkey[pos_c] % stride if rkey.size else 0, -1)
    cs = np.cumsum(survives, axis=0)
    end_row = np.where(has_rm, rm_row, n - 1)
    skips = cs[end_row, cr] - np.where(ci > 0, cs[np.maximum(ci - 1, 0), cr], 0)
    leaked = skips > 0
    # The categorical and nullable columns from codes, not from Python lists of names.
    context = o["role_context"][ci, cr] & o["padded"][ci, cr]
    origin = _cat(o["postpadded"][ci, cr], ("pad", "postpad"))
    role = _cat(~context, ("context", "generation"))
    path = _cat(np.where(has_rm, removed[rm_row, cr], 0), REMOVAL_PATH_NAMES)
    iter_removed = pd.arrays.IntegerArray(np.where(has_rm, iters[rm_row], 0).astype(np.int64),
                                          ~has_rm)
    ledger = _ledger_frame(np.arange(ci.size), cr, iters[ci], origin, role, iter_removed, path,
                           skips, leaked)
    leaks = [_leak(frames, o, int(ci[d]), int(cr[d]), "context" if context[d] else "generation",
                   int(d))
             for d in np.flatnonzero(leaked)]
    return ledger, leaks


def _leak(frames: RunFrames, o: dict, row: int, rank: int, role: str, dummy: int) -> Leak:
    """The leak of the dummy created at ``row`` on ``rank``: a dummy not removed at its creation
    row survived it, so that row is its first skip; the cause ranks offered batch 0 there."""
    cause = tuple(int(r) for r in np.flatnonzero(o["batch"][row] == 0))
    states = {c: tuple((rid, RequestState(s).name) for rid, s in frames.requests_of(row, c))
              for c in cause}
    it = int(frames.iters[row])
    return Leak(rank=rank, iter_created=it, iter_skipped=it, cause_ranks=cause, cause_states=states,
                role=role, dummy=dummy)


def _first_divergence(frames, o, n, stopped, crashed_row) -> Divergence | None:
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


__all__ = ["Carry", "SharedWindows", "StreamReplay", "replay_input", "replay_windows", "run",
           "run_all"]
