"""The three KV-capacity outcomes of a rank that wants a dummy (traces/FORMAT.md), per era.

A frame's ``kv_precheck_ok`` false: ``_has_adp_dummy_kv_capacity`` says the dummy cannot fit;
``alloc_ok`` false with the precheck passing: ``add_dummy_requests`` refuses it anyway. What a
version does with each is ``Policy.kv_precheck`` (none / the gated path of #16279 / every path
from NVIDIA 000515e on) and ``Policy.alloc_failure_for`` (the unchecked ``[0]`` until #18157 on
the legacy path).

The four-rank iteration used throughout (disaggregated, overlap, cap 8): ranks 0-2 hold one
request in DISAGG_GENERATION_INIT (no version counts it), rank 3 one GENERATION_IN_PROGRESS.
expected = max(ceil(4/4), 1) = 1, so ranks 0-2 want a dummy:
  rank 0: the dummy fits;  rank 1: the precheck fails;  rank 2: the precheck passes, refused.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from forensics.simulate import LengthDist, Workload, simulate
from replay import RunConfig, get_policy
from replay.walk import run
from replay.frames import RunFrames
from replay.policy import FrameView, KvPrecheck
from replay.reference_loop import run_reference
from replay.standin_executor import StandinExecutor
from replay.step import CRASH_ALLOC_NONE, decide, inputs_from_states

GINIT, GIP = "DISAGG_GENERATION_INIT", "GENERATION_IN_PROGRESS"
RANKS = [[GINIT], [GINIT], [GINIT], [GIP]]
PRECHECK = [True, False, True, True]
ALLOC = [True, True, False, True]


def _decide(name: str, model: str, pp: int = 1):
    cfg = RunConfig(tp_size=4, pp_size=pp, disaggregated=True, model_arch=model)
    pol = get_policy(name)
    inp = inputs_from_states(pol, cfg, RANKS, alloc_ok=ALLOC, kv_precheck_ok=PRECHECK)
    return decide(pol, cfg, inp)


# (policy, model) -> (padded, skipped without a crash, crashed) per rank, worked from the table
# in the module docstring:
#   prefix-2026: no precheck anywhere: ranks 1 and 2 attempt the allocation, get None, index it.
#   fix-16279 on deepseek_v4: precheck and a guarded allocation on its gated path: both skip.
#   fix-16279 on llama: outside the gate, no precheck, unchecked: both crash.
#   tolerant-17278 on llama (000515e): the precheck runs on every path: rank 1 skips; rank 2's
#     refusal after a passed precheck hits the legacy path's unchecked [0]: crash.
#   postpad-17379 on llama (002f3cc): #16921's fixes gate (pp_size 1, any model) guards the
#     allocation: both skip. At pp_size 2 that gate is closed, the legacy path remains: rank 1
#     skips (every-path precheck), rank 2 crashes.
#   newest (0004396, #18157): the refusal is tolerated on the legacy path too: no crash.
CASES = {
    ("prefix-2026", "llama"): ([1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 1, 0]),
    ("fix-16279", "deepseek_v4"): ([1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]),
    ("fix-16279", "llama"): ([1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 1, 0]),
    ("tolerant-17278", "llama"): ([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]),
    ("postpad-17379", "llama", 1): ([1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]),
    ("postpad-17379", "llama", 2): ([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]),
    ("newest", "llama", 2): ([1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_era_handles_the_three_outcomes(case):
    out = _decide(*case)
    padded, skipped, crashed = CASES[case]
    assert out.padded.astype(int).tolist() == padded
    assert out.alloc_failed.astype(int).tolist() == skipped
    assert out.crash.astype(int).tolist() == crashed
    assert ((out.crash_kind == CRASH_ALLOC_NONE) == out.crash).all()


def test_the_catalogue_names_where_each_version_prechecks():
    assert [get_policy(n).kv_precheck for n in ("prefix-2026", "fix-16161", "fix-16279",
                                                "tolerant-17278", "sched-aware-16921",
                                                "postpad-17379", "newest")] == [
        KvPrecheck.NONE, KvPrecheck.NONE, KvPrecheck.GATED, KvPrecheck.EVERY_PATH,
        KvPrecheck.EVERY_PATH, KvPrecheck.EVERY_PATH, KvPrecheck.EVERY_PATH]
    llama = RunConfig(tp_size=2, disaggregated=True, model_arch="llama")
    dsv4 = RunConfig(tp_size=2, disaggregated=True, model_arch="deepseek_v4")
    assert not get_policy("fix-16279").prechecks(llama) and get_policy("fix-16279").prechecks(dsv4)
    assert get_policy("tolerant-17278").prechecks(RunConfig(tp_size=2))  # aggregated too


def test_the_post_schedule_pad_needs_the_dummy_to_fit():
    """postpad-17379, aggregated, two ranks of one GENERATION_IN_PROGRESS request each that the
    capacity scheduler refused (recorded real batch 0). Nobody pads before scheduling (the
    request counts); after it, both batches are empty: rank 0's dummy fits (post-padded, batch 1),
    rank 1's precheck fails (no dummy, batch 0): can_queue False, rank 0's post-schedule dummy
    is rolled back."""
    cfg = RunConfig(tp_size=2)
    pol = get_policy("postpad-17379")
    inp = inputs_from_states(pol, cfg, [[GIP], [GIP]], real_batch=0, kv_precheck_ok=[True, False])
    out = decide(pol, cfg, inp)
    assert out.postpadded.tolist() == [True, False] and out.batch.tolist() == [1, 0]
    assert out.can_queue.tolist() == [False, False] and out.removed_path.tolist() == [3, 0]


def _trace(precheck_ok: bool, alloc_ok: bool) -> RunFrames:
    """Two ranks, disaggregated, overlap, model llama: rank 0 awaits KV, rank 1 busy; rank 0's
    frame carries the outcome."""
    run_rec = {"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 2, "pp_size": 1,
               "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": True,
               "overlap_scheduler": True, "build": "t", "model_arch": "llama"}
    f0 = {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": GINIT}]}
    if not precheck_ok:
        f0["kv_precheck_ok"] = False
    if not alloc_ok:
        f0["alloc_ok"] = False
    f1 = {"kind": "frame", "iter": 0, "rank": 1, "requests": [{"id": 2, "state": GIP}]}
    return RunFrames.from_records([run_rec, f0, f1])


@pytest.mark.parametrize("precheck_ok,alloc_ok,name,crash", [
    (False, True, "tolerant-17278", False),   # precheck fails: skipped, the fleet skips
    (True, False, "tolerant-17278", True),    # refused after the precheck: TypeError
    (True, False, "newest", False),           # #18157: tolerated
    (False, True, "prefix-2026", True),       # no precheck: the refusal is indexed
])
def test_engine_and_reference_loop_agree_on_a_recorded_outcome(precheck_ok, alloc_ok, name, crash):
    frames = _trace(precheck_ok, alloc_ok)
    assert frames.kv_precheck_ok.tolist() == [[precheck_ok, True]]
    for res in (run(frames, policy=name), run_reference(frames, policy=name)):
        assert (res.crash is not None) == crash
        if crash:
            assert (res.crash.iter, res.crash.rank, res.crash.kind) == (0, 0, "dummy_alloc_none")
        else:
            assert res.decisions["can_queue"].tolist() == [False, False]
            assert res.decisions["padded"].tolist() == [False, False]


def test_a_trace_without_the_field_reads_as_a_passed_precheck():
    frames = _trace(True, True)
    assert frames.kv_precheck_ok.all() and frames.alloc_ok.all()


@pytest.mark.parametrize("precheck_ok,alloc_ok,capacity,allocated", [
    (True, True, True, True), (False, True, False, False), (True, False, True, False)])
def test_the_standin_gives_the_real_code_the_recorded_answers(precheck_ok, alloc_ok, capacity,
                                                              allocated):
    view = FrameView(iter=0, rank=0, requests=((1, 8, False),), expected=1,
                     config=RunConfig(tp_size=1, disaggregated=True), alloc_ok=alloc_ok,
                     kv_precheck_ok=precheck_ok)
    ex = StandinExecutor(view)
    assert ex._has_adp_dummy_kv_capacity() is capacity
    assert (ex.kv_cache_manager.get_num_available_tokens(token_num_upper_bound=1) > 0) is capacity
    assert (ex.kv_cache_manager.add_dummy_requests(request_ids=[0], is_gen=True) is not None) \
        is allocated


#: As tests/simulate/test_sim_loop.py's TINY: two generation-server ranks, request 1 at iter 0.
TINY = Workload(ranks=2, max_batch_size=1, mode="generation-server", overlap=True, arrival_rate=0.0,
                arrivals=((0, 1), (3, 1)), kv_latency=LengthDist(1, 0), output_len=LengthDist(1, 0),
                kv_precheck_fail_prob=1.0)


def _sim_frames(path):
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["iter"], r["rank"]): r for r in recs[1:]}


def test_simulator_records_a_failed_precheck_where_the_version_prechecks(tmp_path):
    """No dummy ever fits. iter 0: request 1 (DISAGG_GENERATION_INIT) on rank 0, expected 1:
    both ranks want a dummy. tolerant-17278 (every-path precheck): both prechecks fail, no pad,
    batches [0, 0], can_queue False, frames carry kv_precheck_ok false; no crash ever.
    prefix-2026 (no precheck): the allocation is attempted, returns None, indexed: a crash at
    iter 0 on both ranks, frames carry alloc_ok false."""
    res = simulate(TINY, policy="tolerant-17278", iters=6, seed=0, out_dir=tmp_path / "t")
    assert res.summary.crash_iter is None
    f = _sim_frames(res.files["trace"])
    for r in (0, 1):
        assert (f[(0, r)]["padded"], f[(0, r)]["scheduled"], f[(0, r)]["can_queue"]) == \
            (False, 0, False)
        assert f[(0, r)]["kv_precheck_ok"] is False and "alloc_ok" not in f[(0, r)]
    res = simulate(TINY, policy="prefix-2026", iters=6, seed=0, out_dir=tmp_path / "p")
    assert (res.summary.crash_iter, res.summary.crash_ranks, res.summary.crash_kind) == \
        (0, (0, 1), "dummy_alloc_none")
    f = _sim_frames(res.files["trace"])
    assert all(f[(0, r)]["alloc_ok"] is False and "kv_precheck_ok" not in f[(0, r)]
               for r in (0, 1))


def test_warnings_name_the_precheck_or_the_refusal():
    """The same skipped pad is explained by what stopped it: tolerant-17278 prechecks, so a
    failed precheck logs "Unable to fit ..."; fix-16161 has no precheck, so the same frame is an
    attempted allocation that returned None ("Cannot allocate ...")."""
    from replay.explain import warnings
    frames = _trace(False, True)
    assert warnings(run(frames, policy="tolerant-17278")) == [
        (0, 0, "Unable to fit the complete attention-DP dummy KV allocation; skipping this "
               "forward iteration and retrying")]
    [(it, rank, text)] = warnings(run(frames, policy="fix-16161"))
    assert (it, rank) == (0, 0) and text.startswith("Cannot allocate the attention-DP pad dummy")
