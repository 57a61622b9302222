"""The behaviours upstream pins in its unit tests (domain doc §9) and the gates and eras its
sources show (§10), one iteration through ``replay.step.decide`` for the versions each concerns.

Every expected outcome below is worked out by hand from the facts named in its docstring.
"""
from __future__ import annotations

import numpy as np
import pytest

from replay import RunConfig, get_policy, policy_names
from replay.policy import GateState
from replay.step import (
    INTENT_CONTEXT,
    INTENT_GENERATION,
    INTENT_NONE,
    REMOVED_HANDLE_RESPONSES,
    REMOVED_ROLLBACK,
    REMOVED_UPDATE_STATES_TP,
    StepInputs,
    decide,
    inputs_from_states,
)

GTC, GIP, DGI, WAIT, CTX = 14, 13, 8, 7, 10
NO_CAP = ["mid-2025", "legacy-2025", "early-2026"]
LEGACY = NO_CAP + ["prefix-2026"]
#: Versions with the fix's count, and the model that opens their gates with the overlap scheduler.
FIXED = ["fix-16161", "fix-16279", "tolerant-17278", "sched-aware-16921", "postpad-17379", "newest"]
AGG = RunConfig(tp_size=1, disaggregated=False)
DSV4 = RunConfig(tp_size=1, disaggregated=True, model_arch="deepseek_v4")
DSV3 = RunConfig(tp_size=1, disaggregated=True, model_arch="deepseek_v3")
DSV4_PP2 = RunConfig(tp_size=1, pp_size=2, disaggregated=True, model_arch="deepseek_v4")


def one(name, cfg, states, **kw):
    pol = get_policy(name)
    return decide(pol, cfg, inputs_from_states(pol, cfg, states, **kw))


def two(cfg, **kw):
    return RunConfig(tp_size=2, disaggregated=True, **{**{f: getattr(cfg, f) for f in
                                                         ("model_arch", "overlap_scheduler")}, **kw})


# ----------------------------------------------------------------------------------- §9
@pytest.mark.parametrize("name", policy_names())
def test_aggregated_to_complete_request_gets_no_dummy(name):
    """Aggregated path, one GENERATION_TO_COMPLETE request, expected 1: every version counts it."""
    out = one(name, AGG, [[GTC]], expected_recorded=1, recorded_counts=1)
    assert not out.padded[0] and int(out.expected[0]) == 1


@pytest.mark.parametrize("name", FIXED)
def test_disaggregated_to_complete_request_gets_a_dummy_inside_the_gate(name):
    """Disaggregated, one TO_COMPLETE request, expected 2, DeepSeek-V4 at pp 1 with overlap:
    every fixed count (window, or the scheduler's test) refuses state 14, so the rank is padded."""
    out = one(name, DSV4, [[GTC]], expected_recorded=2, recorded_counts=1)
    assert out.padded[0] and not out.crash[0]


@pytest.mark.parametrize("name", LEGACY)
def test_disaggregated_to_complete_request_gets_no_dummy_with_the_legacy_count(name):
    out = one(name, DSV4, [[GTC]], expected_recorded=2, recorded_counts=1)
    assert not out.padded[0]
    assert int(out.batch[0]) == 0  # the scheduler refuses it: the zero batch of NVBug 6438685


@pytest.mark.parametrize("name", FIXED)
def test_wait_scheduler_only_gets_a_dummy_with_the_fixed_count(name):
    """DISAGG_CONTEXT_WAIT_SCHEDULER (7) is below the window's CONTEXT_INIT (10) and refused by
    the scheduler's test; the legacy count counts it (no dummy)."""
    out = one(name, DSV4, [[WAIT, WAIT]], expected_recorded=2, recorded_counts=2)
    assert out.padded[0]
    assert not one("prefix-2026", DSV4, [[WAIT, WAIT]], expected_recorded=2, recorded_counts=2).padded[0]


@pytest.mark.parametrize("name", policy_names())
def test_generation_init_only_is_padded_when_a_peer_has_work(name):
    """Rank 0 holds only DISAGG_GENERATION_INIT, rank 1 a generation request: every count leaves
    state 8 out, so rank 0 is padded (overlap: the expected-based test; without overlap under the
    newest versions: the fleet intent is GENERATION)."""
    for overlap in (True, False):
        cfg = RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=overlap,
                        model_arch="deepseek_v4")
        out = one(name, cfg, [[DGI], [GIP]], expected_recorded=1, recorded_counts=[1, 1])
        assert out.padded.tolist() == [True, False], overlap


@pytest.mark.parametrize("name", policy_names())
@pytest.mark.parametrize("cfg", [AGG, DSV4, DSV3, DSV4_PP2])
def test_a_rank_with_a_schedulable_request_never_gets_a_dummy(name, cfg):
    out = one(name, cfg, [[GIP, DGI]], expected_recorded=2, recorded_counts=2)
    assert not out.padded[0]


@pytest.mark.parametrize("name", policy_names())
def test_adp_disabled_never_pads(name):
    cfg = RunConfig(tp_size=2, disaggregated=True, enable_attention_dp=False)
    out = one(name, cfg, [[DGI], []], expected_recorded=4, recorded_counts=[1, 0])
    assert not out.padded.any() and not out.postpadded.any() and not out.crash.any()


def test_adp_disabled_never_trips_the_entry_check():
    """Rank 0 holds 3 requests, the recorded expected is 1 (the counts match, so it is used):
    under attention DP mid-2025's assert trips there (3 > 1); without it the pad methods do
    nothing, so neither the assert nor the surplus warning."""
    states, kw = [[GIP, GIP, GIP], [GIP]], dict(expected_recorded=1, recorded_counts=[3, 1])
    on = one("mid-2025", RunConfig(tp_size=2, disaggregated=True), states, **kw)
    assert on.crash.tolist() == [True, False]
    for name in ("mid-2025", "tolerant-17278"):
        off = one(name, RunConfig(tp_size=2, disaggregated=True, enable_attention_dp=False),
                  states, **kw)
        assert not off.crash.any() and not off.surplus.any()


@pytest.mark.parametrize("name", ["fix-16161", "fix-16279", "tolerant-17278", "sched-aware-16921",
                                  "postpad-17379", "newest"])
def test_refused_dummy_is_skipped_with_a_warning_inside_the_gate(name):
    """add_dummy_requests returns None: no dummy, no crash, active requests unchanged."""
    out = one(name, DSV4, [[DGI]], alloc_ok=False, expected_recorded=1, recorded_counts=1)
    assert not out.padded[0] and out.alloc_failed[0] and not out.crash[0]
    assert int(out.active[0]) == 1


@pytest.mark.parametrize("name,cfg", [(n, c) for n in LEGACY for c in (DSV4, DSV3)]
                         + [(n, c) for n in ("fix-16279", "tolerant-17278") for c in (DSV3, DSV4_PP2)]
                         + [(n, DSV4_PP2) for n in ("sched-aware-16921", "postpad-17379")])
def test_refused_dummy_crashes_where_the_allocation_is_used_unchecked(name, cfg):
    """The legacy versions, and the merged fix outside its gate (another model, or pp 2), index
    the allocation result unchecked: TypeError on None (crash kind 2)."""
    out = one(name, cfg, [[DGI]], alloc_ok=False, expected_recorded=1, recorded_counts=1)
    assert out.crash[0] and int(out.crash_kind[0]) == 2


def test_newest_tolerates_a_refused_dummy_on_the_legacy_path_too():
    """#18157: the KV-capacity precheck runs on every path, so pp 2 skips instead of crashing."""
    out = one("newest", DSV4_PP2, [[DGI]], alloc_ok=False, expected_recorded=1, recorded_counts=1)
    assert out.alloc_failed[0] and not out.crash[0]


def test_newest_tolerates_a_surplus_and_still_pads():
    """Two TO_COMPLETE requests with expected 1 (DeepSeek-V4, overlap): newest warns, raises
    expected to 2 for the pad test and pads; prefix-2026 asserts."""
    out = one("newest", DSV4, [[GTC, GTC]], expected_recorded=1, recorded_counts=2)
    assert out.surplus[0] and out.padded[0] and not out.crash[0]
    crashed = one("prefix-2026", DSV4, [[GTC, GTC]], expected_recorded=1, recorded_counts=2)
    assert crashed.crash[0] and int(crashed.crash_kind[0]) == 1 and not crashed.padded[0]


def test_newest_two_ranks_busy_and_to_complete_both_schedule_and_the_dummy_is_cleared():
    """Rank 0 busy (one GIP), rank 1 only TO_COMPLETE: rank 1 is padded, both schedule 1,
    can_queue True everywhere, the pending dummy is removed (last element)."""
    for overlap in (True, False):
        cfg = RunConfig(tp_size=2, disaggregated=True, model_arch="deepseek_v4",
                        overlap_scheduler=overlap)
        out = one("newest", cfg, [[GIP], [GTC]], expected_recorded=1, recorded_counts=[1, 1])
        assert out.padded.tolist() == [False, True]
        assert out.batch.tolist() == [1, 1]
        assert out.can_queue.tolist() == [True, True]
        assert out.removed_path.tolist() == [0, REMOVED_UPDATE_STATES_TP]
        assert not out.survives.any()


# ----------------------------------------------------------------------------------- §10 gates
@pytest.mark.parametrize("name", ["fix-16279", "tolerant-17278"])
def test_the_merged_fix_applies_only_to_deepseek_v4_at_pp_1(name):
    """#16279's gate (_enable_dsv4_adp_dummy_fixes): deepseek_v4 pp 1 on, deepseek_v3 pp 1 off,
    deepseek_v4 pp 2 off (upstream's gate test). Off, the legacy count counts TO_COMPLETE."""
    pol = get_policy(name)
    assert [pol.applies_to(c).paths["fixed_count"] for c in (DSV4, DSV3, DSV4_PP2)] == \
        [GateState.OPEN, GateState.CLOSED, GateState.CLOSED]
    padded = [bool(one(name, c, [[GTC]], expected_recorded=2, recorded_counts=1).padded[0])
              for c in (DSV4, DSV3, DSV4_PP2)]
    assert padded == [True, False, False]
    unknown = RunConfig(tp_size=1, disaggregated=True)
    assert pol.applies_to(unknown).paths["fixed_count"] is GateState.UNKNOWN
    assert pol.model_dependent(unknown) == ("deepseek_v4",)


def test_the_proposed_fix_has_no_gate():
    """fix-16161 (never merged): the window on every disaggregated run, whatever the model or pp."""
    pol = get_policy("fix-16161")
    assert not pol.merged and pol.model_dependent(RunConfig(tp_size=1, disaggregated=True)) == ()
    for cfg in (DSV4, DSV3, DSV4_PP2):
        assert one("fix-16161", cfg, [[GTC]], expected_recorded=2, recorded_counts=1).padded[0]


@pytest.mark.parametrize("model,pp,overlap,delegated", [
    ("kimi_k2", 1, False, True), ("kimi_k2", 1, True, False), ("deepseek_v4", 1, True, True),
    ("qwen3_5_moe", 1, True, True), ("deepseek_v4", 2, False, False)])
def test_scheduler_aware_count_gate(model, pp, overlap, delegated):
    """#16921's scope test: kimi_k2 without overlap on, kimi_k2 with overlap off, deepseek_v4 and
    qwen3_5_moe with overlap on, pp 2 off. Off, the legacy count: a TO_COMPLETE-only rank beside a
    busy peer gets no dummy. On (with overlap the count, without overlap the forward intent of the
    busy peer): it is padded."""
    cfg = RunConfig(tp_size=2, pp_size=pp, disaggregated=True, overlap_scheduler=overlap,
                    model_arch=model)
    for name in ("sched-aware-16921", "postpad-17379", "newest"):
        out = one(name, cfg, [[GIP], [GTC]], expected_recorded=1, recorded_counts=[1, 1],
                  real_batch=[1, 0])
        assert bool(out.padded[1]) is delegated, name


def test_newest_forward_intent_pads_nobody_when_no_rank_has_schedulable_work():
    """Non-overlap, pp 1, every rank holds only DISAGG_GENERATION_INIT: the all-reduced intent is
    NONE, nobody is padded (upstream's test_pad_dummy_not_added_when_all_ranks_only_await_kv_
    transfer); the overlap build pads both on expected > 0."""
    plain = RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=False)
    out = one("newest", plain, [[DGI], [DGI]], expected_recorded=1, recorded_counts=[1, 1])
    assert not out.padded.any()
    overlap = RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=True)
    assert one("newest", overlap, [[DGI], [DGI]], expected_recorded=1,
               recorded_counts=[1, 1]).padded.tolist() == [True, True]


def test_forward_intent_decides_the_role_and_context_wins():
    """Three ranks, non-overlap: rank 0 has a CONTEXT_INIT request (intent CONTEXT), rank 1 a
    generation request (GENERATION), rank 2 only DGI (NONE). MAX = CONTEXT: rank 2 gets a
    context dummy. Without rank 0 the fleet intent is GENERATION: a generation dummy."""
    cfg = RunConfig(tp_size=3, disaggregated=True, overlap_scheduler=False)
    pol = get_policy("newest")
    inp = inputs_from_states(pol, cfg, [[CTX], [GIP], [DGI]])
    assert inp.intent.tolist() == [INTENT_CONTEXT, INTENT_GENERATION, INTENT_NONE]
    out = decide(pol, cfg, inp)
    assert out.padded.tolist() == [False, False, True] and out.role_context.tolist() == [False, False, True]
    out = one("newest", cfg, [[GIP], [GIP], [DGI]])
    assert out.padded.tolist() == [False, False, True] and not out.role_context.any()


def test_outside_the_forward_intent_the_role_is_the_eras():
    """Overlap (no intent path): the dummy takes the role the era's role rule gave this
    iteration (role_context input), whatever the rank holds."""
    for ctx in (True, False):
        out = one("prefix-2026", DSV4, [[DGI]], role_context=ctx)
        assert out.padded[0] and bool(out.role_context[0]) is ctx


@pytest.mark.parametrize("cfg", [AGG, DSV3])
def test_post_schedule_dummy_is_rolled_back_on_a_skip_on_every_path(cfg):
    """#17379, max_batch_size 2 (cap 2): rank 1 holds a GIP request the capacity scheduler
    refused (recorded real batch 0) and gets a post-schedule dummy (1 active < cap 2); rank 0
    holds two DGI. Aggregated (no transceiver): rank 0 counts them (len(active)) -> no dummy,
    batch 0, and it is at the cap -> no post-pad: the fleet skips and rank 1's pending post-pad
    dummy is rolled back although no fixes gate is open (upstream's test runs with the fixes
    flag off and on). DeepSeek-V3 with overlap: the legacy count leaves DGI out, rank 0 is padded
    (batch 1), can_queue True."""
    c2 = RunConfig(tp_size=2, disaggregated=cfg.disaggregated, model_arch=cfg.model_arch,
                   max_batch_size=2)
    out = one("postpad-17379", c2, [[DGI, DGI], [GIP]], real_batch=[-1, 0])
    assert out.postpadded.tolist() == [False, True]
    if not cfg.disaggregated:
        assert not out.can_queue.any()
        assert out.removed_path.tolist() == [0, REMOVED_ROLLBACK] and not out.survives.any()
    else:
        assert out.padded.tolist() == [True, False] and out.can_queue.all()


def test_pad_step_dummy_is_rolled_back_only_on_the_transactional_path():
    """Rank 1's request is refused by capacity (real batch 0) under tolerant-17278 (no post-pad):
    the fleet skips. DeepSeek-V4 pp 1: rank 0's pending dummy is rolled back; DeepSeek-V3 (the
    gate is off): a plain dummy, it survives; prefix-2026 never rolls back."""
    for name, cfg, rolled in (("tolerant-17278", two(DSV4), True),
                              ("tolerant-17278", two(DSV3), False),
                              ("sched-aware-16921", two(DSV3), True),  # fixes gate: pp 1, any model
                              ("sched-aware-16921", RunConfig(tp_size=2, pp_size=2, disaggregated=True), False),
                              ("prefix-2026", two(DSV4), False)):
        out = one(name, cfg, [[DGI], [GIP]], real_batch=[-1, 0])
        assert out.padded.tolist() == [True, False] and not out.can_queue.any(), name
        assert bool(out.removed_path[0] == REMOVED_ROLLBACK) is rolled, (name, cfg)
        assert bool(out.survives[0]) is (not rolled)


def test_postpad_fills_an_empty_batch_below_the_cap_and_not_under_pp():
    cfg = RunConfig(tp_size=2, disaggregated=True, max_batch_size=2, model_arch="deepseek_v4")
    out = one("postpad-17379", cfg, [[DGI], [GIP]], real_batch=[-1, 0])
    assert out.postpadded.tolist() == [False, True] and out.batch.tolist() == [1, 1]
    assert out.can_queue.all() and out.removed_path.tolist() == [1, 1]
    at_cap = one("postpad-17379", cfg, [[DGI], [GIP, GIP]], real_batch=[-1, 0])
    assert not at_cap.postpadded.any() and not at_cap.can_queue.any()
    pp2 = RunConfig(tp_size=2, pp_size=2, disaggregated=True, max_batch_size=2)
    assert not one("postpad-17379", pp2, [[DGI], [GIP]], real_batch=[-1, 0]).postpadded.any()


# ----------------------------------------------------------------------------------- expected
def test_expected_is_computed_when_replayed_counts_differ_from_the_recording():
    """counts [3, 1] (rank 1 got one new request), tp 2: total 4, fair 2, floor max(3-0, 1-1)=3,
    cap 8 -> 3. The recorded 9 is ignored because rank 0's recorded count (4) differs."""
    pol, cfg = get_policy("prefix-2026"), RunConfig(tp_size=2, disaggregated=True)
    inp = StepInputs.make([3, 1], new_real=[0, 1], expected_recorded=9, recorded_counts=[4, 1])
    out = decide(pol, cfg, inp)
    assert out.expected.tolist() == [3, 3] and out.expected_source.tolist() == [0, 0]
    legacy = decide(get_policy("legacy-2025"), RunConfig(tp_size=2, max_batch_size=1),
                    StepInputs.make([3, 1], new_real=[0, 1]))
    capped = decide(pol, RunConfig(tp_size=2, max_batch_size=1), StepInputs.make([3, 1], new_real=[0, 1]))
    assert legacy.expected.tolist() == [3, 3] and capped.expected.tolist() == [1, 1]


@pytest.mark.parametrize("name", NO_CAP)
def test_without_a_cap_a_leaked_dummy_raises_expected_and_cannot_assert(name):
    """Cap 4 (pp 1, max_batch_size 4); rank 0 holds 4 real requests and a carried dummy, rank 1
    one: total 6, fair 3, floor max(5, 1) = 5 -> expected 5 (no cap): 5 > 5 is false, no assert.
    prefix-2026 caps it at 4: 5 > 4 asserts."""
    cfg = RunConfig(tp_size=2, max_batch_size=4, disaggregated=True)
    inp = StepInputs.make([4, 1], window_real=[4, 1], carried=[True, False])
    out = decide(get_policy(name), cfg, inp)
    assert out.expected.tolist() == [5, 5] and not out.crash.any()
    capped = decide(get_policy("prefix-2026"), cfg, inp)
    assert capped.expected.tolist() == [4, 4] and capped.crash.tolist() == [True, False]


# ----------------------------------------------------------------------------------- loop
def test_carried_dummy_removal_paths_and_skip():
    """A carried dummy counts as schedulable (no second dummy). When the fleet queues it is
    removed by _update_request_states_tp if last, else by _handle_responses; when the fleet
    skips (rank 1 refused by capacity, no post-pad) it survives even under a rolling-back
    version (it is not pending)."""
    cfg = RunConfig(tp_size=2, disaggregated=True, model_arch="deepseek_v4")
    inp = StepInputs.make([1, 1], sched_real=[0, 1], window_real=[0, 1], carried=[True, False],
                          carried_last=[False, True])
    out = decide(get_policy("newest"), cfg, inp)
    assert not out.padded.any() and out.batch.tolist() == [1, 1]
    assert out.removed_path.tolist() == [REMOVED_HANDLE_RESPONSES, 0]
    skip = decide(get_policy("tolerant-17278"), cfg,
                  StepInputs.make([1, 1], sched_real=[0, 1], window_real=[0, 1], real_batch=[-1, 0],
                                  carried=[True, False]))
    assert not skip.can_queue.any() and skip.survives.tolist() == [True, False]


def test_overlap_loop_processes_the_previous_batch_only_on_zero_batch_ranks():
    states = [[DGI], [GTC]]
    overlap = one("prefix-2026", RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=True), states)
    plain = one("prefix-2026", RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=False), states)
    assert not overlap.can_queue.any() and not plain.can_queue.any()
    assert overlap.processed_prev.tolist() == [False, True]
    assert plain.processed_prev.tolist() == [False, False]


def test_decide_vectorises_over_leading_axes():
    pol, cfg = get_policy("prefix-2026"), RunConfig(tp_size=2, disaggregated=True)
    a = inputs_from_states(pol, cfg, [[DGI], [GTC]])
    b = inputs_from_states(pol, cfg, [[GIP], [GIP]])
    stacked = StepInputs(**{k: np.stack([getattr(a, k), getattr(b, k)]) for k in a.__dataclass_fields__})
    out = decide(pol, cfg, stacked)
    assert out.can_queue.tolist() == [[False, False], [True, True]]
    assert out.survives.tolist() == [[True, False], [False, False]]
