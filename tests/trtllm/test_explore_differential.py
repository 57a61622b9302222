"""Differential exploration against real code (issue 24 items 2 and 6): mutant catalogue entries
are caught against the era fixture they mutate, the true entries are not, and every era fixture
agrees on every schedule of a small bound with the entry ``identify --explore`` names."""
from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from trtllm_checkouts import ERA_FIXTURES, place_era

import replay.identify
from forensics.cli import cli
from replay.catalogue import get_policy
from replay.explore import Bound, ConfigSpace, explore, identify_by_exploration
from replay.policy import KvPrecheck

#: Outside every gate (llama) and inside (deepseek_v4), with and without the overlap loop.
SPACE = ConfigSpace(disaggregated=(True,), pp_sizes=(1, 2), overlap=(True, False),
                    models=("deepseek_v4", "llama"), max_batch_sizes=(1,), dkv=(False,))
SMALL = Bound(ranks=2, requests=1, iterations=2)

#: The entry each era fixture models, and the entries this small bound cannot tell from it:
#: the dummy role of mid-2025 (context on a context arrival) shows from the third iteration,
#: the post-schedule pad of 002f3cc needs a cap of 2 (max_batch_size 2), and the KV-connector
#: proposal differs from 0004396 only on a path request states do not express.
EXPECTED = {
    "mid-2025": ("mid-2025", {"early-2026"}),
    "late-2025": ("legacy-2025", set()),
    "early-2026": ("early-2026", {"mid-2025"}),
    "prefix-2026": ("prefix-2026", set()),
    "16279": ("fix-16279", set()),
    "000515e": ("tolerant-17278", set()),
    "002f3cc": ("postpad-17379", {"sched-aware-16921"}),
    "0004396": ("newest", {"kv-connector-19164"}),
    "dkv": ("dkv", set()),
    "fork-ingestion-task": ("newest", {"kv-connector-19164"}),
}


@pytest.fixture(scope="module")
def eras(tmp_path_factory):
    root = tmp_path_factory.mktemp("eras")
    return {era: f"trtllm:{place_era(root / era, era)}" for era in ERA_FIXTURES}


def test_precheck_moved_back_under_the_gate_is_caught(eras):
    """000515e prechecks on every path: outside the gate (llama) a dummy the precheck sees
    cannot fit is not padded and nothing crashes. A mutant of its entry with the precheck only
    under #16279's gate allocates there, is refused, and indexes None: the first divergence is
    the crash, on 1 rank, 1 iteration, 1 request (a DISAGG_GENERATION_INIT request, which the
    count does not take, so the rank wants a dummy)."""
    mutant = dataclasses.replace(get_policy("tolerant-17278"), name="mutant-gated-precheck",
                                 kv_precheck=KvPrecheck.GATED)
    res = explore(eras["000515e"], SPACE, SMALL, against=mutant)
    assert res.failed
    first = res.witnesses[0]
    assert (first.kind, first.size) == ("divergence", (1, 1, 1))
    assert first.cause == "crash: none vs hang in a collective"
    assert first.config.model_arch == "llama"
    frame = [r for r in first.records if r["kind"] == "frame"][0]
    assert frame["kv_precheck_ok"] is False
    assert frame["requests"][0]["state"] in ("DISAGG_GENERATION_INIT", "DISAGG_CONTEXT_WAIT_SCHEDULER")
    assert not explore(eras["000515e"], SPACE, SMALL, against="tolerant-17278").failed


def test_fix_16279_predicate_widened_is_caught(eras):
    """#16279 counts the window only for DeepSeek-V4: on llama the real code keeps the legacy
    count, which takes a DISAGG_CONTEXT_WAIT_SCHEDULER request (outside the window), so a rank
    holding only that gets no dummy. A mutant with the window count on every model pads it: the
    first divergence is ``padded`` (real 0, mutant 1) on 1 rank, 1 iteration, 1 request."""
    mutant = dataclasses.replace(get_policy("fix-16279"), name="mutant-widened", count_gate=None)
    res = explore(eras["16279"], SPACE, SMALL, against=mutant)
    padded = [w for w in res.witnesses if w.cause == "padded: 0 vs 1"]
    assert padded and padded[0].size == (1, 1, 1)
    assert padded[0].config.model_arch == "llama"
    frame = [r for r in padded[0].records if r["kind"] == "frame"][0]
    assert frame["requests"] == [{"id": 1, "state": "DISAGG_CONTEXT_WAIT_SCHEDULER"}]
    assert not explore(eras["16279"], SPACE, SMALL, against="fix-16279").failed


@pytest.mark.parametrize("era", sorted(ERA_FIXTURES))
def test_every_era_agrees_with_the_entry_identify_explore_names(eras, era):
    space = dataclasses.replace(SPACE, overlap=(False,), dkv=(False, True))
    found = identify_by_exploration(eras[era], space, SMALL)
    expected, twins = EXPECTED[era]
    assert expected in found.agreeing, found.summary()
    assert set(found.agreeing) - {expected} <= twins, found.summary()


def test_cli_identify_explore_and_explore_against(eras, monkeypatch):
    """``identify --explore`` exits 0 naming the entries that agree (the exploration itself is
    narrowed here: the default space takes minutes on real code); ``explore --against`` exits 1
    with a divergence and 0 without."""
    narrow = dataclasses.replace(SPACE, pp_sizes=(1,), overlap=(False,), models=("llama",))
    monkeypatch.setattr(replay.identify, "identify_explore",
                        lambda spec, space, bound: identify_by_exploration(spec, narrow, bound))
    runner = CliRunner()
    out = runner.invoke(cli, ["identify", eras["prefix-2026"], "--explore", "--iterations", "1"])
    assert out.exit_code == 0, out.output
    assert "agrees on every schedule with: " in out.output and "prefix-2026" in out.output
    args = ["explore", "--policy", eras["prefix-2026"], "--mode", "disagg", "--pp", "1",
            "--overlap", "off", "--model", "llama", "--max-batch-size", "1", "--dkv", "off",
            "--iterations", "2", "--requests", "1"]
    assert runner.invoke(cli, args + ["--against", "prefix-2026"]).exit_code == 0
    diverged = runner.invoke(cli, args + ["--against", "fix-16161"])
    assert diverged.exit_code == 1 and "divergence on" in diverged.output
