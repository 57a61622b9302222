"""Catalogue facts checked against upstream's sources (issue 24), each on a hand-worked iteration.

Two ranks, disaggregated, model deepseek_v4, pp_size 1, cap 8 unless stated.
"""
from __future__ import annotations

import dataclasses

from replay import RunConfig, get_policy
from replay.step import REMOVED_UPDATE_STATES_TP, decide, inputs_from_states

GINIT, GTRANS, GIP = ("DISAGG_GENERATION_INIT", "DISAGG_GENERATION_TRANS_IN_PROGRESS",
                      "GENERATION_IN_PROGRESS")
NON_OVERLAP = RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=False,
                        model_arch="deepseek_v4")


def _run(name, ranks, cfg):
    pol = get_policy(name)
    return decide(pol, cfg, inputs_from_states(pol, cfg, ranks))


def test_post_schedule_pad_fills_ranks_whose_requests_all_await_kv():
    """Every rank holds one request awaiting KV (non-overlap). The forward intent all-reduces to
    NONE, so the pad step pads nobody (#16921). The window holds nothing: batches [0, 0].
    sched-aware-16921 stops there: can_queue False, no dummy anywhere. From #17379 the
    post-schedule pad looks at no request state: each rank has 1 active < cap 8, expected
    max(ceil(2/2), 1) = 1 > 0, no live dummy: both get a generation dummy, batches [1, 1],
    can_queue True, each dummy is last and leaves by update_states_tp."""
    before = _run("sched-aware-16921", [[GINIT], [GTRANS]], NON_OVERLAP)
    assert before.padded.tolist() == [False, False] and before.postpadded.tolist() == [False, False]
    assert before.can_queue.tolist() == [False, False] and not before.survives.any()
    for name in ("postpad-17379", "newest", "dkv"):
        out = _run(name, [[GINIT], [GTRANS]], NON_OVERLAP)
        assert out.padded.tolist() == [False, False]
        assert out.postpadded.tolist() == [True, True] and out.batch.tolist() == [1, 1]
        assert out.can_queue.tolist() == [True, True]
        assert out.removed_path.tolist() == [REMOVED_UPDATE_STATES_TP] * 2


def test_dkv_runs_skip_both_pads_in_builds_that_know_dkv():
    """Rank 0 awaits KV, rank 1 works (overlap). newest pads rank 0: batches [1, 1], can_queue.
    dkv on a dkv run: both pads return at once: batches [0, 1], can_queue False, no dummy; the
    same build on a run without dkv decides as newest. Builds before dkv have no such switch."""
    cfg = RunConfig(tp_size=2, disaggregated=True, model_arch="deepseek_v4", dkv_enabled=True)
    assert _run("newest", [[GINIT], [GIP]], cfg).can_queue.tolist() == [True, True]
    out = _run("dkv", [[GINIT], [GIP]], cfg)
    assert out.padded.tolist() == [False, False] and out.postpadded.tolist() == [False, False]
    assert out.batch.tolist() == [0, 1] and out.can_queue.tolist() == [False, False]
    plain = dataclasses.replace(cfg, dkv_enabled=False)
    assert _run("dkv", [[GINIT], [GIP]], plain).padded.tolist() == [True, False]


def test_dkv_skips_the_entry_check_too():
    """cap 1 (max_batch_size 1): rank 0 holds two GENERATION_TO_COMPLETE requests, rank 1 one
    request; expected = min(max(ceil(3/2), 2), 1) = 1 < 2: newest warns about the surplus; under
    dkv the pad method returns before the check."""
    cfg = RunConfig(tp_size=2, max_batch_size=1, disaggregated=True, model_arch="deepseek_v4",
                    dkv_enabled=True)
    ranks = [["GENERATION_TO_COMPLETE"] * 2, [GIP]]
    assert _run("newest", ranks, cfg).surplus.tolist() == [True, False]
    assert _run("dkv", ranks, cfg).surplus.tolist() == [False, False]


def test_newest_credits_18157_with_the_guard_only():
    newest, tolerant = get_policy("newest"), get_policy("tolerant-17278")
    assert newest.prs[0] == "#18157" and "only the guard" in newest.notes
    assert tolerant.kv_precheck is newest.kv_precheck     # the precheck is 000515e's
    assert tolerant.alloc_failure_outside_gate.value == "crash"
    assert newest.alloc_failure_outside_gate.value == "skip"
