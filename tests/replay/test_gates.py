"""Gated versions are judged by the run they replay (domain doc §10): a gated fix is never called
clean for a run outside its gate; an unnamed model is replayed both ways; eras without a cap
compute ``expected`` their own way; the dummy role follows each era's rule."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given
from replay_traces import DGI, GIP, GTC, frame, run_record
from test_properties import traces

import replay
from forensics.simulate import SCENARIOS, simulate
from replay.policy import GateState

NO_CAP = [n for n, p in replay.CATALOGUE.items() if not p.cap]
SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


def _sim_frames(tmp_path, workload, policy, scenario):
    res = simulate(workload, policy=policy, iters=scenario.iters, seed=scenario.seed,
                   out_dir=tmp_path, write=("trace",))
    recs = [json.loads(line) for line in res.files["trace"].read_text().splitlines()]
    return res, replay.RunFrames.from_records(recs)


def test_nvbug_sample_at_pp_2_the_merged_fix_leaks_where_the_proposed_one_is_clean(tmp_path):
    """The NVBug 6438685 scenario (DeepSeek-V4, named in the run record) with pp_size 2, recorded
    by prefix-2026: #16279's gate needs pp_size 1, so fix-16279 keeps the crashing count and
    leaks exactly as the recording did (no divergence), while the never-merged, ungated fix-16161
    pads the TO_COMPLETE-only ranks and is clean. The same scenario at pp_size 1 (the sample)
    is clean under both."""
    sc = SCENARIOS["nvbug-6438685"]
    sim, rf = _sim_frames(tmp_path, sc.workload.with_overrides(pp_size=2), "prefix-2026", sc)
    assert rf.config.model_arch == "deepseek_v4" and rf.config.pp_size == 2
    merged, proposed = replay.run(rf, policy="fix-16279"), replay.run(rf, policy="fix-16161")
    assert merged.policy.applies_to(rf.config).paths["fixed_count"] is GateState.CLOSED
    assert merged.verdict != "clean" and merged.gated is None
    assert len(merged.leaks) == sim.summary.leaked_dummies > 0 and merged.first_divergence is None
    assert proposed.verdict == "clean"
    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"  # the same scenario at pp_size 1
    pp1 = replay.RunFrames.from_records([json.loads(x) for x in sample.read_text().splitlines()])
    assert pp1.config.model_arch == "deepseek_v4" and pp1.config.pp_size == 1
    assert replay.run(pp1, policy="fix-16279").verdict == "clean"
    assert replay.run(pp1, policy="fix-16161").verdict == "clean"


def test_a_gated_fix_is_never_called_clean_when_the_model_is_not_named():
    """NVBug chain without a model in the run record: fix-16279's primary verdict is the worst
    of its replays (outside the gate: prefix-2026's crash), the DeepSeek-V4 replay is clean."""
    from replay_traces import nvbug_records
    rf = replay.RunFrames.from_records(nvbug_records())
    res = replay.run(rf, policy="fix-16279")
    assert res.verdict == "crash" and res.gated.verdicts() == {"deepseek_v4": "clean", None: "crash"}
    assert res.gated.shown is None
    assert res.policy.applies_to(rf.config).summary() == (
        "fix-16279: fixed_count applies only if the model is DeepSeek-V4; transactional_dummy "
        "applies only if the model is DeepSeek-V4")
    assert replay.run(rf, policy="fix-16161").gated is None  # no gate: one replay


def test_applies_to_names_every_gated_path_for_reports():
    """What a report calls to word its recommendation: per path, open/closed/unknown."""
    newest = replay.get_policy("newest")
    overlap_kimi = replay.RunConfig(tp_size=2, disaggregated=True, model_arch="kimi_k2")
    v = newest.applies_to(overlap_kimi)
    assert {k: s.value for k, s in v.paths.items()} == {
        "fixed_count": "closed", "transactional_dummy": "open", "forward_intent": "closed",
        "postpad": "open"}
    plain = replay.RunConfig(tp_size=2, disaggregated=True, overlap_scheduler=False)
    assert newest.open_paths(plain) == ["fixed_count", "transactional_dummy", "forward_intent",
                                        "postpad"]
    agg = replay.RunConfig(tp_size=2)
    assert replay.get_policy("fix-16279").open_paths(agg) == []
    assert replay.get_policy("prefix-2026").applies_to(agg).paths == {}


#: The crash iteration of a capped recording: rank 0 holds 3 real requests (a dummy of its had
#: leaked earlier; the frame shows the real ones), the recorded expected is the cap 2.
RECORDED_CAP = [
    run_record(2, build="prefix-2026", max_batch_size=2),
    frame(0, 0, [(1, GIP), (2, GIP), (3, GIP)], expected=2),
    frame(0, 1, [(4, GIP)], expected=2),
]


@pytest.mark.parametrize("name", NO_CAP)
def test_an_uncapped_era_never_reuses_a_capped_recordings_expected(name):
    """Counts [3, 1] match the recording. prefix-2026 (capped, same rule) reuses expected 2:
    3 > 2 asserts on rank 0. An uncapped era computes its own: fair ceil(4/2) = 2, floor
    max(3, 1) = 3 -> expected 3, no assert."""
    rf = replay.RunFrames.from_records(RECORDED_CAP)
    assert not rf.recorded_expected_applies(replay.get_policy(name))
    prefix = replay.run(rf, policy="prefix-2026")
    assert prefix.decisions.expected_source.tolist() == ["recorded", "recorded"]
    assert (prefix.crash.iter, prefix.crash.rank, prefix.crash.kind) == (0, 0, "assert")
    res = replay.run(rf, policy=name)
    assert res.decisions.expected_source.tolist() == ["computed", "computed"]
    assert res.decisions.expected.tolist() == [3, 3] and res.crash is None


def test_recorded_expected_rule_follows_the_recording_build():
    """An unknown build is taken as capped (every build since #13347): capped policies reuse its
    values, uncapped ones never; a no-cap catalogue build's values serve only no-cap policies."""
    for build, uncapped_reuses, capped_reuses in (("custom", False, True),
                                                  ("legacy-2025", True, False),
                                                  ("newest", False, True)):
        rf = replay.RunFrames.from_records([run_record(1, build=build), frame(0, 0, [(1, GIP)])])
        assert rf.recorded_expected_applies(replay.get_policy("early-2026")) is uncapped_reuses
        assert rf.recorded_expected_applies(replay.get_policy("fix-16279")) is capped_reuses


@given(traces())
def test_no_replay_of_an_era_without_a_cap_reports_an_assert(records):
    """Without a cap, expected >= max(counts before this iteration's requests) on every rank, so
    the entry check (which leaves those requests out) can never trip. (The random traces'
    recorded expected values are arbitrary: only the recording of a capped or unknown build is
    drawn, whose values an uncapped era never reuses.)"""
    assume(records[0]["build"] not in NO_CAP)
    rf = replay.RunFrames.from_records(records)
    for name in NO_CAP:
        res = replay.run(rf, policy=name)
        assert res.crash is None or res.crash.kind != "assert", name
        assert not res.decisions.surplus.any()


ROLE_TRACE = [
    run_record(1, build="x", disaggregated=True),
    frame(0, 0, [(1, GIP)]),                                   # first frame: nothing "new"
    frame(1, 0, [(1, GIP), (2, "CONTEXT_INIT")]),              # a context-only request arrives
    frame(2, 0, [(1, GIP), (2, GIP)]),                         # nothing arrives
    frame(3, 0, [(1, GIP), (2, GIP), (3, DGI)]),               # a generation-only request
    frame(4, 0, [(1, GIP), (2, GIP), (3, DGI)]),
]


def test_the_dummy_role_follows_each_eras_rule():
    """mid-2025: context only in the iteration a context-only request arrived; 2026 builds
    (_update_adp_dummy_role): context from that arrival until a generation-only one arrives;
    late 2025: always generation."""
    rf = replay.RunFrames.from_records(ROLE_TRACE)
    role = {n: rf.dummy_role_context(replay.get_policy(n)).tolist()
            for n in ("mid-2025", "prefix-2026", "legacy-2025")}
    assert role == {"mid-2025": [False, True, False, False, False],
                    "prefix-2026": [False, True, True, False, False],
                    "legacy-2025": [False] * 5}
    aggregated = replay.RunFrames.from_records([dict(ROLE_TRACE[0], disaggregated=False)] + ROLE_TRACE[1:])
    assert not aggregated.dummy_role_context(replay.get_policy("prefix-2026")).any()


def test_a_leaked_dummy_takes_the_role_of_its_iteration():
    """Two ranks, prefix-2026. iter 0 (first frame, nothing routed): rank 0 (only DGI) gets a
    generation dummy. iter 1: a context-only request (3, CONTEXT_INIT) is routed to rank 1, so
    rank 0's new dummy is a context one; rank 1 counts 14 and 10 (legacy count), no dummy, and
    schedules request 3 (batch 1): can_queue True, both dummies removed."""
    recs = [run_record(2, build="prefix-2026"),
            frame(0, 0, [(1, DGI)]), frame(0, 1, [(2, GIP)]),
            frame(1, 0, [(1, DGI)]), frame(1, 1, [(2, GTC), (3, "CONTEXT_INIT")])]
    res = replay.run(replay.RunFrames.from_records(recs), policy="prefix-2026")
    assert res.ledger.role.tolist() == ["generation", "context"]
