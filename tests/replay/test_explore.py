"""``replay.explore``: the abstraction, the NVBug 6438685 chain at its minimal size, the fix
closing it, and the reductions changing no verdict (issue 24 items 1 and 6)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.minimize import replay_records
from replay.catalogue import CATALOGUE
from replay.config import RunConfig
from replay.explore import Bound, ConfigSpace, classes_for, explore
from replay.explore.search import Search
from replay.states import RequestState as S

#: The NVBug configuration: disaggregated, no pipeline parallelism, non-overlap loop, a model
#: outside every gate, max_batch_size 1 (so the cap pp_size * max_batch_size is 1).
NVBUG_SPACE = ConfigSpace(disaggregated=(True,), pp_sizes=(1,), overlap=(False,),
                          models=("llama",), max_batch_sizes=(1,), dkv=(False,))


def test_classes_are_the_states_no_mask_tells_apart():
    """Disaggregated: 8 and 9 (awaiting KV) are one class, 11-13 (in the window, not context
    intent) one, 14 and everything after the window one; 7 and 10 stand alone (7: counted by
    the legacy count only; 10: context intent). Aggregated: no DISAGG_* state is reachable."""
    got = [c.states for c in classes_for(True)]
    assert got == [(S.DISAGG_CONTEXT_WAIT_SCHEDULER,),
                   (S.DISAGG_GENERATION_INIT, S.DISAGG_GENERATION_TRANS_IN_PROGRESS),
                   (S.CONTEXT_INIT,),
                   (S.DISAGG_CONTEXT_INIT_AND_TRANS, S.DISAGG_GENERATION_TRANS_COMPLETE,
                    S.GENERATION_IN_PROGRESS),
                   (S.GENERATION_TO_COMPLETE, S.GENERATION_COMPLETE,
                    S.DISAGG_CONTEXT_TRANS_IN_PROGRESS, S.DISAGG_CONTEXT_COMPLETE,
                    S.DISAGG_GENERATION_WAIT_TOKENS)]
    assert [c.states for c in classes_for(False)] == [
        (S.CONTEXT_INIT,), (S.GENERATION_IN_PROGRESS,), (S.GENERATION_TO_COMPLETE, S.GENERATION_COMPLETE)]
    awaiting, to_complete = classes_for(True)[1], classes_for(True)[4]
    assert not awaiting.may_become(to_complete)  # from below the window only through it


def test_finds_the_nvbug_chain_at_its_minimal_size():
    """prefix-2026, 2 ranks, cap 1: the crash whose dummy leaked because of a rank holding only
    GENERATION_TO_COMPLETE needs 2 ranks, 3 iterations, 2 requests. Hand-worked ledger of the
    witness (expected = min(max(ceil(total / 2), max(active - new)), cap 1)):

    ====  ======================  ======================  ========  =============================
    iter  rank 0                  rank 1                  expected  decision
    ====  ======================  ======================  ========  =============================
    0     (empty)                 #1 CONTEXT_INIT         1         r0 padded (counts 0), r1
                                                                    schedules #1: batches 1, 1,
                                                                    can_queue, dummy removed
    1     #2 DISAGG_GEN_INIT new  #1 GENERATION_TO_COMP.  1         r0 counts 0 (8 awaits KV):
                                                                    padded; r1 counts 14 but the
                                                                    window refuses it: batch 0;
                                                                    can_queue False: r0's dummy
                                                                    survives (no rollback): leak
    2     #2 + leaked dummy (2)   #1 (1, not processed)   1         r0: 2 > 1: AssertionError
    ====  ======================  ======================  ========  =============================

    Fewer iterations cannot do it: a request arrives in CONTEXT_INIT,
    DISAGG_CONTEXT_WAIT_SCHEDULER or DISAGG_GENERATION_INIT and reaches GENERATION_TO_COMPLETE
    only after a forward pass, so the skip comes at iteration 1 at the earliest.
    """
    res = explore("prefix-2026", NVBUG_SPACE, Bound(ranks=2, requests=2, iterations=3))
    chain = [w for w in res.witnesses if w.kind == "crash" and w.cause == "GENERATION_TO_COMPLETE"]
    assert len(chain) == 1
    w = chain[0]
    assert w.size == (2, 3, 2)
    frames = {(r["iter"], r["rank"]): [(q["id"], q["state"]) for q in r["requests"]]
              for r in w.records if r["kind"] == "frame"}
    # The ranks may be numbered either way: find the one that holds the retiring request.
    busy = 1 if frames[(0, 1)] else 0
    idle = 1 - busy
    assert frames[(0, idle)] == [] and frames[(0, busy)] == [(1, "CONTEXT_INIT")]
    assert frames[(1, idle)] == [(2, "DISAGG_GENERATION_INIT")]
    assert frames[(1, busy)] == [(1, "GENERATION_TO_COMPLETE")]
    assert frames[(2, idle)] == [(2, "DISAGG_GENERATION_INIT")]
    assert frames[(2, busy)] == [(1, "GENERATION_TO_COMPLETE")]
    result = replay_records(list(w.records), "prefix-2026")
    assert result.crash is not None and result.crash.kind == "assert"
    assert (result.crash.iter, result.crash.rank) == (2, idle)
    assert [(x.iter_created, x.iter_skipped, x.rank) for x in result.leak_records] == [(1, 1, idle)]
    assert w.confirmed is True


def test_the_seed_fix_closes_the_chain_on_the_same_space():
    """fix-16161 counts only the window on a disaggregated run: a rank holding only
    GENERATION_TO_COMPLETE gets a dummy, so no dummy leaks for that reason. What still crashes
    is a dummy the KV cache refused (skipped with a warning): rank 0, empty, wants a dummy that
    does not fit and schedules 0; rank 1, holding one DISAGG_CONTEXT_WAIT_SCHEDULER request
    (outside the window), is padded; the fleet skips and rank 1's dummy survives; next
    iteration rank 1 counts 1 + 1 = 2 > expected min(max(ceil(2 / 2), 2), cap 1) = 1: 2 ranks,
    2 iterations, 1 request."""
    res = explore("fix-16161", NVBUG_SPACE, Bound(ranks=2, requests=2, iterations=3))
    assert not [w for w in res.witnesses if w.cause == "GENERATION_TO_COMPLETE"]
    crashes = {w.cause: w.size for w in res.witnesses if w.kind == "crash"}
    assert crashes == {"KV precheck fails": (2, 2, 1), "KV refused after the precheck": (2, 2, 1)}


def test_no_counterexample_is_said_with_the_count():
    """newest on a non-overlap disaggregated run (forward intent, post-schedule pad, every
    refusal tolerated): nothing up to the bound."""
    res = explore("newest", NVBUG_SPACE, Bound(ranks=2, requests=1, iterations=3))
    assert not res.failed
    assert res.summary()[-1] == f"no counterexample in {res.schedules} schedules up to the bound"


def _verdicts(policy, config, bound, reduced):
    search = Search((CATALOGUE[policy],), config, bound.requests, canonical=reduced, memo=reduced)
    found: dict = {}
    for ranks in range(1, bound.ranks + 1):
        search.run(ranks, bound.iterations, found)
    return {(k[0], search.reasons.labels[k[1]]): (f.ranks, f.iterations, f.requests)
            for k, f in found.items()}


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(policy=st.sampled_from(sorted(CATALOGUE)), disagg=st.booleans(), overlap=st.booleans(),
       pp=st.sampled_from([1, 2]), model=st.sampled_from(["deepseek_v4", "llama"]),
       iterations=st.sampled_from([1, 2, 3]))
def test_the_reductions_change_no_verdict(policy, disagg, overlap, pp, model, iterations):
    """Against the unreduced enumeration (no rank symmetry, no request renaming of ranks, no
    memo): the same mechanisms, found at the same number of ranks and iterations, and with no
    fewer requests (the memo keeps one path per state: the fewest requests among those kept)."""
    config = RunConfig(tp_size=1, disaggregated=disagg, overlap_scheduler=overlap, pp_size=pp,
                       max_batch_size=1, model_arch=model)
    bound = Bound(ranks=2, requests=1, iterations=iterations)
    reduced = _verdicts(policy, config, bound, True)
    full = _verdicts(policy, config, bound, False)
    assert reduced.keys() == full.keys()
    for key, (r, i, q) in reduced.items():
        assert (r, i) == full[key][:2]
        assert q >= full[key][2]


def _first_divergences(res):
    """Per reference: the size of its smallest divergence and every cause found at that size."""
    out: dict = {}
    for w in res.witnesses:  # smallest first
        size, causes = out.setdefault(w.against, (w.size, set()))
        if w.size == size:
            causes.add(w.cause)
    return out


@pytest.mark.parametrize("policy", ["prefix-2026", "postpad-17379", "mid-2025"])
def test_dropping_a_reference_at_its_first_divergence_changes_no_first_divergence(policy):
    """``identify --explore`` stops deciding a reference once it diverged (``first_only``): per
    reference, the same smallest divergence and the same causes at that size as the search that
    compares every reference to the end, from fewer decided transitions."""
    refs = [name for name in CATALOGUE if name != policy]
    space = ConfigSpace(disaggregated=(True, False), pp_sizes=(1, 2), overlap=(False,),
                        models=("deepseek_v4", "llama"), max_batch_sizes=(2,), dkv=(False,))
    bound = Bound(ranks=2, requests=1, iterations=3)
    full = explore(policy, space, bound, against=refs, check=False, workers=1)
    first = explore(policy, space, bound, against=refs, check=False, workers=1, first_only=True)
    assert _first_divergences(first) == _first_divergences(full)
    assert len(_first_divergences(full)) >= len(refs) - 2  # most references do diverge
    assert first.schedules < full.schedules


def test_the_reductions_shrink_the_space():
    """The same verdicts from fewer decided transitions (prefix-2026, 2 ranks, 3 iterations)."""
    config = RunConfig(tp_size=1, disaggregated=True, overlap_scheduler=False, max_batch_size=1)
    counts = []
    for reduced in (True, False):
        search = Search((CATALOGUE["prefix-2026"],), config, 1, canonical=reduced, memo=reduced)
        search.run(2, 3, {})
        counts.append(search.stats.transitions)
    assert counts[0] * 10 < counts[1]


def test_interrupt_returns_what_was_found(monkeypatch):
    """Ctrl-C during the search: the result so far, marked interrupted."""
    calls = {"n": 0}
    original = Search.run

    def run(self, ranks, iterations, found, stop=lambda: False):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(self, ranks, iterations, found, stop)

    monkeypatch.setattr(Search, "run", run)
    res = explore("prefix-2026", NVBUG_SPACE, Bound(ranks=2, requests=1, iterations=2))
    assert res.interrupted
    assert [w.kind for w in res.witnesses] == ["hang in a collective", "hang in a collective"]


@pytest.mark.parametrize("kind", ["leak", "crash", "hang in a collective"])
def test_every_witness_replays_as_found(kind):
    """Each witness's trace, replayed by the engine, shows its mechanism."""
    res = explore("prefix-2026", NVBUG_SPACE, Bound(ranks=2, requests=2, iterations=3))
    ws = [w for w in res.witnesses if w.kind == kind]
    assert ws and all(w.confirmed for w in ws)


def test_a_py_candidate_is_explored_and_differs_from_its_base(tmp_path):
    """A candidate count (``py:``) that counts only the scheduler window, on prefix-2026's loop:
    the NVBug chain is gone (no crash caused by GENERATION_TO_COMPLETE), and against prefix-2026
    the first divergences are on 1 rank, 1 iteration, 1 request: a DISAGG_CONTEXT_WAIT_SCHEDULER
    request, which the legacy count takes and the window does not, so the candidate pads (the
    dummy fits) or crashes on a refused dummy (prefix-2026's loop indexes it unchecked) where
    prefix-2026 does neither."""
    fix = tmp_path / "window_fix.py"
    fix.write_text(
        "def count_in_window(self):\n"
        "    if self.kv_cache_transceiver is None:\n"
        "        return len(self.active_requests)\n"
        "    low, high = self.scheduler.scheduling_state_range\n"
        "    return sum(1 for r in self.active_requests if int(low) <= r.state_value < int(high))\n")
    spec = f"py:{fix}:count_in_window:count:prefix-2026"
    bound = Bound(ranks=2, requests=2, iterations=3)
    res = explore(spec, NVBUG_SPACE, bound)
    assert not [w for w in res.witnesses if w.cause == "GENERATION_TO_COMPLETE"]
    diff = explore(spec, NVBUG_SPACE, Bound(ranks=2, requests=1, iterations=2), against="prefix-2026")
    first = {w.cause for w in diff.witnesses if w.size == (1, 1, 1)}
    assert {"padded: 1 vs 0", "crash: hang in a collective vs none"} <= first


def test_references_deciding_alike_share_a_decision_and_are_each_reported():
    """Two references that decide alike (prefix-2026 and a copy under another name) are decided
    once per transition; each still gets its own divergences, the same as prefix-2026 explored
    alone. fix-16161 against prefix-2026, hand-worked: one rank holding one
    DISAGG_CONTEXT_WAIT_SCHEDULER request (below the scheduler window) at iteration 0, expected
    min(max(ceil(1 / 1), 1 - 1), cap 1) = 1: fix-16161 counts only the window (0 schedulable:
    it pads), prefix-2026 counts the request (1 schedulable: no dummy)."""
    twin = dataclasses.replace(CATALOGUE["prefix-2026"], name="prefix-2026-twin")
    bound = Bound(ranks=2, requests=1, iterations=2)
    both = explore("fix-16161", NVBUG_SPACE, bound, against=["prefix-2026", twin])
    alone = explore("fix-16161", NVBUG_SPACE, bound, against="prefix-2026")
    mine = [(w.cause, w.size, w.records) for w in alone.witnesses]
    for name in ("prefix-2026", "prefix-2026-twin"):
        assert [(w.cause, w.size, w.records) for w in both.witnesses if w.against == name] == mine
    padded = [w for w in alone.witnesses if w.cause == "padded: 1 vs 0"]
    assert len(padded) == 1 and padded[0].size == (1, 1, 1)
    frames = [r for r in padded[0].records if r["kind"] == "frame"]
    assert [f["requests"] for f in frames] == [[{"id": 1, "state": "DISAGG_CONTEXT_WAIT_SCHEDULER"}]]


def test_a_shared_search_reports_the_configuration_asked_for():
    """prefix-2026 decides the NVBug space alike under deepseek_v4 and llama (no model gate), so
    a second exploration reuses the first one's search; its witness must still be a trace of the
    configuration explored second (a post-mortem's cached witnesses once named deepseek_v4 for a
    llama path, depending on which path the process explored first)."""
    cache: dict = {}
    deepseek = dataclasses.replace(NVBUG_SPACE, models=("deepseek_v4",))
    first = explore("prefix-2026", deepseek, Bound(ranks=2, requests=2, iterations=3), cache=cache)
    second = explore("prefix-2026", NVBUG_SPACE, Bound(ranks=2, requests=2, iterations=3),
                     cache=cache)
    assert second.searches == 0  # the search was shared
    assert first.witnesses and second.witnesses
    for res, model in ((first, "deepseek_v4"), (second, "llama")):
        runs = [r for w in res.witnesses for r in w.records if r["kind"] == "run"]
        assert {r["model_arch"] for r in runs} == {model}
        assert {w.config.model_arch for w in res.witnesses} == {model}
