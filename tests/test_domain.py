"""The domain model's fixed facts (domain doc §2-3, §5-6)."""
import pytest

from forensics.errors import ConfigError, PolicyError
from replay import CATALOGUE, RunConfig, get_policy, policy_names
from replay.resolve import resolve_policy
from replay.step import decision_key
from replay.policy import Predicate
from replay.states import (ALL_STATES, MICRO_BATCH_WINDOW, RequestState, UnknownStateError,
                           parse_state, state_index)


def test_state_values_match_the_cpp_enum():
    assert RequestState.CONTEXT_INIT == 10
    assert RequestState.GENERATION_TO_COMPLETE == 14
    assert RequestState.DISAGG_GENERATION_INIT == 8
    assert RequestState.DISAGG_TRANS_ERROR == -1


def test_parse_state_accepts_names_prefixed_names_and_ints():
    assert parse_state("GENERATION_TO_COMPLETE") is RequestState.GENERATION_TO_COMPLETE
    assert parse_state("LlmRequestState.CONTEXT_INIT") is RequestState.CONTEXT_INIT
    assert parse_state(13) is RequestState.GENERATION_IN_PROGRESS
    with pytest.raises(UnknownStateError):
        parse_state("GENERATION_DONE")
    with pytest.raises(UnknownStateError):
        parse_state(5)


def test_micro_batch_window_is_10_to_13():
    inside = [int(s) for s in ALL_STATES if s in MICRO_BATCH_WINDOW]
    assert inside == [10, 11, 12, 13]


def test_state_index_maps_every_state_and_flags_unknown():
    import numpy as np
    idx = state_index(np.array([-1, 0, 14, 23, 5]))
    assert idx.tolist() == [0, 1, ALL_STATES.index(RequestState.GENERATION_TO_COMPLETE),
                            len(ALL_STATES) - 1, -1]


def test_predicates_differ_exactly_on_to_complete_and_wait_scheduler():
    cfg = RunConfig(tp_size=2, disaggregated=True)
    legacy = Predicate.NOT_AWAITING_KV.mask(cfg)
    window = Predicate.WINDOW.mask(cfg)
    to_complete = ALL_STATES.index(RequestState.GENERATION_TO_COMPLETE)
    wait_sched = ALL_STATES.index(RequestState.DISAGG_CONTEXT_WAIT_SCHEDULER)
    assert legacy[to_complete] and not window[to_complete]
    assert legacy[wait_sched] and not window[wait_sched]


def test_cap_defaults_to_pp_times_max_batch_size_and_bad_values_are_refused():
    assert RunConfig(tp_size=4, pp_size=2, max_batch_size=8).cap == 16
    with pytest.raises(ConfigError):
        RunConfig(tp_size=0)
    with pytest.raises(ConfigError):
        RunConfig(tp_size=2, max_num_active_requests=0)


def test_catalogue_has_the_stable_names_and_each_cites_a_pr():
    assert list(CATALOGUE) == ["mid-2025", "legacy-2025", "early-2026", "prefix-2026", "fix-16161",
                               "fix-16279", "tolerant-17278", "sched-aware-16921", "postpad-17379",
                               "newest", "kv-connector-19164", "dkv"]
    assert all(p.prs for p in CATALOGUE.values())
    assert [n for n, p in CATALOGUE.items() if not p.merged] == ["fix-16161"]
    assert "never merged" in CATALOGUE["fix-16161"].prs[0]
    assert [n for n, p in CATALOGUE.items() if not p.cap] == ["mid-2025", "legacy-2025", "early-2026"]
    with pytest.raises(PolicyError):
        get_policy("nope")


def test_the_kv_connector_entry_is_the_merged_19250_under_its_first_name():
    """#19250 (merged 2026-09-16) is the port of the #19164 proposal the entry was catalogued as:
    the entry keeps its name (saved specs name it) and is a shipped build now; its merged number
    is accepted as an alias, which resolves to the same entry and adds no catalogue row. Its step
    is newest's in every configuration: the park and the pad after it happen after scheduling,
    which the abstraction does not express."""
    entry = get_policy("kv-connector-19164")
    assert entry.merged and entry.prs[0] == "#19250 (merged 2026-09-16)"
    assert get_policy("kv-connector-19250") is entry
    assert resolve_policy("kv-connector-19250") is entry
    assert "kv-connector-19250" not in CATALOGUE and "kv-connector-19250" not in policy_names()
    newest = get_policy("newest")
    configs = [RunConfig(tp_size=2, pp_size=pp, disaggregated=dis, overlap_scheduler=ov,
                         model_arch=model, dkv_enabled=dkv)
               for pp in (1, 2) for dis in (True, False) for ov in (True, False)
               for model in ("deepseek_v4", "qwen3_5_moe", "kimi_k2", "llama")
               for dkv in (False, True)]
    assert all(decision_key(entry, c) == decision_key(newest, c) for c in configs)
    with pytest.raises(PolicyError, match="kv-connector-19251"):
        get_policy("kv-connector-19251")


def test_fix_keeps_the_legacy_count_on_the_aggregated_path():
    fix = get_policy("fix-16161")
    assert fix.predicate(RunConfig(tp_size=2, disaggregated=False)) is Predicate.ALL
    assert fix.predicate(RunConfig(tp_size=2, disaggregated=True)) is Predicate.WINDOW
    newest = get_policy("newest")
    assert newest.predicate(RunConfig(tp_size=2, pp_size=2, disaggregated=True)) is Predicate.NOT_AWAITING_KV
