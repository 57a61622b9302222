"""The straightforward replay: a loop over iterations, ranks and per-request Python objects.

Same semantics as ``replay.walk`` (read its docstring), written the obvious way: each rank's
``active_requests`` is a list of request objects, the carried dummy is an object in it, removal
checks whether it is the last element. It is the speed baseline of ``benchmarks/replay.py`` and
the oracle the engine is tested against (``tests/replay/test_properties.py``).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from replay.errors import PolicyError
from replay.config import RunConfig
from replay.frames import RunFrames
from replay.policy import AllocFailure, EntryCheck, FrameView, PadOutcome, Policy, Predicate
from replay.resolve import resolve_policy
from replay.model_variants import replay_both_ways
from replay.results import Crash, Divergence, Leak, ReplayResult, crash_message, fleet_skips
from replay.states import ALL_STATES, RequestState, micro_batch_window


@dataclasses.dataclass
class Request:
    """One entry of ``active_requests``."""

    id: int
    state: int
    first_seen: int = -1
    dummy: bool = False
    seq: int = -1           # ledger number of a dummy
    rank: int = -1          # rank holding a dummy
    created: int = -1       # iteration a dummy was created
    origin: str = "pad"
    role: str = "generation"
    skips: int = 0
    first_skip: int = -1


def run_reference(frames: RunFrames, config: RunConfig | None = None,
                  policy: Policy | str | None = None) -> ReplayResult:
    """Replay ``frames`` under ``policy`` with per-request objects (slow; oracle and baseline)."""
    pol = resolve_policy(policy if policy is not None else "newest")
    cfg = config or frames.config
    models = pol.model_dependent(cfg)
    if models:  # model unknown, a gate reads it: both ways, as replay.walk.run does
        return replay_both_ways(pol, cfg, models, lambda c: _reference_one(frames, pol, c))
    return _reference_one(frames, pol, cfg)


def _reference_one(frames: RunFrames, pol: Policy, cfg: RunConfig) -> ReplayResult:
    R = frames.num_ranks
    pmask = pol.predicate(cfg).mask(cfg)
    counts = {int(s): bool(pmask[i]) for i, s in enumerate(ALL_STATES)}
    window = micro_batch_window(cfg.encoder_decoder)
    use_recorded = frames.recorded_expected_applies(pol)
    first_iter = min([int(x) for x in frames.iters[:1]] + list(frames.dropped_iters)) \
        if (frames.num_iters or frames.dropped_iters) else 0
    adp = cfg.enable_attention_dp
    pads = pol.pads_run(cfg)   # the pad methods run (ADP on, not skipped under dkv)
    intent_path = pol.uses_forward_intent(cfg)
    role_ctx = frames.dummy_role_context(pol)
    sched_states = {int(s) for i, s in enumerate(ALL_STATES)
                    if Predicate.SCHEDULER.mask(cfg)[i]}
    ctx_states = {int(RequestState.CONTEXT_INIT), int(RequestState.ENCODER_INIT)}

    role_of = getattr(frames, "dummy_role_context", None)  # the loop's dummy-role model
    roles = role_of(pol) if role_of is not None else None
    carried: list[Request | None] = [None] * R
    rows: list[dict] = []
    dummies: list[Request] = []
    removal: dict[int, tuple[int, str]] = {}
    leaks: list[Leak] = []
    crash: Crash | None = None
    divergence: Divergence | None = None

    for i in range(frames.num_iters):
        it = int(frames.iters[i])
        lists: list[list[Request]] = []
        new_counts = []
        for r in range(R):
            k = i * R + r
            a, b = int(frames.req_offsets[k]), int(frames.req_offsets[k + 1])
            reqs = [Request(int(frames.req_id[j]), int(frames.req_state[j]), int(frames.req_first[j]))
                    for j in range(a, b)]
            new_counts.append(sum(1 for q in reqs if q.first_seen == it and it != first_iter))
            d = carried[r]
            if d is not None:
                before = [q for q in reqs if q.first_seen <= d.created]
                after = [q for q in reqs if q.first_seen > d.created]
                reqs = before + [d] + after
            lists.append(reqs)
        sizes = [len(x) for x in lists]
        rec_counts = [int(frames.recorded_counts[i, r]) for r in range(R)]
        total = sum(sizes)
        fair = math.ceil(total / cfg.tp_size)
        computed = max(math.ceil(cfg.expected_multiplier * fair),
                       max(s - n for s, n in zip(sizes, new_counts)))
        if pol.cap:
            computed = min(computed, cfg.cap)
        match = sizes == rec_counts

        row_of = []
        crashed = []
        intents = []
        for lst in lists:  # each rank's forward intent, all-reduced with MAX below
            ok = [q.state for q in lst if not q.dummy and q.state in sched_states]
            intents.append(2 if any(x in ctx_states for x in ok) else 1 if ok else 0)
        fleet_intent = max(intents) if intents else 0
        expectations = []
        for r in range(R):
            rec_exp = int(frames.expected_recorded[i, r])
            if use_recorded and rec_exp >= 0 and match:
                expectations.append((rec_exp, "recorded"))
            else:
                expectations.append((computed, "computed"))
        # Real code with collectives runs the whole iteration at once (lockstep, see
        # replay.lockstep.run_fleet); its outcomes are then read rank by rank.
        fleet = getattr(pol.pad_hook, "fleet", None)
        fleet_out = None
        if fleet is not None:
            role = None if roles is None else bool(roles[i])
            fleet_out = fleet([FrameView(iter=it, rank=r, requests=tuple(
                (q.id if not q.dummy else 0, q.state, q.dummy) for q in lists[r]),
                expected=expectations[r][0], config=cfg, alloc_ok=bool(frames.alloc_ok[i, r]),
                new_requests=new_counts[r], kv_precheck_ok=bool(frames.kv_precheck_ok[i, r]))
                for r in range(R)], role_context=role)
        for r in range(R):
            lst = lists[r]
            expected, source = expectations[r]
            alloc_ok = bool(frames.alloc_ok[i, r])
            precheck_ok = bool(frames.kv_precheck_ok[i, r])
            carried_d = carried[r]
            real = [q for q in lst if not q.dummy]
            schedulable = sum(1 for q in lst if q.dummy or counts[q.state])
            row = dict(iter=it, rank=r, active=len(lst), real=len(real), schedulable=schedulable,
                       window_real=sum(1 for q in real if q.state in window), expected=expected,
                       expected_source=source, carried_dummy=carried_d is not None,
                       carried_last=carried_d is not None and lst[-1] is carried_d, padded=False,
                       pad_role=None, alloc_failed=False, postpadded=False, surplus=False,
                       crash=False, crash_kind=None, crash_msg=None)
            if pol.pad_hook is not None:
                view = FrameView(iter=it, rank=r, requests=tuple((q.id if not q.dummy else 0, q.state,
                                                                   q.dummy) for q in lst),
                                 expected=expected, config=cfg, alloc_ok=alloc_ok,
                                 new_requests=new_counts[r], kv_precheck_ok=precheck_ok)
                try:
                    out = fleet_out[r] if fleet_out is not None else pol.pad_hook(view)
                except PolicyError:
                    raise
                except Exception as e:
                    out = PadOutcome(padded=False, crash=f"{type(e).__name__}: {e}")
                row["surplus"] = bool(out.surplus_warning)
                if out.crash is not None:
                    row.update(crash=True, crash_kind="hook", crash_msg=out.crash)
                else:
                    row["alloc_failed"] = bool(out.alloc_failed)
                    if out.padded and carried_d is None:
                        row["padded"] = True
                        row["pad_role"] = "context" if out.role == "context" else "generation"
            else:
                # Requests fetched this iteration do not count (step.over_expected explains why).
                if pads and len(lst) - new_counts[r] > expected:
                    row["surplus"] = True
                    if pol.entry_check is EntryCheck.ASSERT:
                        row.update(crash=True, crash_kind="assert")
                if intent_path:
                    n_sched = sum(1 for q in real if q.state in sched_states)
                    needs = fleet_intent > 0 and n_sched == 0 and carried_d is None
                    ctx = fleet_intent == 2
                else:
                    exp_eff = max(expected, len(lst)) if row["surplus"] else expected
                    needs = exp_eff > 0 and schedulable == 0
                    ctx = bool(role_ctx[i])
                if not row["crash"] and pads and needs:
                    if pol.prechecks(cfg) and not precheck_ok:
                        # "Unable to fit the complete attention-DP dummy KV allocation": no pad.
                        row["alloc_failed"] = True
                    elif not (alloc_ok and precheck_ok):
                        # Attempted and refused: None indexed unchecked, or tolerated.
                        if pol.alloc_failure_for(cfg) is AllocFailure.CRASH:
                            row.update(crash=True, crash_kind="dummy_alloc_none")
                        else:
                            row["alloc_failed"] = True
                    else:
                        row["padded"] = True
                        row["pad_role"] = "context" if ctx else "generation"
            if row["padded"]:
                d = Request(0, int(RequestState.GENERATION_IN_PROGRESS), dummy=True, seq=len(dummies),
                            created=it, origin="pad", role=row["pad_role"], rank=r)
                dummies.append(d)
                lst.append(d)
            if row["crash"]:
                crashed.append(r)
            row_of.append(row)

        for r in range(R):
            row, lst = row_of[r], lists[r]
            if row["crash"]:
                row["batch"] = None
                continue
            rb = int(frames.real_batch[i, r])
            in_window = sum(1 for q in lst if not q.dummy and q.state in window)
            real_batch = rb if rb >= 0 else min(in_window, cfg.max_batch_size)
            has_dummy = any(q.dummy for q in lst)
            batch = min(real_batch + has_dummy, max(cfg.max_batch_size, real_batch))
            if (pol.postpads(cfg) and pads and batch == 0 and row["active"] > 0
                    and row["expected"] > 0 and row["active"] < cfg.cap
                    and bool(frames.alloc_ok[i, r]) and bool(frames.kv_precheck_ok[i, r])):
                d = Request(0, int(RequestState.GENERATION_IN_PROGRESS), dummy=True, seq=len(dummies),
                            created=it, origin="postpad", role="generation", rank=r)
                dummies.append(d)
                lst.append(d)
                row["postpadded"] = True
                batch = 1
            row["batch"] = batch
        rows.extend(row_of)
        if crashed:
            r0 = crashed[0]
            row = row_of[r0]
            kind = row["crash_kind"]
            msg = crash_message(kind, int(row["expected"]), int(row["active"]), row["crash_msg"])
            crash = Crash(iter=it, rank=r0, ranks=tuple(crashed), kind=kind,
                          expected=int(row["expected"]), active=int(row["active"]), message=msg)
            for row in row_of:
                row.update(can_queue=None, can_queue_this_rank=None, processed_prev=None)
            break

        batches = [row["batch"] for row in row_of]
        can_queue = all(b > 0 for b in batches) if adp else None
        for r in range(R):
            row, lst = row_of[r], lists[r]
            cq = can_queue if adp else batches[r] > 0
            row["can_queue"] = cq
            row["can_queue_this_rank"] = batches[r] > 0
            row["processed_prev"] = (cq or batches[r] == 0) if cfg.overlap_scheduler else cq
            carried[r] = None
            for d in [q for q in lst if q.dummy]:
                if cq:
                    path = "update_states_tp" if lst[-1] is d else "handle_responses"
                    removal[d.seq] = (it, path)
                    lst.remove(d)
                elif d.created == it and (d.origin == "postpad" or pol.rolls_back(cfg)):
                    removal[d.seq] = (it, "rollback")
                else:
                    d.skips += 1
                    if d.first_skip < 0:
                        d.first_skip = it
                        cause = tuple(c for c in range(R) if batches[c] == 0)
                        states = {c: tuple((q.id, RequestState(q.state).name) for q in lists[c]
                                           if not q.dummy) for c in cause}
                        leaks.append(Leak(rank=r, iter_created=d.created, iter_skipped=it,
                                          cause_ranks=cause, cause_states=states, role=d.role,
                                          dummy=d.seq))
                    carried[r] = d

    for row in rows:
        if divergence is not None:
            break
        i = int(np.searchsorted(frames.iters, row["iter"]))
        r = row["rank"]
        checks = (("padded", int(frames.rec_padded[i, r]), row["padded"],
                   not row["crash"]),
                  ("postpadded", int(frames.rec_postpadded[i, r]), row["postpadded"],
                   not row["crash"]),
                  ("scheduled", int(frames.rec_scheduled[i, r]), row["batch"], not row["crash"]),
                  ("can_queue", int(frames.rec_can_queue[i, r]), row["can_queue"],
                   row["can_queue"] is not None))
        for name, rec, rep, valid in checks:
            if valid and rec >= 0:
                recv = bool(rec) if name != "scheduled" else rec
                if recv != rep:
                    divergence = Divergence(iter=row["iter"], rank=r, field=name, recorded=recv,
                                            replayed=rep)
                    break

    decisions = pd.DataFrame(rows, columns=["iter", "rank", "active", "real", "schedulable",
                                            "window_real", "expected", "expected_source",
                                            "carried_dummy", "carried_last", "padded", "pad_role",
                                            "alloc_failed", "postpadded", "batch", "can_queue",
                                            "can_queue_this_rank", "processed_prev", "surplus",
                                            "crash"])
    ledger = pd.DataFrame([{
        "dummy": d.seq, "rank": d.rank, "iter_created": d.created,
        "origin": d.origin, "role": d.role,
        "iter_removed": removal.get(d.seq, (None, None))[0],
        "removal_path": removal.get(d.seq, (None, None))[1],
        "skips_survived": d.skips, "leaked": d.skips > 0} for d in dummies],
        columns=["dummy", "rank", "iter_created", "origin", "role", "iter_removed", "removal_path",
                 "skips_survived", "leaked"])
    return ReplayResult(policy=pol, config=cfg, run=frames.run, decisions=decisions, ledger=ledger,
                        leaks=tuple(leaks), crash=crash, skipped_iters=fleet_skips(decisions),
                        first_divergence=divergence, frames=frames, dropped_iters=frames.dropped_iters)


__all__ = ["Request", "run_reference"]
