"""Differential exploration against real code (issue 24 items 2 and 6): mutant catalogue entries
are caught against the era fixture they mutate, the true entries are not, every era fixture
agrees on every schedule of a small bound with the entry ``identify --explore`` names, and the
default bound separates the entries the small one cannot (every era over the whole default space
and bound: ``benchmarks/explore_eras.py``, docs/explore.md)."""
from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from trtllm_checkouts import ERA_ENTRIES, ERA_FIXTURES, place_era

import replay.identify
from forensics.cli import cli
from replay.catalogue import get_policy
from replay.explore import DEFAULT_BOUND, Bound, ConfigSpace, explore, identify_by_exploration
from replay.policy import KvPrecheck

#: Outside every gate (llama) and inside (deepseek_v4), with and without the overlap loop.
SPACE = ConfigSpace(disaggregated=(True,), pp_sizes=(1, 2), overlap=(True, False),
                    models=("deepseek_v4", "llama"), max_batch_sizes=(1,), dkv=(False,))
SMALL = Bound(ranks=2, requests=1, iterations=2)

#: The entries this small bound and space cannot tell from the one each era fixture models
#: (``ERA_ENTRIES``): the dummy role of mid-2025 (context on a context arrival) shows from the
#: third iteration, the post-schedule pad of 002f3cc needs a cap of 2 (max_batch_size 2); the
#: KV-connector entry (#19250) has newest's step in every configuration (no bound separates them).
SMALL_TWINS = {
    "mid-2025": {"early-2026"},
    "early-2026": {"mid-2025"},
    "002f3cc": {"sched-aware-16921"},
    "0004396": {"kv-connector-19164"},
    "fork-ingestion-task": {"kv-connector-19164"},
}


def one_config(model: str, max_batch_size: int) -> ConfigSpace:
    """One configuration: disaggregated, pp_size 1, the overlap loop, no dkv."""
    return ConfigSpace(disaggregated=(True,), pp_sizes=(1,), overlap=(True,), models=(model,),
                       max_batch_sizes=(max_batch_size,), dkv=(False,))


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
    assert found.named == ERA_ENTRIES[era], found.summary()
    assert set(found.agreeing) - {found.named} <= SMALL_TWINS.get(era, set()), found.summary()


@pytest.mark.parametrize("era, twin", [("mid-2025", "early-2026"), ("early-2026", "mid-2025")])
def test_the_default_bound_separates_the_dummy_roles_of_2025_and_2026(eras, era, twin):
    """Hand-worked, 1 rank, cap 1 (disaggregated, DeepSeek-V4, overlap): iteration 0 holds
    nothing (expected 0: no dummy); iteration 1 a DISAGG_CONTEXT_WAIT_SCHEDULER request arrives
    (a context-only arrival: both roles turn context; the legacy count takes state 7, no dummy);
    iteration 2 it is awaiting KV (DISAGG_GENERATION_INIT, moved forward in enum order; the
    legacy count does not take it): expected 1, the rank is padded. mid-2025 gives the dummy the
    context role only in an iteration where a context-only request arrived (none did: a
    generation dummy); 2026 builds keep the context role until requests arrive again. Three
    iterations: the small bound (two) cannot see it, the default one does."""
    found = identify_by_exploration(eras[era], one_config("deepseek_v4", 1), DEFAULT_BOUND)
    assert found.agreeing == (ERA_ENTRIES[era],), found.summary()
    w = found.first_divergence[twin]
    context = {"mid-2025": 0, "early-2026": 1}
    assert w.cause == f"role_context: {context[era]} vs {context[twin]}"
    assert w.size == (1, 3, 1)
    frames = [r["requests"] for r in w.records if r["kind"] == "frame"]
    assert frames == [[], [{"id": 1, "state": "DISAGG_CONTEXT_WAIT_SCHEDULER"}],
                      [{"id": 1, "state": "DISAGG_GENERATION_INIT"}]]


def test_the_default_space_separates_the_post_schedule_pad_of_002f3cc(eras):
    """Hand-worked, 1 rank holding one DISAGG_CONTEXT_WAIT_SCHEDULER request, llama with the
    overlap loop (outside #16921's scheduler-aware gate: the legacy count takes state 7, so no
    pad-step dummy), max_batch_size 2, so cap 2: expected max(ceil(1 / 1), 1 - 1) = 1; the
    scheduler window refuses state 7, the batch is empty. 002f3cc pads it after scheduling
    (#17379: active 1 below the cap 2, the dummy fits); sched-aware-16921 does not. With cap 1
    (max_batch_size 1) the rank is at the cap and neither pads: the small space missed it."""
    found = identify_by_exploration(eras["002f3cc"], one_config("llama", 2), DEFAULT_BOUND)
    assert found.named == "postpad-17379", found.summary()
    w = found.first_divergence["sched-aware-16921"]
    assert (w.cause, w.size) == ("postpadded: 1 vs 0", (1, 1, 1))
    assert [r["requests"] for r in w.records if r["kind"] == "frame"] == [
        [{"id": 1, "state": "DISAGG_CONTEXT_WAIT_SCHEDULER"}]]


def test_newest_and_the_kv_connector_entry_are_the_same_step(eras):
    """kv-connector-19164 (#19250, merged) changes what happens after scheduling (an async KV
    load that empties the scheduled batch), not the pad step or the loop the explorer decides:
    in every configuration its step is newest's, so no bound separates them. Both are merged
    now; identify --explore names newest, the loop's own era (0004396), and says the connector
    entry is alike. On pipeline parallelism with dkv, postpad-17379 (a refused dummy indexed
    unchecked there) and dkv (no pad under dkv) are not: they diverge; on a configuration where
    their steps are newest's they would be alike too."""
    space = dataclasses.replace(one_config("deepseek_v4", 1), pp_sizes=(2,), dkv=(True,))
    found = identify_by_exploration(eras["0004396"], space, DEFAULT_BOUND)
    assert found.agreeing == ("newest", "kv-connector-19164"), found.summary()
    assert (found.named, found.alike) == ("newest", ("kv-connector-19164",))
    assert {"postpad-17379", "dkv"} <= set(found.first_divergence)


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
