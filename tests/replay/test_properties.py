"""Property tests: the vectorised engine equals the per-request reference loop, replay is
deterministic, and fix-16161 never leaks on disaggregated runs when the scheduler window is the
only reason a request is refused."""
from __future__ import annotations

import dataclasses

import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import replay
from replay.model_variants import model_variants
from replay.policy import PadOutcome, Policy
from replay.reference_loop import run_reference
from replay.resolve import resolve_policy
from replay.states import RequestState
from replay.walk import decides_alike

STATES = [8, 9, 7, 10, 12, 13, 14, 14, 13, 20]
POLICIES = replay.policy_names()


@st.composite
def traces(draw, *, window_only=False, disaggregated=None):
    tp = draw(st.integers(1, 4))
    mbs = draw(st.integers(1, 4))
    pp = draw(st.integers(1, 2))
    cap = draw(st.integers(1, pp * mbs + 2))
    disagg = draw(st.booleans()) if disaggregated is None else disaggregated
    build = draw(st.sampled_from(POLICIES + ["custom"]))
    rec = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": tp, "pp_size": pp,
           "max_batch_size": mbs, "max_num_active_requests": cap, "disaggregated": disagg,
           "overlap_scheduler": draw(st.booleans()), "build": build}
    if not window_only and draw(st.integers(0, 4)) == 0:
        rec["dkv_enabled"] = True
    records = [rec]
    n_iters = draw(st.integers(1, 7))
    next_id = [1]
    held: list[list[int]] = [[] for _ in range(tp)]
    for it in range(n_iters):
        for r in range(tp):
            # keep some requests, drop some, add new ones (appended: list order = arrival order)
            keep = [q for q in held[r] if draw(st.booleans())]
            for _ in range(draw(st.integers(0, 2))):
                keep.append(next_id[0])
                next_id[0] += 1
            held[r] = keep
            if not window_only and draw(st.integers(0, 12)) == 0:
                continue  # a missing frame: the iteration is dropped
            states = STATES if not window_only else [8, 9, 10, 12, 13, 14]
            reqs = [{"id": q, "state": draw(st.sampled_from(states))} for q in keep]
            if not window_only and draw(st.integers(0, 5)) == 0:
                reqs.append({"id": 0, "state": 13, "dummy": True})
            fr = {"kind": "frame", "iter": it, "rank": r, "requests": reqs}
            if not window_only:
                if draw(st.booleans()):
                    fr["expected"] = draw(st.integers(0, cap + 1))
                if draw(st.integers(0, 3)) == 0:
                    fr["scheduled"] = draw(st.integers(0, mbs))
                if draw(st.integers(0, 3)) == 0:
                    fr["padded"] = draw(st.booleans())
                if draw(st.integers(0, 3)) == 0:
                    fr["can_queue"] = draw(st.booleans())
                if draw(st.integers(0, 6)) == 0:
                    fr["alloc_ok"] = False
                if draw(st.integers(0, 6)) == 0:
                    fr["kv_precheck_ok"] = False
            records.append(fr)
    return records


def _norm_decisions(df: pd.DataFrame, drop=()) -> list[tuple]:
    cols = ["iter", "rank", "active", "real", "schedulable", "window_real", "expected",
            "expected_source", "carried_dummy", "carried_last", "padded", "pad_role", "alloc_failed",
            "postpadded", "batch", "can_queue", "can_queue_this_rank", "processed_prev", "surplus",
            "crash"]
    cols = [c for c in cols if c not in drop]
    out = []
    for row in df[cols].astype(object).itertuples(index=False):
        out.append(tuple(None if (v is None or v is pd.NA or (isinstance(v, float) and v != v))
                         else (bool(v) if isinstance(v, bool) or type(v).__name__ == "bool_" else
                               v if isinstance(v, str) else int(v)) for v in row))
    return out


def _norm_ledger(df: pd.DataFrame) -> list[tuple]:
    rows = []
    for row in df.drop(columns=["dummy"]).astype(object).itertuples(index=False):
        rows.append(tuple(None if (v is None or v is pd.NA or (isinstance(v, float) and v != v))
                          else (v if isinstance(v, str) else int(v)) for v in row))
    return sorted(rows, key=lambda t: (t[1], t[0]))


def _norm_leaks(leaks, role=True):
    return sorted((dataclasses.replace(x, dummy=-1, **({} if role else {"role": "-"})) for x in leaks),
                  key=lambda x: (x.iter_created, x.rank))


def assert_same(a, b):
    assert _norm_decisions(a.decisions) == _norm_decisions(b.decisions)
    assert _norm_ledger(a.ledger) == _norm_ledger(b.ledger)
    assert _norm_leaks(a.leak_records) == _norm_leaks(b.leak_records)
    assert a.crash == b.crash
    assert a.first_divergence == b.first_divergence
    assert a.skipped_iters == b.skipped_iters
    assert a.dropped_iters == b.dropped_iters


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from(POLICIES))
def test_engine_equals_reference_loop(records, name):
    frames = replay.RunFrames.from_records(records)
    assert_same(replay.run(frames, policy=name), run_reference(frames, policy=name))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_policies_keyed_alike_replay_alike(records):
    """Policies (and model variants) that ``replay.walk.decides_alike`` keys alike replay
    alike: a streamed replay walks one of them for all (``replay.streaming.replay_windows``)."""
    frames = replay.RunFrames.from_records(records)
    cfg = frames.config
    groups: dict = {}
    for name in POLICIES:
        p = resolve_policy(name)
        models = p.model_dependent(cfg)
        for _, c in (model_variants(cfg, models) if models else [(None, cfg)]):
            groups.setdefault(decides_alike(p, c), []).append((p, c))
    assert None not in groups
    for members in groups.values():
        first = replay.run(frames, members[0][1], members[0][0])
        for p, c in members[1:]:
            assert_same(replay.run(frames, c, p), first)


def _field_values() -> dict[str, list]:
    """Every value the catalogue gives each field of a policy that can change its replay (and
    every member of an enum field), for :func:`test_a_change_the_key_misses_changes_nothing`."""
    import enum

    from replay.catalogue import CATALOGUE
    descriptive = {"name", "title", "prs", "notes", "merged", "revision", "source", "pad_hook"}
    out: dict[str, list] = {}
    for pol in CATALOGUE.values():
        for f in dataclasses.fields(pol):
            if f.name not in descriptive:
                v = getattr(pol, f.name)
                values = out.setdefault(f.name, [])
                if v not in values:
                    values.append(v)
                if isinstance(v, enum.Enum):
                    values += [m for m in type(v) if m not in values]
                if isinstance(v, bool) and not v in values:
                    values.append(not v)
    for values in out.values():
        if any(isinstance(v, bool) for v in values):
            values += [b for b in (True, False) if b not in values]
    return out


FIELD_VALUES = _field_values()


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.sampled_from(POLICIES))
def test_a_change_the_key_misses_changes_nothing(records, name):
    """A policy with one field changed, keyed alike by ``replay.walk.decides_alike`` (the key
    misses the change), replays alike: the key holds everything the walk reads."""
    base = resolve_policy(name)
    frames = replay.RunFrames.from_records(records)
    cfg = frames.config
    for field, values in FIELD_VALUES.items():
        for value in values:
            other = dataclasses.replace(base, **{field: value})
            models = tuple(sorted(set(base.model_dependent(cfg)) | set(other.model_dependent(cfg))))
            for _, c in (model_variants(cfg, models) if models else [(None, cfg)]):
                if decides_alike(base, c) == decides_alike(other, c):
                    assert_same(replay.run(frames, c, other), replay.run(frames, c, base))


@given(traces(), st.sampled_from(POLICIES))
def test_replay_is_deterministic(records, name):
    a = replay.run(replay.RunFrames.from_records(records), policy=name)
    b = replay.run(replay.RunFrames.from_records(records), policy=name)
    assert_same(a, b)
    assert a.explain() == b.explain()


def hooked(policy: Policy) -> Policy:
    """The same policy with its pad step written as a per-frame Python hook (F's slow path)."""
    from replay.policy import AllocFailure, EntryCheck
    from replay.states import ALL_STATES

    def hook(view):
        cfg = view.config
        if not policy.pads_run(cfg):   # ADP off, or a dkv run of a build that skips the pads
            return PadOutcome(padded=False)
        mask = policy.predicate(cfg).mask(cfg)
        counted = {int(s) for s, m in zip(ALL_STATES, mask) if m}
        n = len(view.requests)
        surplus = n - view.new_requests > view.expected  # as replay.step.over_expected
        if surplus and policy.entry_check is EntryCheck.ASSERT:
            raise AssertionError("surplus")
        sched = sum(1 for _, s, d in view.requests if d or s in counted)
        expected = max(view.expected, n) if surplus else view.expected  # a warning raises it
        if expected > 0 and sched == 0:
            if policy.prechecks(cfg) and not view.kv_precheck_ok:
                return PadOutcome(padded=False, alloc_failed=True, surplus_warning=surplus)
            if not (view.alloc_ok and view.kv_precheck_ok):
                if policy.alloc_failure_for(cfg) is AllocFailure.CRASH:
                    raise TypeError("'NoneType' object is not subscriptable")
                return PadOutcome(padded=False, alloc_failed=True, surplus_warning=surplus)
            # A frame hook cannot see the iteration's routed request types: the role is not
            # compared below.
            return PadOutcome(padded=True, role="generation", surplus_warning=surplus)
        return PadOutcome(padded=False, surplus_warning=surplus)

    return dataclasses.replace(policy, name=policy.name + "+hook", pad_hook=hook)


@given(traces(), st.sampled_from(POLICIES))
def test_hooked_policy_decides_like_the_vectorised_one(records, name):
    frames = replay.RunFrames.from_records(records)
    pol = replay.get_policy(name)
    # The forward intent is an all-reduce over the ranks: a per-frame hook cannot decide it.
    assume(not pol.uses_forward_intent(frames.config))
    # A hook runs once with the run's configuration (model unknown: outside every model gate).
    a = replay.run(frames, policy=pol).under_model(None)
    b = replay.run(frames, policy=hooked(pol))
    c = run_reference(frames, policy=hooked(pol))
    assert_same(b, c)
    # Same decisions as the vectorised step, except the crash kind is "hook" (and the hook's
    # raised assert is not also a surplus warning) and the role the hook cannot know.
    drop = ("surplus", "pad_role")
    assert _norm_decisions(a.decisions, drop=drop) == _norm_decisions(b.decisions, drop=drop)
    assert (a.decisions.surplus & ~a.decisions.crash).tolist() == (b.decisions.surplus & ~b.decisions.crash).tolist()
    assert (a.crash is None) == (b.crash is None)
    assert _norm_leaks(a.leak_records, role=False) == _norm_leaks(b.leak_records, role=False)


@given(traces(window_only=True, disaggregated=True))
def test_fix_never_leaks_when_only_the_window_refuses(records):
    """No recorded batches, allocations always succeed, nothing outside the known states: a
    request is refused only for being outside the micro-batch window, which the fix's predicate
    is. Every rank with no window request then gets a dummy, no batch is 0, nothing leaks."""
    frames = replay.RunFrames.from_records(records)
    res = replay.run(frames, policy="fix-16161")
    assert res.leaks.empty
    assert res.ledger.skips_survived.sum() == 0
