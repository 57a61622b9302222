"""Hand-worked multi-rank scenarios: each docstring works out the expected ledger by hand."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from replay_traces import (
    DGI,
    DGT,
    DUMMY,
    GIP,
    GTC,
    frame,
    nvbug_records,
    reqs,
    run_record,
)

import replay
from replay.reference_loop import run_reference


def ledger_rows(res):
    """(rank, iter_created, origin, role, iter_removed, removal_path, skips_survived, leaked)."""
    out = []
    for row in res.ledger.itertuples(index=False):
        out.append((row.rank, row.iter_created, row.origin, row.role,
                    None if pd.isna(row.iter_removed) else int(row.iter_removed),
                    None if pd.isna(row.removal_path) else row.removal_path,
                    row.skips_survived, bool(row.leaked)))
    return out


@pytest.fixture(scope="module")
def nvbug():
    return replay.RunFrames.from_records(nvbug_records())


def test_nvbug_chain_prefix(nvbug):
    """NVBug 6438685 under prefix-2026 (the build that recorded it): tp 4, cap 8.

    iter 40: counts [1, 8, 2, 3] match the recording -> expected 8 (recorded). Rank 1 holds only
      DISAGG_GENERATION_INIT: the legacy predicate counts 0 -> dummy d0. Its role is the 2026
      rule's (_update_adp_dummy_role): nothing was routed yet (first frame), so generation. Batches
      [1, 0+1, 2, 3], no zero -> can_queue; d0 is last -> removed by update_states_tp.
    iter 41: ranks 0 (51, 52 DISAGG_GENERATION_INIT) and 1 (101..108 TRANS_IN_PROGRESS) count 0
      -> dummies d1 (rank 0), d2 (rank 1), generation (51, 52 arrived as DISAGG_GENERATION_INIT:
      generation-only requests). Rank 2 holds 17, 23 GENERATION_TO_COMPLETE:
      the legacy predicate counts 2 -> no dummy, but the window is empty -> batch 0.
      Batches [1, 1, 0, 3] -> can_queue False everywhere; no rollback -> d1, d2 leak (cause rank 2).
    iter 42: carried d1, d2 (last: nothing new since 41). Counts [3, 9, 0, 3] match the recording
      -> expected 8 (recorded). Rank 1: 9 > 8 -> AssertionError, the run stops. Rank 2 (empty)
      was padded (d3) before the others blocked; no decision is made after.
    Ledger: d0 (1, 40, update_states_tp), d1 (0, 41, alive, 1 skip), d2 (1, 41, alive, 1 skip),
    d3 (2, 42, alive, 0 skips). Every recorded decision is reproduced.
    """
    res = replay.run(nvbug, policy="prefix-2026")
    assert ledger_rows(res) == [
        (1, 40, "pad", "generation", 40, "update_states_tp", 0, False),
        (0, 41, "pad", "generation", None, None, 1, True),
        (1, 41, "pad", "generation", None, None, 1, True),
        (2, 42, "pad", "generation", None, None, 0, False),
    ]
    # The fatal leak (rank 1, the crashing rank) first, then the other leak in ledger order.
    assert [(x.rank, x.iter_created, x.iter_skipped, x.cause_ranks) for x in res.leak_records] == \
        [(1, 41, 41, (2,)), (0, 41, 41, (2,))]
    assert res.leak_records[1].cause_states == {2: ((17, "GENERATION_TO_COMPLETE"), (23, "GENERATION_TO_COMPLETE"))}
    assert (res.crash.iter, res.crash.rank, res.crash.ranks, res.crash.kind) == (42, 1, (1,), "assert")
    assert (res.crash.expected, res.crash.active) == (8, 9)
    assert res.first_divergence is None
    assert res.to_json()["crash"] == {"iter": 42, "rank": 1, "expected": 8, "active": 9}
    chains = res.explain()
    assert len(chains) == 3
    # The fatal leak first, then the other leak, then the crash.
    assert res.fatal_leak is res.leak_records[0] and res.first_leak is res.leak_records[1]
    assert "rank 2 held only GENERATION_TO_COMPLETE requests (ids 17, 23)" in chains[0]
    assert "can_queue is False fleet-wide (rank 2 offered 0)" in chains[0]
    assert "rank 1 counted 8 real requests + its leaked dummy = 9 > expected 8" in chains[0]
    assert "dummy padded on rank 0 at iter 41" in chains[1]
    assert "AssertionError" in chains[2]


def test_nvbug_chain_fix_pads_every_rank_and_nothing_leaks(nvbug):
    """fix-16161 on the same frames (window predicate on the disaggregated path).

    iter 40: as recorded (d0 on rank 1, removed by update_states_tp).
    iter 41: ranks 0, 1 and now 2 (GENERATION_TO_COMPLETE is outside the window) are padded:
      batches [1, 1, 1, 3] -> can_queue True, d1..d3 removed by update_states_tp. First
      divergence: (41, rank 0) can_queue recorded False, replayed True.
    iter 42: counts [2, 8, 0, 3] differ from the recording's [3, 9, 0, 3] -> expected computed:
      total 13, fair 4, floor 8, cap 8 -> 8; no surplus. Ranks 0 (TRANS_IN_PROGRESS) and 2
      (empty) padded (d4, d5); rank 1 has 8 in the window; all removed.
    """
    res = replay.run(nvbug, policy="fix-16161")
    assert res.leaks.empty and res.crash is None
    assert [(r[0], r[1], r[5]) for r in ledger_rows(res)] == [
        (1, 40, "update_states_tp"), (0, 41, "update_states_tp"), (1, 41, "update_states_tp"),
        (2, 41, "update_states_tp"), (0, 42, "update_states_tp"), (2, 42, "update_states_tp")]
    d = res.first_divergence
    assert (d.iter, d.rank, d.field, d.recorded, d.replayed) == (41, 0, "can_queue", False, True)
    row = res.decisions[(res.decisions["iter"] == 42) & (res.decisions["rank"] == 1)].iloc[0]
    assert (row.active, row.expected, str(row.expected_source)) == (8, 8, "computed")


def test_nvbug_chain_legacy_leaks_without_crashing(nvbug):
    """legacy-2025: the recording's expected (capped build) is not used (different formula).

    iter 40/41: computed expected = max(ceil(14/4), 8) = 8 and max(ceil(15/4), 8) = 8: same pads
      and skip as prefix-2026 -> d1 (rank 0), d2 (rank 1) leak.
    iter 42: counts [3, 9, 0, 3], no new request: expected = max(ceil(15/4), 9) = 9 (no cap):
      9 <= 9, no assert. Rank 2 padded (d3); batches [1, min(8+1, 8)=8, 1, 3] -> can_queue,
      d1, d2, d3 removed by update_states_tp (each is last).
    """
    res = replay.run(nvbug, policy="legacy-2025")
    assert res.crash is None
    assert [(x.rank, x.iter_created, x.iter_skipped) for x in res.leak_records] == [(0, 41, 41), (1, 41, 41)]
    assert ledger_rows(res)[1:] == [
        (0, 41, "pad", "generation", 42, "update_states_tp", 1, True),
        (1, 41, "pad", "generation", 42, "update_states_tp", 1, True),
        (2, 42, "pad", "generation", 42, "update_states_tp", 0, False)]
    row = res.decisions[(res.decisions["iter"] == 42) & (res.decisions["rank"] == 1)].iloc[0]
    assert (row.active, row.expected) == (9, 9)
    assert "has no cap" in res.explain()[1]


def test_nvbug_chain_newer_policies_do_not_leak(nvbug):
    """The run record names no model, so the gated versions are replayed both ways.

    fix-16279 outside its gate is prefix-2026 (legacy count, cap, assert): crash at 42; inside
      (deepseek_v4) the window pads rank 2 at 41 and nothing leaks.
    tolerant-17278 outside: the same leak at 41, and at 42 rank 1 (9 > 8) only warns: leak.
    sched-aware-16921 and later, outside the scheduler-aware gate (overlap, another model): the
      legacy count still leaves rank 2 unpadded at 41 and the fleet skips, but the transactional
      dummy (pp_size 1, any model) rolls d1, d2 back: nothing leaks either way. postpad-17379
      and newest do not even skip: rank 2 (batch 0, 2 active < cap 8) gets a post-schedule dummy.
    """
    for name in ("sched-aware-16921", "postpad-17379", "newest"):
        res = replay.run(nvbug, policy=name)
        assert res.ok and res.verdict_text == "clean whatever the model", name
        assert not res.under_model("deepseek_v4").skipped_iters
    outside = replay.run(nvbug, policy="sched-aware-16921").under_model(None)
    assert outside.skipped_iters == (41,)
    assert outside.ledger.removal_path.tolist()[1:3] == ["rollback", "rollback"]
    post = replay.run(nvbug, policy="postpad-17379").under_model(None)
    row = post.decisions[(post.decisions["iter"] == 41) & (post.decisions["rank"] == 2)].iloc[0]
    assert bool(row.postpadded) and not post.skipped_iters
    fix = replay.run(nvbug, policy="fix-16279")
    assert fix.verdict_text == "crash unless the model is DeepSeek-V4"
    assert (fix.crash.iter, fix.crash.rank) == (42, 1) and fix.config.model_arch is None
    assert fix.under_model("deepseek_v4").ok
    tol = replay.run(nvbug, policy="tolerant-17278")
    assert tol.verdict == "leak" and tol.verdict_text == "leak unless the model is DeepSeek-V4"
    assert tol.to_json()["model_unknown"]["verdicts"] == {"deepseek_v4": "clean", "other": "leak"}
    named = replay.run(nvbug, dataclasses.replace(nvbug.config, model_arch="deepseek_v4"),
                       "tolerant-17278")
    assert named.ok and named.gated is None and named.verdict_text == "clean"


def test_overlap_loop_differences(nvbug):
    """At the skipped iter 41 the overlap loop lets rank 2 (batch 0) process its previous
    batch (processed_prev True) while the padded ranks keep theirs; the non-overlap loop
    processes nothing anywhere. The dummies leak either way."""
    over = replay.run(nvbug, policy="prefix-2026")
    plain = replay.run(nvbug, dataclasses.replace(nvbug.config, overlap_scheduler=False), "prefix-2026")
    at41 = lambda r: r.decisions[r.decisions["iter"] == 41].processed_prev.tolist()
    assert at41(over) == [False, False, True, False]
    assert at41(plain) == [False, False, False, False]
    assert len(over.leaks) == len(plain.leaks) == 2
    assert 41 in over.skipped_iters and over.skipped_iters == plain.skipped_iters


NOT_LAST = [
    run_record(2, build="prefix-2026"),
    frame(0, 0, [(1, DGI)], expected=1, padded=True, scheduled=1, can_queue=False),
    frame(0, 1, [(2, GTC)], expected=1, padded=False, scheduled=0, can_queue=False),
    frame(1, 0, [(1, DGT), DUMMY, (3, GIP)], expected=4, padded=False, scheduled=2, can_queue=True),
    frame(1, 1, reqs((4, 5, 6, 7), GIP), expected=4, padded=False, scheduled=4, can_queue=True),
]


def test_dummy_that_is_not_the_last_element_is_removed_by_handle_responses():
    """tp 2, cap 8, prefix-2026.

    iter 0: expected 1. Rank 0 (DISAGG_GENERATION_INIT) padded (d0, generation: nothing routed
      yet); rank 1 holds only
      GENERATION_TO_COMPLETE -> counted, no dummy, batch 0 -> skip; d0 leaks (cause rank 1).
    iter 1: request 3 arrived on rank 0 after d0 was created -> d0 is not the last element.
      Counts [3, 4] match -> expected 4 (recorded; computed would be max(fair ceil(7/2) = 4,
      floor max(3-1, 4-4) = 2) = 4). Batches [1 + dummy, 4] -> can_queue; d0 is
      missed by update_states_tp and terminated by handle_responses.
    Ledger: d0 (rank 0, created 0, removed 1 by handle_responses, 1 skip, leaked).
    """
    frames = replay.RunFrames.from_records(NOT_LAST)
    res = replay.run(frames, policy="prefix-2026")
    assert ledger_rows(res) == [(0, 0, "pad", "generation", 1, "handle_responses", 1, True)]
    row = res.decisions.iloc[2]
    assert (row["iter"], row["rank"], row.carried_dummy, row.carried_last, row.batch) == (1, 0, True, False, 2)
    assert res.first_divergence is None and res.crash is None
    assert "_handle_responses (it was no longer the last element)" in res.explain()[0]
    fix = replay.run(frames, policy="fix-16161")
    assert fix.leaks.empty
    assert [r[5] for r in ledger_rows(fix)] == ["update_states_tp", "update_states_tp"]


CAPACITY = [
    run_record(2, build="sched-aware-16921", max_batch_size=4),
    frame(0, 0, [(1, DGI)], expected=1, padded=True, scheduled=1, can_queue=False),
    frame(0, 1, [(2, GIP)], expected=1, padded=False, scheduled=0, can_queue=False),
    frame(1, 0, [(1, DGT)], expected=1, padded=True, scheduled=1, can_queue=True),
    frame(1, 1, [(2, GIP)], expected=1, padded=False, scheduled=1, can_queue=True),
]


def test_rollback_postpad_and_capacity_refusal():
    """tp 2, max_batch_size 4, cap 4, recorded by sched-aware-16921. Rank 1's request is in the
    window but the scheduler took none at iter 0 (recorded scheduled 0: no KV capacity).

    sched-aware-16921: iter 0 rank 0 padded (d0, generation: nothing routed yet), rank 1 batch 0
      -> skip; d0 is pending (pp_size 1: the transactional path, whatever the model) -> rolled back. iter 1: rank 0 padded again (d1), batches [1, 1] -> removed. Matches the
      recording; no leak.
    prefix-2026: no rollback -> d0 leaks (cause rank 1, request 2 GENERATION_IN_PROGRESS).
      iter 1: counts [2, 1] differ from [1, 1] -> expected computed max(ceil(3/2), 2) = 2; d0 is
      carried and schedulable -> no new dummy: first divergence (1, 0, padded, True, False);
      batches [1, 1] -> d0 removed by update_states_tp after 1 skip.
    postpad-17379: iter 0 rank 1 gets a post-schedule generation dummy (active 1 < cap 4) ->
      batches [1, 1] -> both removed; first divergence (0, 0, can_queue, False, True).
    """
    frames = replay.RunFrames.from_records(CAPACITY)
    sched = replay.run(frames, policy="sched-aware-16921")
    assert ledger_rows(sched) == [(0, 0, "pad", "generation", 0, "rollback", 0, False),
                                  (0, 1, "pad", "generation", 1, "update_states_tp", 0, False)]
    assert sched.ok and sched.first_divergence is None
    prefix = replay.run(frames, policy="prefix-2026")
    assert ledger_rows(prefix) == [(0, 0, "pad", "generation", 1, "update_states_tp", 1, True)]
    assert prefix.leak_records[0].cause_states == {1: ((2, "GENERATION_IN_PROGRESS"),)}
    d = prefix.first_divergence
    assert (d.iter, d.rank, d.field, d.recorded, d.replayed) == (1, 0, "padded", True, False)
    assert "recorded scheduled 0" in prefix.explain()[0]
    post = replay.run(frames, policy="postpad-17379")
    assert ledger_rows(post) == [(0, 0, "pad", "generation", 0, "update_states_tp", 0, False),
                                 (1, 0, "postpad", "generation", 0, "update_states_tp", 0, False),
                                 (0, 1, "pad", "generation", 1, "update_states_tp", 0, False)]
    d = post.first_divergence
    assert (d.iter, d.rank, d.field) == (0, 0, "can_queue")


ALLOC = [
    run_record(2, build="newest", max_batch_size=2),
    frame(0, 0, [(1, DGI)], alloc_ok=False),
    frame(0, 1, [(2, GTC), (3, GTC), (4, GIP)]),
]


def test_alloc_failure_and_tolerant_warning():
    """tp 2, cap 2, no recorded expected: total 4, fair 2, floor max(1, 3) = 3, cap -> 2.
    Rank 1 holds 3 > 2. Rank 0 needs a dummy but add_dummy_requests returns None.

    newest: surplus warning on rank 1; rank 0's dummy skipped with a warning (no post-pad: the
      allocation fails) -> batches [0, 1] -> skip, nothing to leak.
    fix-16161: rank 0 skipped, rank 1 asserts (3 > 2): crash (0, 1, assert).
    prefix-2026: rank 0 uses the None dummy (TypeError) and rank 1 asserts: crash ranks (0, 1),
      reported at rank 0 as dummy_alloc_none.
    """
    frames = replay.RunFrames.from_records(ALLOC)
    new = replay.run(frames, policy="newest")
    assert new.ok and len(new.ledger) == 0
    assert [w[:2] for w in new.warnings()] == [(0, 0), (0, 1)]
    assert new.warnings()[1][2] == ("active_requests (3) exceeds expected_num_active_requests (2); "
                                    "tolerating")
    assert new.decisions.can_queue.tolist() == [False, False]
    fix = replay.run(frames, policy="fix-16161")
    assert (fix.crash.iter, fix.crash.rank, fix.crash.kind, fix.crash.expected, fix.crash.active) == \
        (0, 1, "assert", 2, 3)
    assert fix.decisions.alloc_failed.tolist() == [True, False]
    prefix = replay.run(frames, policy="prefix-2026")
    assert (prefix.crash.ranks, prefix.crash.kind) == ((0, 1), "dummy_alloc_none")
    assert "TypeError" in prefix.explain()[-1]


def test_iterations_missing_a_rank_are_dropped_and_listed():
    records = NOT_LAST[:3] + [NOT_LAST[4]]  # iter 1 has no frame of rank 0
    res = replay.run(replay.RunFrames.from_records(records), policy="prefix-2026")
    assert res.dropped_iters == (1,)
    assert res.decisions["iter"].unique().tolist() == [0]
    assert res.notes and "1 iterations not replayed" in res.notes[0]
    # skipped_iters are fleet-wide skips: at iter 0 rank 1 (only GENERATION_TO_COMPLETE) offers 0.
    assert res.to_json()["skipped_iters"] == [0]


@pytest.mark.parametrize("records", [nvbug_records(), NOT_LAST, CAPACITY, ALLOC])
def test_recording_build_reproduces_every_recorded_decision_and_matches_the_reference(records):
    frames = replay.RunFrames.from_records(records)
    res = replay.run(frames, policy=frames.config.build)
    assert res.first_divergence is None
    ref = run_reference(frames, policy=frames.config.build)
    assert ledger_rows(res) == ledger_rows(ref)
    assert res.crash == ref.crash


def test_run_all_and_json_shape(nvbug):
    results = replay.run_all(nvbug)
    assert list(results) == replay.policy_names()
    doc = replay.results_json(results)
    assert set(doc) == {"policies"}
    for item in doc["policies"].values():
        assert set(item) == {"verdict", "verdict_text", "leaks", "crash", "skipped_iters",
                             "first_divergence", "model_unknown"}
    assert doc["policies"]["prefix-2026"]["leaks"][0] == {
        "rank": 0, "iter_created": 41, "iter_skipped": 41, "cause_ranks": [2]}


POSTPAD_LEAK = [
    run_record(2, build="newest", max_batch_size=2, disaggregated=False),
    frame(0, 0, [(1, GIP), (3, GIP)], padded=False, scheduled=2, can_queue=True),
    frame(0, 1, [(2, GIP)], padded=False, scheduled=1, can_queue=True),
    frame(1, 0, [(1, GTC), (3, GTC)], padded=False, scheduled=0, can_queue=False),
    frame(1, 1, [(2, GTC)], padded=False, scheduled=1, can_queue=False),
    frame(2, 0, [], padded=True, scheduled=1, can_queue=True),
    frame(2, 1, [DUMMY], padded=False, scheduled=1, can_queue=True),
]


def test_post_pad_dummy_seen_through_the_recorded_batch_is_rolled_back_on_the_aggregated_path():
    """Aggregated, tp 2, cap 2, newest. The recording leaked a post-schedule dummy; newest cannot
    have: its post-pad dummy is pending on every path (#17379's rollback test, fixes flag off).

    iter 1: both ranks hold only GENERATION_TO_COMPLETE (predicate ALL counts them: no pad).
      Rank 0: recorded scheduled 0, active 2 = cap: no post-pad, batch 0. Rank 1: recorded
      scheduled 1 but no request in the window and no pad-step dummy, so the 1 was a post-pad
      dummy: real batch min(1, window 0) = 0 -> post-pad (active 1 < cap 2) -> batch 1.
      Batches [0, 1] -> skip; the pending post-pad dummy d0 is rolled back: nothing leaks.
    iter 2: counts [0, 0] (the recorded dummy is dropped) differ from [0, 1] -> expected
      computed max(0, 0) = 0: rank 0 (empty) is not padded, but the recording padded it: first
      divergence (2, 0, padded, recorded True, replayed False).
    """
    res = replay.run(replay.RunFrames.from_records(POSTPAD_LEAK), policy="newest")
    assert ledger_rows(res) == [(1, 1, "postpad", "generation", 1, "rollback", 0, False)]
    assert res.leak_records == () and res.crash is None
    d = res.first_divergence
    assert (d.iter, d.rank, d.field, d.recorded, d.replayed) == (2, 0, "padded", True, False)


def test_story_tells_the_fatal_leak_first(nvbug):
    """The NVBug chain above: prefix-2026 leaks the dummies of ranks 0 and 1 at iter 41 and
    rank 1 asserts at iter 42, so the story is rank 1's leak (created 41, skipped 41) ending in
    the assert; fix-16161 has nothing to tell."""
    res = replay.run(nvbug, policy="prefix-2026")
    fatal = res.fatal_leak
    assert (fatal.rank, fatal.iter_created, fatal.iter_skipped) == (1, 41, 41)
    story = res.story()
    assert len(story) == 1 and "rank 1" in story[0] and "AssertionError" in story[0]
    assert replay.run(nvbug, policy="fix-16161").story() == []
