"""A recorded ``postpadded`` (PR #17379 post-schedule dummy) replaces the replay's inference.

Hand-worked trace (two aggregated ranks, max_batch_size 2, so the cap is 2; non-overlap; recorded
on a ``postpad-17379`` build):

iteration 0 (the run's first frame, so no request counts as new):
    counts [1, 1]; fair share ceil(2 / 2) = 1, floor max(1, 1) = 1 -> expected 1 (recorded 1,
    and the recorded counts match, so the recorded value is used).
    rank 0 holds id 1 GENERATION_IN_PROGRESS: counted, no pad; scheduled 1 (the request).
    rank 1 holds id 2 CONTEXT_INIT: counted (aggregated: every request), no pad; the capacity
    scheduler refuses it (no KV room), so the batch is empty; active 1 < cap 2, so the post-pad
    step appends a generation dummy: recorded scheduled 1, postpadded true.
    sizes [1, 1] -> can_queue True; the dummy is last and leaves by _update_request_states_tp.

With ``postpadded`` recorded the real batch of rank 1 is exact: 1 - 1 (postpadded) - 0 (no pad or
carried dummy) = 0, and the replay re-creates the post-pad dummy.

The old inference (field absent) reads scheduled 1 minus no recorded dummy = 1, limited to the
window (1 CONTEXT_INIT request) = 1: it takes the dummy for request 2. Under postpad-17379 that
still matches every recorded decision (batch 1, can_queue True) but loses the dummy from the
ledger; under a version without the post-pad step it answers can_queue True where the real
answer is a fleet-wide skip (rank 1's batch would be 0).
"""
from __future__ import annotations

import json

import pytest

from replay import RunFrames, run
from replay.reference_loop import run_reference

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": False,
       "overlap_scheduler": False, "build": "postpad-17379"}
FRAMES = [
    {"kind": "frame", "iter": 0, "rank": 0,
     "requests": [{"id": 1, "state": "GENERATION_IN_PROGRESS"}],
     "expected": 1, "padded": False, "scheduled": 1, "can_queue": True, "postpadded": False},
    {"kind": "frame", "iter": 0, "rank": 1, "requests": [{"id": 2, "state": "CONTEXT_INIT"}],
     "expected": 1, "padded": False, "scheduled": 1, "can_queue": True, "postpadded": True},
]


def _without_postpadded(frames):
    return [{k: v for k, v in f.items() if k != "postpadded"} for f in frames]


@pytest.fixture
def recorded():
    return RunFrames.from_records([RUN] + FRAMES)


@pytest.fixture
def inferred():
    return RunFrames.from_records([RUN] + _without_postpadded(FRAMES))


def test_recorded_postpadded_gives_the_exact_real_batch(recorded, inferred):
    assert recorded.rec_postpadded.tolist() == [[0, 1]]
    assert recorded.real_batch.tolist() == [[1, 0]]
    assert inferred.rec_postpadded.tolist() == [[-1, -1]]
    assert inferred.real_batch.tolist() == [[1, 1]]     # the inference reads the dummy as request 2


@pytest.mark.parametrize("policy", ["postpad-17379", "newest"])
@pytest.mark.parametrize("replayer", [run, run_reference], ids=["engine", "reference"])
def test_capacity_refused_rank_replays_its_post_pad_dummy(recorded, policy, replayer):
    res = replayer(recorded, policy=policy)
    assert res.first_divergence is None and res.crash is None and res.leaks.empty
    d = res.decisions
    assert d["postpadded"].tolist() == [False, True]
    assert d["batch"].tolist() == [1, 1] and d["can_queue"].tolist() == [True, True]
    cols = ["rank", "iter_created", "origin", "iter_removed", "removal_path"]
    assert res.ledger[cols].astype(object).values.tolist() == [
        [1, 0, "postpad", 0, "update_states_tp"]]


@pytest.mark.parametrize("policy", ["postpad-17379", "newest"])
def test_the_old_inference_loses_the_post_pad_dummy(inferred, policy):
    res = run(inferred, policy=policy)
    assert res.first_divergence is None            # nothing recorded contradicts it ...
    assert res.decisions["postpadded"].tolist() == [False, False]
    assert len(res.ledger) == 0                    # ... but the dummy is gone


@pytest.mark.parametrize("replayer", [run, run_reference], ids=["engine", "reference"])
def test_without_the_post_pad_step_the_fleet_skips_and_postpadded_diverges_first(
        recorded, inferred, replayer):
    """tolerant-17278 has no post-pad step: rank 1's batch is its real batch, 0, so the fleet
    skips (the first divergence is rank 0's can_queue); the inference instead replays batch 1 and
    no skip. With the ranks swapped, the refused rank is rank 0 and its postpadded is the first
    divergence (compared before scheduled, which also differs: recorded 1, replayed 0)."""
    res = replayer(recorded, policy="tolerant-17278")
    assert res.decisions["batch"].tolist() == [1, 0]
    assert res.decisions["can_queue"].tolist() == [False, False]
    d = res.first_divergence
    assert (d.iter, d.rank, d.field, d.recorded, d.replayed) == (0, 0, "can_queue", True, False)
    old = replayer(inferred, policy="tolerant-17278")
    assert old.decisions["batch"].tolist() == [1, 1] and old.first_divergence is None
    swapped = RunFrames.from_records([RUN] + [dict(f, rank=1 - f["rank"]) for f in FRAMES])
    d = replayer(swapped, policy="tolerant-17278").first_divergence
    assert (d.iter, d.rank, d.field, d.recorded, d.replayed) == (0, 0, "postpadded", True, False)


def test_postpadded_travels_through_a_dataset(tmp_path):
    import forensics
    p = tmp_path / "run.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in [RUN] + FRAMES))
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert ds.frames.sort_values("rank")["postpadded"].tolist() == [False, True]
    frames = RunFrames.from_dataset(ds)
    assert frames.real_batch.tolist() == [[1, 0]]
    assert run(frames, policy="postpad-17379").first_divergence is None


def test_records_from_frames_keeps_postpadded(recorded):
    from forensics.trace_records import records_from_frames
    back = RunFrames.from_records(records_from_frames(recorded))
    for name in ("real_batch", "rec_postpadded", "rec_padded", "rec_can_queue"):
        assert (getattr(back, name) == getattr(recorded, name)).all(), name


def test_the_simulators_post_pad_run_records_postpadded_and_replays(tmp_path):
    """aggregated-overlap under postpad-17379: the simulator writes postpadded on every frame
    (some true) and the replay agrees with every recorded decision, postpadded included."""
    from forensics.simulate import simulate
    res = simulate("aggregated-overlap", policy="postpad-17379", out_dir=tmp_path,
                   write=("trace",))
    recs = [json.loads(x) for x in res.files["trace"].read_text().splitlines()]
    frames = [r for r in recs if r["kind"] == "frame"]
    assert all("postpadded" in f for f in frames)
    assert sum(f["postpadded"] for f in frames) > 0
    rf = RunFrames.from_records(recs)
    rep = run(rf, policy="postpad-17379")
    assert rep.first_divergence is None
    assert int(rep.decisions["postpadded"].sum()) == sum(f["postpadded"] for f in frames)


def test_the_simulator_records_refused_allocations_and_replays_them(tmp_path):
    """aggregated-overlap with a dummy refused 30% of the time, under newest: frames where a pad
    or post-pad allocation returned None say ``alloc_ok: false``; they are exactly where the
    replay logs a refused pad dummy or leaves an empty batch without its post-pad dummy, and
    every recorded decision replays."""
    from forensics.simulate import SCENARIOS, simulate
    w = SCENARIOS["aggregated-overlap"].workload.with_overrides(alloc_fail_prob=0.3)
    res = simulate(w, policy="newest", iters=120, seed=5, out_dir=tmp_path, write=("trace",))
    recs = [json.loads(x) for x in res.files["trace"].read_text().splitlines()]
    frames = [r for r in recs if r["kind"] == "frame"]
    refused = {(f["iter"], f["rank"]) for f in frames if f.get("alloc_ok") is False}
    assert refused and all(f.get("alloc_ok") in (None, False) for f in frames)  # never true
    rep = run(RunFrames.from_records(recs), policy="newest")
    assert rep.first_divergence is None
    d = rep.decisions
    # A post-pad was attempted and refused: the batch stayed empty on a rank below the cap.
    postpad_refused = (d["batch"] == 0) & (d["active"] > 0) & (d["active"] < w.effective_cap)
    wanted = d["alloc_failed"] | postpad_refused
    assert refused == {(int(i), int(r)) for i, r in zip(d["iter"][wanted], d["rank"][wanted])}


def test_a_field_some_frames_record_and_frames_out_of_rank_order():
    """``postpadded`` recorded on rank 1 only reads -1 on rank 0 (a column with some nulls),
    and frames listed rank 1 first still land on their ranks (not in grid order)."""
    frames = [FRAMES[1], _without_postpadded(FRAMES)[0]]
    rf = RunFrames.from_records([RUN] + frames)
    assert rf.rec_postpadded.tolist() == [[-1, 1]]
    assert rf.n_real.tolist() == [[1, 1]]
    assert rf.line.tolist() == [[3, 2]]          # rank 0's frame is the file's third line
    assert rf.real_batch.tolist() == [[1, 0]]    # rank 1 exact, rank 0 inferred (1 request)
