"""Tests of forensics.minimize: ddmin, the shrink passes, and shrinking the NVBug 6438685 chain.

The hand-worked chain (disaggregated, overlap loop, max_batch_size 2, cap 2), on ranks A and B:

    iter 1  A: ids 4, 5 in DISAGG_GENERATION_TRANS_IN_PROGRESS   B: id 2 GENERATION_TO_COMPLETE
    iter 2  A: ids 4, 5 in GENERATION_IN_PROGRESS                B: nothing

prefix-2026 (legacy predicate, cap, assert): at iter 1, A counts 0 schedulable (both await KV)
and is padded; B counts its TO_COMPLETE request as schedulable, gets no dummy, and schedules 0
(the window [10, 14) refuses 14), so can_queue is False and A's dummy leaks (created 1, skipped
1, cause B). At iter 2, A holds 2 real + the leaked dummy = 3; expected = min(max(ceil(3/2),
3 - 0), cap 2) = 2 < 3: the entry assert fires on A at iter 2.
fix-16161 (window predicate): at iter 1 B counts 0 in the window and is padded too; every batch
is 1, can_queue is True, both dummies are removed; at iter 2 A holds 2 = expected 2. No leak.

Removing B removes the skip, removing A removes the leak, removing iter 1 removes the leak,
removing iter 2 removes the crash, and removing id 4 or 5 leaves A at 1 real + dummy = 2 =
expected (no crash): so the 1-minimal result is exactly those 2 ranks, 2 iterations, 3 requests.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import cli
from forensics.readers.trace_v1 import tables_from_records
from forensics.minimize import (PASSES, NotFailingError, ddmin, minimize, renumber_iterations)
from forensics.trace_records import TraceSize, load_records, write_records

REPO = Path(__file__).resolve().parents[1]
NVBUG_SAMPLE = REPO / "traces" / "samples" / "nvbug-6438685" / "trace.jsonl"

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 6, "pp_size": 1,
       "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026"}
A, B = 4, 1  # the chain's ranks inside the noisy six-rank run


def frame(it, rank, reqs, **kw):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs], **kw}


def noisy_run() -> list[dict]:
    """Six ranks, iterations 10-21; the chain sits on ranks A=4 and B=1 at iterations 15-16.

    Every other frame holds schedulable requests (state 13), so nothing else pads or skips;
    recorded ``expected``/``scheduled`` are consistent with the window (min(window, 2)).
    """
    recs = [dict(RUN)]
    for it in range(10, 22):
        for rank in range(6):
            base = 100 * rank
            if rank == A and it == 15:
                reqs = [(4, 9), (5, 9)]
            elif rank == A and it == 16:
                reqs = [(4, 13), (5, 13)]
            elif rank == B and it == 15:
                reqs = [(2, 14)]
            elif rank == B and it < 15:
                reqs = [(2, 13)]
            elif rank in (A, B):
                reqs = [] if rank == B else [(base + 1, 13)]
            else:
                reqs = [(base + 1, 13), (base + 3 + it % 3, 13)]
            window = sum(10 <= s < 14 for _, s in reqs)
            recs.append(frame(it, rank, reqs, expected=2, scheduled=min(window, 2)))
    return recs


def test_ddmin_finds_a_one_minimal_subset():
    assert ddmin(list(range(8)), lambda s: 3 in s and 6 in s) == [3, 6]
    assert ddmin(list(range(100)), lambda s: {7, 50, 99} <= set(s)) == [7, 50, 99]
    assert ddmin([1, 2, 3], lambda s: True, allow_empty=True) == []
    assert ddmin([1, 2, 3], lambda s: True) == [1]


def test_rank_pass_renumbers_ranks_and_sets_tp_size():
    recs = noisy_run()
    kept = PASSES["ranks"].keep(recs, [1, 4])
    assert kept[0]["tp_size"] == 2
    assert {f["rank"] for f in kept[1:]} == {0, 1}
    # old rank 4 (A) is new rank 1; the trace reads back as valid v1
    a15 = next(f for f in kept[1:] if f["iter"] == 15 and f["rank"] == 1)
    assert [q["id"] for q in a15["requests"]] == [4, 5]
    tables = tables_from_records(kept, "<kept>")
    assert tables.frames.num_rows == 2 * 12


def test_nvbug_chain_shrinks_to_two_ranks_two_iterations():
    result = minimize(noisy_run(), "prefix-2026", "fix-16161")
    assert result.before == TraceSize(ranks=6, iterations=12, requests=20, frames=72)
    assert result.after == TraceSize(ranks=2, iterations=2, requests=3, frames=4)
    assert result.target == "crash"
    # B (old rank 1) becomes rank 0, A (old rank 4) rank 1; decisions dropped (not needed).
    assert result.records[1:] == [
        frame(15, 0, [(2, 14)]),
        frame(15, 1, [(4, 9), (5, 9)]),
        frame(16, 0, []),
        frame(16, 1, [(4, 13), (5, 13)]),
    ]
    assert result.records[0] == dict(RUN, tp_size=2)
    o = result.outcome
    assert (o.crash, o.crash_iter, o.crash_rank, o.first_leak_iter) == (True, 16, 1, 15)
    tables_from_records(result.records, "<minimized>")  # valid v1


def test_without_contrast_keeps_only_the_failure():
    result = minimize(noisy_run(), "legacy-2025")
    # legacy-2025 has no cap: the chain leaks (iteration 15) without crashing, so only the leak
    # is kept: B's TO_COMPLETE request and one rank padded while awaiting KV at iteration 15.
    assert result.target == "leak"
    assert result.after.iterations == 1 and result.after.ranks == 2
    assert result.outcome.leak and not result.outcome.crash


def test_a_needed_recorded_decision_is_kept():
    """A recorded ``scheduled = 0`` on a rank whose request is in the window is the only reason
    it offers a zero batch (the replay trusts the recorded real batch), so the decisions pass
    must keep exactly that field and drop the others.

    iter 0: expected 2 (ceil(3/2)); rank 0's two requests await KV and it is padded; rank 1's
    recorded batch is 0, so the
    fleet skips and rank 0's dummy leaks under prefix-2026 (sched-aware-16921 rolls the pending
    dummy back).
    iter 1: rank 0 holds 2 real + the dummy = 3 > expected min(max(ceil(4/2), 3), 2) = 2.
    """
    recs = [dict(RUN, tp_size=2),
            frame(0, 0, [(1, 9), (3, 9)], expected=2, padded=True, scheduled=1, can_queue=False),
            frame(0, 1, [(2, 13)], expected=2, padded=False, scheduled=0, can_queue=False),
            frame(1, 0, [(1, 13), (3, 13)], expected=2),
            frame(1, 1, [(2, 13)], expected=2)]
    result = minimize(recs, "prefix-2026", "sched-aware-16921")
    decisions = {(f["iter"], f["rank"]): {k for k in f if k not in ("kind", "iter", "rank", "requests")}
                 for f in result.records[1:]}
    assert decisions[(0, 1)] == {"scheduled"}
    assert all(not v for k, v in decisions.items() if k != (0, 1))
    assert result.outcome.crash and result.outcome.crash_iter == 1


def test_refuses_a_trace_that_does_not_fail():
    with pytest.raises(NotFailingError):
        minimize(noisy_run(), "fix-16161")
    with pytest.raises(NotFailingError, match="contrast"):
        minimize(noisy_run(), "prefix-2026", "legacy-2025")


def test_contiguous_iterations_keep_the_verdicts():
    recs = [r for r in noisy_run() if r["kind"] == "run" or r["iter"] != 12]
    _, new_of = renumber_iterations(recs)
    assert new_of[13] == 12 and new_of[21] == 20
    result = minimize(noisy_run(), "prefix-2026", "fix-16161", contiguous_iters=True)
    assert [f["iter"] for f in result.records[1:]] == [15, 15, 16, 16]  # already contiguous


def test_cli_prints_sizes_and_writes_a_valid_trace(tmp_path):
    src = write_records(noisy_run(), tmp_path / "run.jsonl")
    out = tmp_path / "small.jsonl"
    res = CliRunner().invoke(cli, ["minimize", str(src), "--policy", "prefix-2026",
                                   "--contrast", "fix-16161", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "before: 6 ranks, 12 iterations, 20 requests, 72 frames" in res.output
    assert "after:  2 ranks, 2 iterations, 3 requests, 4 frames" in res.output
    assert TraceSize.of(load_records(str(out))) == TraceSize(2, 2, 3, 4)
    bad = CliRunner().invoke(cli, ["minimize", str(src), "--policy", "fix-16161", "-o", str(out)])
    assert bad.exit_code == 2 and "nothing to minimize" in bad.output


@pytest.mark.skipif(not NVBUG_SAMPLE.is_file(), reason="no nvbug-6438685 sample trace")
def test_nvbug_sample_meets_the_size_goal():
    result = minimize(load_records(str(NVBUG_SAMPLE)), "prefix-2026", "fix-16161")
    assert result.after.ranks <= 3 and result.after.iterations <= 4
    tables_from_records(result.records, "<minimized>")
