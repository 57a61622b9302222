"""The behaviours upstream pins in its unit tests (domain doc §9), one iteration through
``replay.step.decide`` for the policies each concerns."""
from __future__ import annotations

import numpy as np
import pytest

from replay import RunConfig, get_policy, policy_names
from replay.step import (
    REMOVED_HANDLE_RESPONSES,
    REMOVED_ROLLBACK,
    REMOVED_UPDATE_STATES_TP,
    StepInputs,
    decide,
    inputs_from_states,
)

GTC, GIP, DGI, WAIT = 14, 13, 8, 7
FIXED = ["fix-16161", "sched-aware-16921", "tolerant-17278", "postpad-17379", "newest"]
LEGACY = ["legacy-2025", "prefix-2026"]
AGG = RunConfig(tp_size=1, disaggregated=False)
DISAGG = RunConfig(tp_size=1, disaggregated=True)


def one(name, cfg, states, **kw):
    pol = get_policy(name)
    return decide(pol, cfg, inputs_from_states(pol, cfg, states, **kw))


@pytest.mark.parametrize("name", policy_names())
def test_aggregated_to_complete_request_gets_no_dummy(name):
    """Aggregated path, one GENERATION_TO_COMPLETE request, expected 1: every version counts it."""
    out = one(name, AGG, [[GTC]], expected_recorded=1, recorded_counts=1)
    assert not out.padded[0] and int(out.expected[0]) == 1


@pytest.mark.parametrize("name", FIXED)
def test_disaggregated_to_complete_request_gets_a_dummy_with_the_fixed_predicate(name):
    out = one(name, DISAGG, [[GTC]], expected_recorded=2, recorded_counts=1)
    assert out.padded[0] and not out.role_context[0]


@pytest.mark.parametrize("name", LEGACY)
def test_disaggregated_to_complete_request_gets_no_dummy_with_the_legacy_predicate(name):
    out = one(name, DISAGG, [[GTC]], expected_recorded=2, recorded_counts=1)
    assert not out.padded[0]
    assert int(out.batch[0]) == 0  # the scheduler refuses it: the zero batch of NVBug 6438685


@pytest.mark.parametrize("name", FIXED)
def test_wait_scheduler_only_gets_a_dummy_with_the_fixed_predicate(name):
    out = one(name, DISAGG, [[WAIT, WAIT]], expected_recorded=2, recorded_counts=2)
    assert out.padded[0]


@pytest.mark.parametrize("name", policy_names())
def test_generation_init_only_gets_a_context_dummy_in_every_version(name):
    out = one(name, DISAGG, [[DGI, DGI]], expected_recorded=2, recorded_counts=2)
    assert out.padded[0] and out.role_context[0]


@pytest.mark.parametrize("name", policy_names())
@pytest.mark.parametrize("cfg", [AGG, DISAGG])
def test_a_rank_with_a_schedulable_request_never_gets_a_dummy(name, cfg):
    out = one(name, cfg, [[GIP, DGI]], expected_recorded=2, recorded_counts=2)
    assert not out.padded[0]


@pytest.mark.parametrize("name", policy_names())
def test_adp_disabled_never_pads(name):
    cfg = RunConfig(tp_size=2, disaggregated=True, enable_attention_dp=False)
    out = one(name, cfg, [[DGI], []], expected_recorded=4, recorded_counts=[1, 0])
    assert not out.padded.any() and not out.postpadded.any() and not out.crash.any()


@pytest.mark.parametrize("name", FIXED)
def test_failed_dummy_allocation_is_skipped_with_a_warning(name):
    out = one(name, DISAGG, [[DGI]], alloc_ok=False, expected_recorded=1, recorded_counts=1)
    assert not out.padded[0] and out.alloc_failed[0] and not out.crash[0]
    assert int(out.active[0]) == 1  # active requests unchanged


@pytest.mark.parametrize("name", LEGACY)
def test_failed_dummy_allocation_crashes_the_legacy_versions(name):
    out = one(name, DISAGG, [[DGI]], alloc_ok=False, expected_recorded=1, recorded_counts=1)
    assert out.crash[0] and int(out.crash_kind[0]) == 2


def test_newest_tolerates_a_surplus_and_still_pads():
    """Two TO_COMPLETE requests with expected 1: newest warns and pads; prefix-2026 asserts."""
    out = one("newest", DISAGG, [[GTC, GTC]], expected_recorded=1, recorded_counts=2)
    assert out.surplus[0] and out.padded[0] and not out.crash[0]
    crashed = one("prefix-2026", DISAGG, [[GTC, GTC]], expected_recorded=1, recorded_counts=2)
    assert crashed.crash[0] and int(crashed.crash_kind[0]) == 1 and not crashed.padded[0]


def test_newest_two_ranks_busy_and_to_complete_both_schedule_and_the_dummy_is_cleared():
    """Rank 0 busy (one GIP), rank 1 only TO_COMPLETE: rank 1 is padded, both schedule 1,
    can_queue True everywhere, the pending dummy is removed (last element)."""
    cfg = RunConfig(tp_size=2, disaggregated=True)
    out = one("newest", cfg, [[GIP], [GTC]], expected_recorded=1, recorded_counts=[1, 1])
    assert out.padded.tolist() == [False, True]
    assert out.batch.tolist() == [1, 1]
    assert out.can_queue.tolist() == [True, True]
    assert out.removed_path.tolist() == [0, REMOVED_UPDATE_STATES_TP]
    assert not out.survives.any()


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


def test_carried_dummy_removal_paths_and_skip():
    """A carried dummy counts as schedulable (no second dummy). When the fleet queues it is
    removed by _update_request_states_tp if last, else by _handle_responses; when the fleet
    skips (sched-aware-16921: rank 1 refused by capacity, no post-pad) it survives even under a
    rolling-back policy (it is not pending)."""
    cfg = RunConfig(tp_size=2, disaggregated=True)
    pol = get_policy("newest")
    inp = StepInputs.make([1, 1], sched_real=[0, 1], window_real=[0, 1], carried=[True, False],
                          carried_last=[False, True])
    out = decide(pol, cfg, inp)
    assert not out.padded.any() and out.batch.tolist() == [1, 1]
    assert out.removed_path.tolist() == [REMOVED_HANDLE_RESPONSES, 0]
    skip = decide(get_policy("sched-aware-16921"), cfg, StepInputs.make([1, 1], sched_real=[0, 1], window_real=[0, 1],
                                            real_batch=[-1, 0], carried=[True, False]))
    assert not skip.can_queue.any() and skip.survives.tolist() == [True, False]


def test_rollback_of_the_pending_dummy_only_where_the_policy_gates_it():
    """Rank 1's one request is refused by capacity (recorded real batch 0, no post-pad): the
    fleet skips; sched-aware-16921 rolls back rank 0's new dummy on a disaggregated pp 1 run,
    but not with pp 2 (gated off) and prefix-2026 never does."""
    states = [[DGI], [GIP]]
    for name, cfg, rolled in (("sched-aware-16921", RunConfig(tp_size=2, disaggregated=True), True),
                              ("sched-aware-16921", RunConfig(tp_size=2, pp_size=2, disaggregated=True), False),
                              ("prefix-2026", RunConfig(tp_size=2, disaggregated=True), False)):
        out = one(name, cfg, states, real_batch=[-1, 0])
        assert out.padded.tolist() == [True, False] and not out.can_queue.any()
        assert bool(out.removed_path[0] == REMOVED_ROLLBACK) is rolled
        assert bool(out.survives[0]) is (not rolled)


def test_postpad_fills_an_empty_batch_below_the_cap():
    cfg = RunConfig(tp_size=2, disaggregated=True, max_batch_size=2)
    out = one("postpad-17379", cfg, [[DGI], [GIP]], real_batch=[-1, 0])
    assert out.postpadded.tolist() == [False, True] and out.batch.tolist() == [1, 1]
    assert out.can_queue.all() and out.removed_path.tolist() == [1, 1]
    at_cap = one("postpad-17379", cfg, [[DGI], [GIP, GIP]], real_batch=[-1, 0])
    assert not at_cap.postpadded.any() and not at_cap.can_queue.any()


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
