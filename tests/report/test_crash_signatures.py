"""Crash signatures: classification of events rows and the policies derived from Policy fields."""
from __future__ import annotations

import dataclasses

import pandas as pd

from forensics.crash_signatures import crash_in_logs, find_signatures
from forensics.dataset.schema import EVENTS
from forensics.readers.dataset_cache import as_dataset
from forensics.signature_kinds import SignatureKind
from forensics.signature_policies import leak_paths, policies_for
from replay.catalogue import CATALOGUE
from replay.config import RunConfig
from replay.policy import AllocFailure, EntryCheck, Predicate

POLICIES = list(CATALOGUE.values())
DISAGG = RunConfig(tp_size=4, disaggregated=True)
AGG = RunConfig(tp_size=4, disaggregated=False)


def events(*rows) -> pd.DataFrame:
    cols = EVENTS.names
    base = {c: None for c in cols}
    return pd.DataFrame([{**base, "source": "x.log", "line_end": r.get("line"), **r} for r in rows],
                        columns=cols)


ALLOC_CRASH = ("mid-2025", "legacy-2025", "early-2026", "prefix-2026", "fix-16279", "tolerant-17278",
               "sched-aware-16921", "postpad-17379")


def test_assert_policies_follow_the_fields_per_path():
    """Assert needs EntryCheck.ASSERT, a cap and a path where a dummy can survive a skip:
    - disaggregated pp 1, model not named (outside every model gate): prefix-2026 and the merged
      fix-16279 (its window is DeepSeek-V4 only); the never-merged fix-16161's window refuses
      GENERATION_TO_COMPLETE; the no-cap eras cannot assert; tolerant-17278 and later warn;
    - aggregated: every version counts len(active_requests) -> prefix, fix-16161, fix-16279;
    - pp 2: fix-16279's gate is off, fix-16161 has none."""
    assert policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, DISAGG)[0] == ("prefix-2026", "fix-16279")
    dsv4 = RunConfig(tp_size=4, disaggregated=True, model_arch="deepseek_v4")
    assert policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, dsv4)[0] == ("prefix-2026",)
    assert policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, AGG)[0] == (
        "prefix-2026", "fix-16161", "fix-16279")
    pp2 = RunConfig(tp_size=4, pp_size=2, disaggregated=True, model_arch="deepseek_v4")
    assert "fix-16279" in policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, pp2)[0]
    assert "fix-16161" not in policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, pp2)[0]
    # With failed allocations in the logs, fix-16161's skipped padding leaves a zero batch.
    assert "fix-16161" in policies_for(SignatureKind.ENTRY_ASSERT, POLICIES, DISAGG,
                                       alloc_failures=True)[0]


def test_other_signatures_follow_the_fields():
    assert policies_for(SignatureKind.SURPLUS_WARNING, POLICIES)[0] == (
        "tolerant-17278", "sched-aware-16921", "postpad-17379", "newest", "kv-connector-19164",
        "dkv")
    # Unchecked on some path: the old eras everywhere, the gated fixes outside their gates.
    assert policies_for(SignatureKind.ALLOC_FAILURE_CRASH, POLICIES)[0] == ALLOC_CRASH
    assert "legacy-2025" not in policies_for(SignatureKind.ALLOC_FAILURE_WARNING, POLICIES)[0]
    # The merged fix tolerates it only inside its gate (a run whose model is DeepSeek-V4).
    assert "fix-16279" not in policies_for(SignatureKind.ALLOC_FAILURE_WARNING, POLICIES)[0]
    dsv4 = RunConfig(tp_size=4, disaggregated=True, model_arch="deepseek_v4")
    assert "fix-16279" in policies_for(SignatureKind.ALLOC_FAILURE_WARNING, POLICIES, dsv4)[0]


def test_a_new_policy_is_matched_without_naming_it():
    """Derived from fields: a hypothetical build asserting with a wide predicate is matched."""
    mine = dataclasses.replace(CATALOGUE["newest"], name="my-build", entry_check=EntryCheck.ASSERT,
                               disagg_predicate=Predicate.NOT_AWAITING_KV, rollback_on_skip=False,
                               alloc_failure=AllocFailure.CRASH)
    assert policies_for(SignatureKind.ENTRY_ASSERT, [mine], DISAGG)[0] == ("my-build",)
    assert policies_for(SignatureKind.ALLOC_FAILURE_CRASH, [mine])[0] == ("my-build",)
    assert leak_paths(CATALOGUE["newest"], DISAGG) == []


def test_a_failed_kv_precheck_names_the_versions_that_precheck():
    """"Unable to fit the complete attention-DP dummy KV allocation" comes from the
    _has_adp_dummy_kv_capacity precheck: #16279 inside its gate, every path from 000515e on.
    Older versions have no precheck (a dummy that does not fit is a refused allocation). The
    logs name no model, so #16279's DeepSeek-V4 gate counts as closed here (as for the other
    signatures)."""
    ev = events({"line": 1, "rank": 0, "kind": "adp_dummy_no_kv_capacity",
                 "message": "Unable to fit the complete attention-DP dummy KV allocation; "
                            "skipping this forward iteration and retrying"})
    [sig] = find_signatures(ev, POLICIES)
    assert sig.kind is SignatureKind.KV_PRECHECK_WARNING and not sig.kind.is_crash
    assert sig.policies == ("tolerant-17278", "sched-aware-16921", "postpad-17379", "newest",
                            "kv-connector-19164", "dkv")
    # A plain log line with the text (a parser that does not know the kind) reads the same.
    [plain] = find_signatures(events({"line": 1, "rank": 0, "kind": "log",
                                      "message": sig.message}), POLICIES)
    assert plain.kind is SignatureKind.KV_PRECHECK_WARNING


def test_classify_and_fold():
    ev = events(
        {"line": 1, "rank": 2, "kind": "adp_surplus_tolerated", "num_active": 9, "num_expected": 8,
         "message": "active_requests (9) exceeds expected_num_active_requests (8); tolerating"},
        {"line": 2, "rank": 2, "kind": "adp_surplus_tolerated", "num_active": 9, "num_expected": 8,
         "message": "active_requests (9) exceeds expected_num_active_requests (8); tolerating"},
        {"line": 3, "rank": 1, "kind": "adp_dummy_alloc_failed", "message": "Cannot allocate a pad dummy"},
        {"line": 10, "line_end": 14, "rank": 1, "kind": "traceback", "exception_type": "TypeError",
         "innermost_function": "_pad_attention_dp_dummy_request",
         "message": "'NoneType' object is not subscriptable"},
        {"line": 15, "rank": 1, "kind": "event_loop_error", "message": "'NoneType' object is not subscriptable"},
        {"line": 30, "rank": 1, "kind": "log", "message": "unrelated"},
    )
    sigs = find_signatures(ev, POLICIES)
    assert [s.kind for s in sigs] == [SignatureKind.SURPLUS_WARNING, SignatureKind.ALLOC_FAILURE_WARNING,
                                      SignatureKind.ALLOC_FAILURE_CRASH, SignatureKind.EVENT_LOOP_ERROR]
    assert sigs[0].count == 2
    assert sigs[3].follows == 2 and sigs[3].policies == sigs[2].policies == ALLOC_CRASH
    assert crash_in_logs(sigs) is sigs[2]


def test_traceback_iteration_is_inferred_from_the_last_iteration_line():
    ev = events({"line": 5, "line_end": 8, "rank": 3, "kind": "adp_assert",
                 "exception_type": "AssertionError", "innermost_file": "py_executor.py",
                 "innermost_function": "_pad_attention_dp_dummy_request"})
    it = pd.DataFrame({"source": ["x.log"] * 3, "line": [1, 2, 3], "rank": [3, 0, 3],
                       "iter": [40, 41, 41]})
    (sig,) = find_signatures(ev, POLICIES, iterations=it)
    assert sig.iter == 41 and sig.iter_inferred and sig.rank == 3
    assert sig.code_location == "py_executor.py"   # abridged: no line number


def test_event_loop_error_without_a_cause_is_unexplained():
    sigs = find_signatures(events({"line": 1, "rank": 0, "kind": "event_loop_error",
                                   "message": "CUDA error: an illegal memory access"}), POLICIES)
    assert sigs[0].policies == () and "not explained" in sigs[0].reason


def test_real_logs_every_file(shared_logs, tmp_path):
    """Every shared real log ingests; exactly the two PR excerpts carry the pad-dummy assert."""
    ds = as_dataset([shared_logs], cache_dir=tmp_path / "ds")
    sigs = find_signatures(ds.events, POLICIES, iterations=ds.iterations)
    asserts = sorted(s.source.rsplit("/", 1)[-1] for s in sigs if s.kind is SignatureKind.ENTRY_ASSERT)
    assert asserts == ["trtllm_pr_16161.txt", "trtllm_pr_17278.txt"]
    aborts = [s for s in sigs if s.kind is SignatureKind.MPI_ABORT]
    assert len(aborts) == 1 and aborts[0].rank == 0


def test_reprinted_traceback_is_one_crash():
    """The executor logs the traceback, then the thread re-raises it: one crash, count 2; an
    assert on another rank stays separate."""
    tb = {"kind": "adp_assert", "exception_type": "AssertionError",
          "innermost_function": "_pad_attention_dp_dummy_request"}
    sigs = find_signatures(events({**tb, "line": 10, "line_end": 14, "rank": 2},
                                  {**tb, "line": 16, "line_end": 26, "rank": 2},
                                  {**tb, "line": 30, "line_end": 34, "rank": 5}), POLICIES)
    assert [(s.rank, s.count) for s in sigs] == [(2, 2), (5, 1)]
