"""The simulator's executor loop: the workload moves requests, ``replay.step.decide`` decides.

Per iteration, in the executor's order (domain doc §4):

1. arrivals join the waiting queue;
2. fetch: ``len(active_requests)`` of every rank (a leaked dummy counts), pop as many requests as
   the fleet can hold, compute ``expected_num_active_requests`` (§5, capped when the policy
   caps) and route each popped request to the least-loaded rank below ``expected``;
3. disaggregated bookkeeping: KV transfers that completed become DISAGG_GENERATION_TRANS_COMPLETE,
   gen-first context requests called by the generation side become CONTEXT_INIT;
4. the frame (what the trace records) is taken here, at pad entry;
5. ``decide()``: entry check, pad, schedule, post-pad, ``can_queue``, dummy removal;
6. with ``can_queue`` the scheduled requests advance one token (or run their prefill); ranks that
   process their previous batch drop their GENERATION_TO_COMPLETE requests; DISAGG_GENERATION_INIT
   requests start their KV transfer.

State lives in ``(ranks, slots)`` numpy arrays kept in list order (slot ``j < n[r]`` is the
``j``-th element of rank ``r``'s ``active_requests``); nothing is a Python object per request.
The surviving dummy of each rank is tracked by its position in that list.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from forensics.errors import ConfigError
from forensics.simulate.workload import (
    CONTEXT_SERVER,
    GENERATION_SERVER,
    Workload,
)
from replay.config import RunConfig
from replay.policy import Policy, Predicate
from replay.states import CONTEXT_INTENT_STATES, CONTEXT_ONLY_STATES, GENERATION_ONLY_STATES
from replay.states import RequestState as S
from replay.states import micro_batch_window
from replay.step import (
    INTENT_CONTEXT,
    INTENT_GENERATION,
    INTENT_NONE,
    CRASH_ALLOC_NONE,
    CRASH_KIND_NAMES,
    StepInputs,
    StepOutputs,
    decide,
)

log = logging.getLogger(__name__)

#: KV-cache block size of the fake ``kvCacheStats`` / ``kv_cache_util``.
TOKENS_PER_BLOCK = 32
#: Fake wall clock: the first body starts this many seconds after 2026-07-09 00:00:00 UTC,
#: plus a seed-dependent offset (never the machine's clock).
_EPOCH_2026_07_09 = 1783555200.0


def _lut(mask_over_all_states: np.ndarray) -> np.ndarray:
    """A lookup table indexed by ``state value + 1`` (values -1..30) from an ALL_STATES mask."""
    from replay.states import ALL_STATES
    lut = np.zeros(32, dtype=bool)
    for s, m in zip(ALL_STATES, mask_over_all_states):
        lut[int(s) + 1] = bool(m)
    return lut


@dataclasses.dataclass(frozen=True)
class Body:
    """One loop body of every rank, handed to the writers.

    Arrays are ``(R,)`` unless noted and are views valid only during the writer call.

    Fields:
        iter: executor ``iter_counter`` (stats ``iter``; the log line printed for it says iter+1).
        n_real: real requests in ``active_requests`` at pad entry.
        ids, states: ``(R, slots)`` request ids and state values in list order (first ``n_real``).
        carried: a dummy survived an earlier iteration and is in the list.
        carried_pos: its index in the list (0..n_real).
        carried_context: that dummy has the context role.
        alloc_ok: ``add_dummy_requests`` would succeed on the rank this iteration (when the
            dummy fits).
        kv_precheck_ok: the dummy fits (``_has_adp_dummy_kv_capacity`` would say so).
        alloc_recorded_fail: the rank tried to allocate a dummy and got None.
        precheck_recorded_fail: the rank's KV-capacity precheck ran and said the dummy cannot fit.
        out: ``decide()``'s outputs.
        crashed: some rank died in this body (it is the last).
        sched_ctx, sched_gen: real context / generation requests in the scheduled batch.
        sched_ctx_tokens: prompt tokens of the scheduled context requests.
        completed: requests that finished on each rank in this body.
        queued: requests left in the waiting queue after the fetch.
        fetched_rank_total: requests routed to each rank so far (``currank_total_requests`` a).
        fetched_total: requests popped so far (its b).
        kv_used_blocks: fake KV blocks in use on each rank.
        kv_max_blocks: fake KV blocks per rank.
        start_s: fake epoch seconds at the top of the body.
        host_step_ms: fake host time of the body.
        prev_device_step_ms: fake device time of the previous body (None on the first).
    """

    iter: int
    n_real: np.ndarray
    ids: np.ndarray
    states: np.ndarray
    carried: np.ndarray
    carried_pos: np.ndarray
    carried_context: np.ndarray
    alloc_ok: np.ndarray
    kv_precheck_ok: np.ndarray
    alloc_recorded_fail: np.ndarray
    precheck_recorded_fail: np.ndarray
    out: StepOutputs
    crashed: bool
    sched_ctx: np.ndarray
    sched_gen: np.ndarray
    sched_ctx_tokens: np.ndarray
    completed: np.ndarray
    queued: int
    fetched_rank_total: np.ndarray
    fetched_total: int
    kv_used_blocks: np.ndarray
    kv_max_blocks: int
    start_s: float
    host_step_ms: float
    prev_device_step_ms: float | None


class Sink(Protocol):
    """A writer fed one :class:`Body` at a time."""

    def body(self, body: Body) -> None: ...


@dataclasses.dataclass(frozen=True)
class LoopSummary:
    """What happened in a simulated run.

    Fields:
        iters: loop bodies run (the crash body included).
        crash_iter: iteration of the crash, or None.
        crash_ranks: ranks that died in it.
        crash_kind: ``"assert"`` or ``"dummy_alloc_none"`` (None without a crash).
        skipped_iters: bodies where ``can_queue`` was False fleet-wide while some rank had a
            non-empty batch (the forward step was skipped for it).
        idle_iters: bodies where every rank's batch was empty (nothing to run).
        leaked_dummies: dummies that survived a skipped iteration (each counted once).
        first_leak_iter: iteration of the first leak, or None.
        surplus_warnings: surplus warnings logged (PR #17278 builds).
        alloc_warnings: "Cannot allocate ... pad dummy" warnings logged.
        requests_arrived, requests_completed: totals.
        end_s: fake epoch seconds at the end of the last body.
    """

    iters: int
    crash_iter: int | None
    crash_ranks: tuple[int, ...]
    crash_kind: str | None
    skipped_iters: int
    idle_iters: int
    leaked_dummies: int
    first_leak_iter: int | None
    surplus_warnings: int
    alloc_warnings: int
    requests_arrived: int
    requests_completed: int
    end_s: float


class _Queue:
    """The waiting queue as growing column buffers (FIFO)."""

    COLS = ("id", "out", "lat", "prompt", "state")

    def __init__(self) -> None:
        self.cap = 1024
        self.cols = {c: np.zeros(self.cap, np.int64) for c in self.COLS}
        self.head = 0
        self.tail = 0

    def __len__(self) -> int:
        return self.tail - self.head

    def push(self, **cols: np.ndarray) -> None:
        m = len(cols["id"])
        if self.tail + m > self.cap:
            live = self.tail - self.head
            new_cap = max(self.cap, 2 * (live + m))
            for c in self.COLS:
                buf = np.zeros(new_cap, np.int64)
                buf[:live] = self.cols[c][self.head:self.tail]
                self.cols[c] = buf
            self.cap, self.head, self.tail = new_cap, 0, live
        for c in self.COLS:
            self.cols[c][self.tail:self.tail + m] = cols[c]
        self.tail += m

    def pop(self, m: int) -> dict[str, np.ndarray]:
        out = {c: self.cols[c][self.head:self.head + m].copy() for c in self.COLS}
        self.head += m
        return out


def _route(counts: list[int], expected: int, n: int) -> list[int]:
    """Rank of each of ``n`` new requests: the least-loaded rank below ``expected`` (ties: lowest)."""
    placed = []
    c = list(counts)
    R = len(c)
    for _ in range(n):
        best, low = -1, expected
        for r in range(R):
            if c[r] < low:
                best, low = r, c[r]
        c[best] += 1
        placed.append(best)
    return placed


def _expected(policy: Policy, cfg: RunConfig, total: int, floor: int) -> int:
    """``expected_num_active_requests`` for a fleet total (after the fetch) and the largest count
    before it (§5); the same formula as ``replay.step.expected_step``."""
    fair = -(-total // cfg.tp_size)
    e = max(math.ceil(cfg.expected_multiplier * fair), floor)
    return min(e, cfg.cap) if policy.cap else e


def run(workload: Workload, policy: Policy, *, iters: int, seed: int,
        sinks: Sequence[Sink] = ()) -> LoopSummary:
    """Simulate ``iters`` loop bodies (fewer if a rank crashes) and feed each to ``sinks``.

    Args:
        workload: the fleet and its traffic.
        policy: the executor version deciding pad, schedule and removal.
        iters: loop bodies to run.
        seed: seeds every random draw (same seed, same run).
        sinks: writers called with each :class:`Body`, in order.

    Returns:
        A :class:`LoopSummary`.
    """
    if iters < 1:
        raise ConfigError(f"iters must be at least 1, got {iters}")
    w = workload
    cfg = w.run_config(build=policy.name)
    R, cap, mbs = w.ranks, w.effective_cap, w.max_batch_size
    rng = np.random.default_rng(seed)
    trng = np.random.default_rng([seed, 7])  # timing only: never disturbs the workload stream
    pred_lut = _lut(policy.predicate(cfg).mask(cfg))
    win_lut = _lut(micro_batch_window(cfg.encoder_decoder).mask())
    ctx_lut = np.zeros(32, bool)
    ctx_lut[[int(S.CONTEXT_INIT) + 1, int(S.DISAGG_CONTEXT_INIT_AND_TRANS) + 1]] = True
    postpad_cap = policy.postpads(cfg) and cfg.enable_attention_dp
    sched_lut = _lut(Predicate.SCHEDULER.mask(cfg))
    ctx_intent_lut = np.zeros(32, bool)
    ctx_intent_lut[[int(x) + 1 for x in CONTEXT_INTENT_STATES]] = True
    ctx_only = np.array(sorted(int(x) for x in CONTEXT_ONLY_STATES))
    gen_only = np.array(sorted(int(x) for x in GENERATION_ONLY_STATES))
    role_ctx = False  # the era's dummy role (generation until routed request types say otherwise)

    Sl = cap + 4
    ids = np.zeros((R, Sl), np.int64)
    st = np.zeros((R, Sl), np.int64)
    rem = np.zeros((R, Sl), np.int64)      # tokens left to generate
    lat = np.zeros((R, Sl), np.int64)      # latency drawn at arrival (KV transfer / wait)
    ready = np.zeros((R, Sl), np.int64)    # iteration the pending transition completes
    prompt = np.zeros((R, Sl), np.int64)
    outlen = np.zeros((R, Sl), np.int64)
    arrays = [ids, st, rem, lat, ready, prompt, outlen]
    n = np.zeros(R, np.int64)
    carried = np.zeros(R, bool)
    cpos = np.zeros(R, np.int64)
    cctx = np.zeros(R, bool)
    fetched_rank = np.zeros(R, np.int64)
    fetched_total = 0
    queue = _Queue()
    next_id = 1
    neg1 = np.full(R, -1, np.int64)
    burst_kv = w.burst_kv_latency or w.kv_latency
    scheduled: dict[int, int] = {}
    for i, c in w.arrivals:
        scheduled[int(i)] = scheduled.get(int(i), 0) + int(c)
    kv_max_blocks = cap * max(1, math.ceil(2 * (w.prompt_len.median + w.output_len.median)
                                           / TOKENS_PER_BLOCK))

    t = _EPOCH_2026_07_09 + 8 * 3600 + (seed * 9973) % 36000
    prev_dev: float | None = None
    skipped = idle = leaked = surplus_w = alloc_w = completed_total = 0
    first_leak: int | None = None
    crash_iter: int | None = None
    crash_ranks: tuple[int, ...] = ()
    crash_kind: str | None = None
    k = -1
    for k in range(iters):
        # 1. arrivals
        m = int(rng.poisson(w.arrival_rate)) if w.arrival_rate > 0 else 0
        mb = 0
        if w.burst_every > 0 and k >= w.burst_start and rng.random() < 1.0 / w.burst_every:
            mb = max(1, int(rng.poisson(w.burst_size)))
        m += scheduled.get(k, 0)
        tot = m + mb
        if tot:
            out_l = w.output_len.draw(rng, tot)
            pr = w.prompt_len.draw(rng, tot)
            if w.mode == GENERATION_SERVER:
                la = np.concatenate([w.kv_latency.draw(rng, m), burst_kv.draw(rng, mb)])
                s0 = np.full(tot, int(S.DISAGG_GENERATION_INIT))
            elif w.mode == CONTEXT_SERVER:
                la = w.wait_scheduler_latency.draw(rng, tot)
                waits = rng.random(tot) < w.wait_scheduler_fraction
                s0 = np.where(waits, int(S.DISAGG_CONTEXT_WAIT_SCHEDULER), int(S.CONTEXT_INIT))
            else:
                la = np.zeros(tot, np.int64)
                s0 = np.full(tot, int(S.CONTEXT_INIT))
            queue.push(id=np.arange(next_id, next_id + tot), out=out_l, lat=la, prompt=pr, state=s0)
            next_id += tot

        # 2. fetch and route
        counts = n + carried
        total = int(counts.sum())
        floor = int(counts.max())
        nf = min(len(queue), max(R * cap - total, 0))
        while True:
            E = _expected(policy, cfg, total + nf, floor)
            room = int(np.maximum(E - counts, 0).sum())
            if room >= nf:
                break
            nf = room
        new_real = np.zeros(R, np.int64)
        ctx_now = gen_now = False
        if nf:
            req = queue.pop(nf)
            where = _route(counts.tolist(), E, nf)
            slot = []
            nl = n.tolist()
            for r in where:
                slot.append(nl[r])
                nl[r] += 1
            if max(nl) > Sl:
                grow = max(nl) + 4 - Sl
                arrays = [np.concatenate([a, np.zeros((R, grow), a.dtype)], axis=1) for a in arrays]
                ids, st, rem, lat, ready, prompt, outlen = arrays
                Sl += grow
            wr, ws = np.array(where), np.array(slot)
            ctx_now = bool(np.isin(req["state"], ctx_only).any())
            gen_now = bool(np.isin(req["state"], gen_only).any())
            ids[wr, ws] = req["id"]
            st[wr, ws] = req["state"]
            outlen[wr, ws] = req["out"]
            rem[wr, ws] = req["out"]
            lat[wr, ws] = req["lat"]
            prompt[wr, ws] = req["prompt"]
            ready[wr, ws] = k + req["lat"]  # used by WAIT_SCHEDULER requests
            n = np.array(nl, np.int64)
            new_real = np.bincount(wr, minlength=R).astype(np.int64)
            fetched_rank += new_real
            fetched_total += nf

        if cfg.disaggregated:  # _update_adp_dummy_role reads the types routed this iteration
            role_ctx = policy.dummy_role.context_after(role_ctx, ctx_now, gen_now)

        # 3. disaggregated bookkeeping
        valid = np.arange(Sl)[None, :] < n[:, None]
        if w.mode == GENERATION_SERVER:
            done = (st == int(S.DISAGG_GENERATION_TRANS_IN_PROGRESS)) & (ready <= k) & valid
            st[done] = int(S.DISAGG_GENERATION_TRANS_COMPLETE)
        elif w.mode == CONTEXT_SERVER:
            called = (st == int(S.DISAGG_CONTEXT_WAIT_SCHEDULER)) & (ready <= k) & valid
            st[called] = int(S.CONTEXT_INIT)

        # 4-5. pad entry and the executor's decisions
        sidx = st + 1
        winm = win_lut[sidx] & valid
        window_real = winm.sum(axis=1)
        before = ((st < int(S.CONTEXT_INIT)) & valid).sum(axis=1)
        if w.alloc_fail_prob > 0:
            alloc_ok = rng.random(R) >= w.alloc_fail_prob
        else:
            alloc_ok = np.ones(R, bool)
        if w.kv_precheck_fail_prob > 0:
            kv_ok = rng.random(R) >= w.kv_precheck_fail_prob
        else:
            kv_ok = np.ones(R, bool)
        inp = StepInputs(n_real=n.copy(), sched_real=(pred_lut[sidx] & valid).sum(axis=1),
                         window_real=window_real, new_real=new_real,
                         all_before_ctx=(n > 0) & (before == n), alloc_ok=alloc_ok,
                         real_batch=neg1, expected_recorded=neg1, recorded_counts=neg1,
                         carried=carried.copy(), carried_last=carried & (cpos == n),
                         intent=np.where((ctx_intent_lut[sidx] & sched_lut[sidx] & valid).any(axis=1),
                                         INTENT_CONTEXT,
                                         np.where((sched_lut[sidx] & valid).any(axis=1),
                                                  INTENT_GENERATION, INTENT_NONE)).astype(np.int8),
                         role_context=np.full(R, role_ctx), kv_precheck_ok=kv_ok)
        out = decide(policy, cfg, inp)
        if int(out.expected[0]) != E:
            raise RuntimeError(f"iteration {k}: the router used expected={E} but decide() computed "
                               f"{int(out.expected[0])}; the simulator and replay.step disagree")
        crashed = bool(out.crash.any())
        cq = bool(out.can_queue[0])

        cum = np.cumsum(winm, axis=1)
        schedm = winm & (cum <= mbs)
        is_ctx = ctx_lut[sidx] & schedm
        sched_ctx = is_ctx.sum(axis=1)
        sched_gen = schedm.sum(axis=1) - sched_ctx
        sched_ctx_tokens = (prompt * is_ctx).sum(axis=1)
        # What a recorder sees: a failed precheck where it ran (the pad step where the version
        # prechecks, the post-schedule pad always), else a None from the allocation.
        wanted = out.alloc_failed | (out.crash_kind == CRASH_ALLOC_NONE)
        pre_blocked = wanted & ~kv_ok & policy.prechecks(cfg)
        alloc_fail_rec = wanted & ~pre_blocked & ~(alloc_ok & kv_ok)
        if postpad_cap:
            post_wanted = ((out.batch == 0) & (out.active > 0) & (out.expected > 0)
                           & (out.active < cap))
            pre_blocked = pre_blocked | (post_wanted & ~kv_ok)
            alloc_fail_rec = alloc_fail_rec | (post_wanted & kv_ok & ~alloc_ok)

        # 6. what the body does to the requests (masks first: writers see the frame unchanged)
        rm = (st == int(S.GENERATION_TO_COMPLETE)) & valid & out.processed_prev[:, None]
        fwd = schedm if (cq and not crashed) else np.zeros_like(schedm)
        if w.mode == CONTEXT_SERVER:
            finished_ctx = fwd & ctx_lut[sidx]
            advance = fwd & ~finished_ctx
            fin = finished_ctx
        else:
            advance = fwd
            fin = fwd & (rem == 1)
        completed = (fin.sum(axis=1) if not w.overlap else
                     ((st == int(S.GENERATION_TO_COMPLETE)) & rm).sum(axis=1))

        blocks = -(-(prompt + (outlen - rem)) // TOKENS_PER_BLOCK)
        kv_used = (blocks * valid).sum(axis=1)
        busy = int(out.batch.max()) if cq else 0
        host_ms = w.step_time_ms * (0.35 + 0.65 * min(busy, mbs) / mbs) * float(
            trng.lognormal(0.0, 0.08))
        body = Body(iter=k, n_real=n, ids=ids, states=st, carried=carried, carried_pos=cpos,
                    carried_context=cctx, alloc_ok=alloc_ok, kv_precheck_ok=kv_ok,
                    alloc_recorded_fail=alloc_fail_rec, precheck_recorded_fail=pre_blocked,
                    out=out, crashed=crashed, sched_ctx=sched_ctx, sched_gen=sched_gen,
                    sched_ctx_tokens=sched_ctx_tokens, completed=completed, queued=len(queue),
                    fetched_rank_total=fetched_rank, fetched_total=fetched_total,
                    kv_used_blocks=kv_used, kv_max_blocks=kv_max_blocks, start_s=t,
                    host_step_ms=host_ms, prev_device_step_ms=prev_dev)
        for s in sinks:
            s.body(body)
        surplus_w += int(out.surplus.sum())
        alloc_w += int(out.alloc_failed.sum())
        if crashed:
            crash_iter = k
            crash_ranks = tuple(int(r) for r in np.flatnonzero(out.crash))
            crash_kind = CRASH_KIND_NAMES[int(out.crash_kind[crash_ranks[0]])]
            break
        if not cq:
            if out.batch.any():
                skipped += 1
            else:
                idle += 1
        new_leaks = out.survives & ~inp.carried
        if new_leaks.any():
            leaked += int(new_leaks.sum())
            if first_leak is None:
                first_leak = k
        completed_total += int(completed.sum())

        # apply the body
        rem = rem - advance
        if w.mode == CONTEXT_SERVER:
            if w.overlap:
                st[fin] = int(S.GENERATION_TO_COMPLETE)
            else:
                rm |= fin
        else:
            st[advance & (rem > 0)] = int(S.GENERATION_IN_PROGRESS)
            done_now = advance & (rem == 0)
            if w.overlap:
                st[done_now] = int(S.GENERATION_TO_COMPLETE)
            else:
                rm |= done_now
        if w.mode == GENERATION_SERVER:
            init = (st == int(S.DISAGG_GENERATION_INIT)) & valid
            st[init] = int(S.DISAGG_GENERATION_TRANS_IN_PROGRESS)
            ready[init] = k + 1 + lat[init]
        pos_pre = np.where(carried, cpos, n)
        new_role_ctx = out.padded & out.role_context
        cctx = np.where(carried, cctx, new_role_ctx) & out.survives
        carried = out.survives.copy()
        if rm.any():
            keep = valid & ~rm
            cpos = (keep & (np.arange(Sl)[None, :] < pos_pre[:, None])).sum(axis=1)
            order = np.argsort(~keep, axis=1, kind="stable")
            arrays = [np.take_along_axis(a, order, axis=1) for a in (ids, st, rem, lat, ready,
                                                                      prompt, outlen)]
            ids, st, rem, lat, ready, prompt, outlen = arrays
            n = keep.sum(axis=1).astype(np.int64)
        else:
            cpos = pos_pre
            arrays = [ids, st, rem, lat, ready, prompt, outlen]
        cpos = np.where(carried, cpos, 0)
        prev_dev = host_ms * 0.92
        t += host_ms / 1000.0
    return LoopSummary(iters=k + 1, crash_iter=crash_iter, crash_ranks=crash_ranks,
                       crash_kind=crash_kind, skipped_iters=skipped, idle_iters=idle, leaked_dummies=leaked,
                       first_leak_iter=first_leak, surplus_warnings=surplus_w, alloc_warnings=alloc_w,
                       requests_arrived=next_id - 1, requests_completed=completed_total, end_s=t)
