"""The simulator's loop against a hand-worked run (domain doc §1, §4-7)."""
import json

import pytest

from forensics.errors import ConfigError
from forensics.simulate import LengthDist, Workload, simulate

#: Two generation-server ranks, max_batch_size 1 (cap 1), overlap on, KV transfer of exactly one
#: iteration after the request, one token to generate; request 1 arrives at iteration 0 and
#: request 2 at iteration 3. No random draw matters.
TINY = Workload(ranks=2, max_batch_size=1, mode="generation-server", overlap=True, arrival_rate=0.0,
                arrivals=((0, 1), (3, 1)), kv_latency=LengthDist(1, 0), output_len=LengthDist(1, 0))


def _frames(path):
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert recs[0]["kind"] == "run"
    return recs[0], {(r["iter"], r["rank"]): r for r in recs[1:]}


def test_hand_worked_crash_under_prefix_2026(tmp_path):
    """The NVBug 6438685 chain on two ranks, worked by hand:

    iter 0: request 1 arrives (expected = ceil(1/2) = 1), routed to rank 0 in
            DISAGG_GENERATION_INIT. Both ranks count 0 schedulable -> both pad; batches [1, 1];
            can_queue; dummies removed. Request 1 starts its KV transfer (ready at 0+1+1 = 2).
    iter 1: rank 0 holds [1: TRANS_IN_PROGRESS] -> both pad again, can_queue.
    iter 2: the poll sees the transfer done: [1: TRANS_COMPLETE] is scheduled (batch 1, no dummy),
            rank 1 pads; the forward yields the last token -> GENERATION_TO_COMPLETE.
    iter 3: request 2 arrives; counts [1, 0], expected = max(ceil(2/2), 1) = 1, routed to rank 1.
            Rank 0: the legacy count includes TO_COMPLETE -> no dummy, the scheduler refuses it ->
            batch 0. Rank 1: [2: GENERATION_INIT] -> a dummy, batch 1; generation role (request 2
            arrived as a generation-only request: _update_adp_dummy_role).
            can_queue is False everywhere. Rank 0 (batch 0) processes its previous batch and
            request 1 leaves; rank 1 does not, so its dummy survives.
    iter 4: counts [0, 2] (the leaked dummy counts); expected = min(max(ceil(2/2), 2), cap 1) = 1;
            rank 1 has 2 > 1 -> AssertionError on rank 1 at iteration 4.
    """
    res = simulate(TINY, policy="prefix-2026", iters=20, seed=0, out_dir=tmp_path)
    s = res.summary
    assert (s.crash_iter, s.crash_ranks, s.crash_kind) == (4, (1,), "assert")
    assert s.leaked_dummies == 1 and s.skipped_iters == 1 and s.first_leak_iter == 3
    run, f = _frames(res.files["trace"])
    assert run["build"] == "prefix-2026" and run["max_num_active_requests"] == 1
    assert f[(2, 0)]["requests"] == [{"id": 1, "state": "DISAGG_GENERATION_TRANS_COMPLETE"}]
    assert f[(3, 0)]["requests"] == [{"id": 1, "state": "GENERATION_TO_COMPLETE"}]
    assert (f[(3, 0)]["padded"], f[(3, 0)]["scheduled"], f[(3, 0)]["can_queue"]) == (False, 0, False)
    assert (f[(3, 1)]["padded"], f[(3, 1)]["scheduled"]) == (True, 1)
    # The leaked dummy sits after request 2 (appended by the pad step of iteration 3).
    assert f[(4, 1)]["requests"] == [
        {"id": 2, "state": "DISAGG_GENERATION_TRANS_IN_PROGRESS"},
        {"id": 0, "state": "GENERATION_IN_PROGRESS", "dummy": True}]
    assert f[(4, 0)]["requests"] == []
    assert f[(4, 1)]["expected"] == 1 and "padded" not in f[(4, 1)]
    assert max(i for i, _ in f) == 4


def test_same_workload_is_clean_under_the_fix(tmp_path):
    """Under fix-16161 rank 0's TO_COMPLETE request is outside the window at iter 3, so it pads,
    can_queue stays True, every dummy is removed and both requests complete."""
    res = simulate(TINY, policy="fix-16161", iters=20, seed=0, out_dir=tmp_path)
    s = res.summary
    assert s.crash_iter is None and s.leaked_dummies == 0 and s.requests_completed == 2
    _, f = _frames(res.files["trace"])
    assert (f[(3, 0)]["padded"], f[(3, 0)]["can_queue"]) == (True, True)


def test_without_the_cap_the_leak_is_silent(tmp_path):
    """legacy-2025 has no cap: at iter 4 expected = max(1, 2) = 2, so no assert, only a leak."""
    res = simulate(TINY, policy="legacy-2025", iters=5, seed=0, out_dir=tmp_path)
    assert res.summary.crash_iter is None and res.summary.leaked_dummies == 1
    _, f = _frames(res.files["trace"])
    assert f[(4, 1)]["expected"] == 2


def test_non_overlap_requests_leave_in_the_same_iteration(tmp_path):
    """Without overlap the last token completes the request at once: no TO_COMPLETE, no skip."""
    w = TINY.with_overrides(overlap=False)
    res = simulate(w, policy="prefix-2026", iters=20, seed=0, out_dir=tmp_path)
    _, f = _frames(res.files["trace"])
    states = {q["state"] for fr in f.values() for q in fr["requests"]}
    assert "GENERATION_TO_COMPLETE" not in states
    assert res.summary.skipped_iters == 0 and res.summary.requests_completed == 2


@pytest.mark.parametrize("changes, needle", [
    ({"ranks": 0}, "ranks must be at least 1"),
    ({"cap": 0}, "cap"),
    ({"max_batch_size": 0}, "max_batch_size"),
    ({"mode": "disagg"}, "unknown serving mode"),
    ({"arrival_rate": -1.0}, "arrival_rate"),
])
def test_bad_workloads_are_refused(changes, needle):
    with pytest.raises(ConfigError, match=needle):
        TINY.with_overrides(**changes)


def test_bad_simulate_parameters_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown scenario"):
        simulate("no-such-scenario", out_dir=tmp_path)
    with pytest.raises(ConfigError, match="iters"):
        simulate(TINY, iters=0, out_dir=tmp_path)
    with pytest.raises(ConfigError, match="log format"):
        simulate(TINY, log_format="V9", out_dir=tmp_path)
    from forensics.errors import PolicyError
    with pytest.raises(PolicyError):
        simulate(TINY, policy="prefix-2099", out_dir=tmp_path)
