"""``trtllm:PATH[@REV]`` policies: extraction, era detection, stand-in behaviour (issue #6).

The sources are fixtures written for this project in the upstream shape of each era
(``fixtures/``); they import torch and TensorRT-LLM at module level, which would fail if any
module-level code ran.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import types

import pytest
from trtllm_checkouts import ERAS, FIXTURES, place, place_era

from forensics.errors import PolicyError
from replay.catalogue import get_policy
from replay.config import RunConfig
from replay.explore import ConfigSpace
from replay.feature_flags import FEATURE_FLAGS, WHOLE_CONFIG_ATTRS, config_seen
from replay.policy import FrameView
from replay.resolve import resolve_policies, resolve_policy
from replay.standin_executor import StandinExecutor
from replay.states import RequestState as S
from replay.trtllm_checkout import parse_spec
from replay.trtllm_source import era_of

DISAGG = RunConfig(tp_size=2, disaggregated=True)
AGG = RunConfig(tp_size=2, disaggregated=False)
FIXED = ("fix16161", "16921", "17278", "newest")
OLD = ("2025", "2026")


def view(states, expected, config=DISAGG, alloc_ok=True):
    reqs = tuple((i + 1, int(s), False) for i, s in enumerate(states))
    return FrameView(iter=0, rank=0, requests=reqs, expected=expected, config=config,
                     alloc_ok=alloc_ok)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    """One resolved policy per era, from a working-tree checkout."""
    out = {}
    for era in ERAS:
        root = place(tmp_path_factory.mktemp(f"trtllm-{era}"), era)
        out[era] = resolve_policy(f"trtllm:{root}")
    return out


@pytest.mark.parametrize("era", list(ERAS))
def test_era_is_read_from_the_source_and_supplies_the_loop(hooks, era):
    policy = hooks[era]
    assert era_of(policy) in ERAS[era]
    base = get_policy(era_of(policy))
    assert policy.pad_hook is not None
    assert f"[era: {base.name}]" in policy.source
    assert base.name in policy.notes
    loop = ("cap", "rollback_on_skip", "postpad_empty_batch", "scheduler_gate_pp1",
            "disagg_predicate", "aggregated_predicate")
    assert {f: getattr(policy, f) for f in loop} == {f: getattr(base, f) for f in loop}


def test_extracted_methods_follow_self_calls_and_the_scheduler_delegation(hooks):
    assert "extracted: _pad_attention_dp_dummy_request\n" not in hooks["2025"].notes
    assert "_count_schedulable_active_requests" not in hooks["2025"].notes
    assert "_should_skip_dummy_for_benchmark_disagg" in hooks["2026"].notes
    assert "is_request_in_schedulable_state" in hooks["16921"].notes
    # _finalize_adp_dummy_allocation is not reached from the pad method, but it is extracted
    # too: the rollback on a skip is probed from the source's own code.
    assert "extracted:" in hooks["16921"].notes
    assert "_finalize_adp_dummy_allocation," in hooks["16921"].notes.split("extracted:")[1]
    assert "_finalize_adp_dummy_allocation" not in hooks["2026"].notes


# Domain doc §9 acceptance cases, per era: (frame, eras that pad).
@pytest.mark.parametrize("era", list(ERAS))
def test_section9_aggregated_to_complete_gets_no_dummy(hooks, era):
    """Aggregated path counts GENERATION_TO_COMPLETE in every version: 1 request, expected 1."""
    out = hooks[era].pad_hook(view([S.GENERATION_TO_COMPLETE], 1, AGG))
    assert (out.padded, out.crash) == (False, None)


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_disaggregated_to_complete_pads_only_once_fixed(hooks, era):
    """One TO_COMPLETE request, expected 2: the fixed predicates see nothing schedulable."""
    out = hooks[era].pad_hook(view([S.GENERATION_TO_COMPLETE], 2))
    assert out.padded is (era in FIXED)
    assert out.crash is None


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_wait_scheduler_pads_only_once_fixed(hooks, era):
    """DISAGG_CONTEXT_WAIT_SCHEDULER (7) is below the window; legacy counts it."""
    out = hooks[era].pad_hook(view([S.DISAGG_CONTEXT_WAIT_SCHEDULER], 2))
    assert out.padded is (era in FIXED)


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_generation_init_gets_a_context_dummy_in_every_version(hooks, era):
    out = hooks[era].pad_hook(view([S.DISAGG_GENERATION_INIT], 1))
    assert (out.padded, out.role, out.crash) == (True, "context", None)


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_schedulable_rank_and_adp_off_never_pad(hooks, era):
    assert not hooks[era].pad_hook(view([S.GENERATION_IN_PROGRESS], 1)).padded
    off = dataclasses.replace(DISAGG, enable_attention_dp=False)
    assert not hooks[era].pad_hook(view([S.DISAGG_GENERATION_INIT], 1, off)).padded


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_refused_dummy(hooks, era):
    """add_dummy_requests returns None: crash before #16161 (None[0]), skip with a warning after."""
    out = hooks[era].pad_hook(view([S.DISAGG_GENERATION_INIT], 1, alloc_ok=False))
    assert not out.padded
    if era in OLD:
        assert out.crash is not None and out.crash.startswith("TypeError")
    else:
        assert out.crash is None and out.alloc_failed
        # Newest checks KV capacity first and warns before even asking for the dummy.
        assert any("Cannot allocate" in w or "No room" in w for w in out.warnings)


@pytest.mark.parametrize("era", list(ERAS))
def test_section9_surplus_asserts_until_17278(hooks, era):
    """Two TO_COMPLETE requests, expected 1: the entry assert trips; #17278 warns and pads."""
    out = hooks[era].pad_hook(view([S.GENERATION_TO_COMPLETE] * 2, 1))
    if era in ("17278", "newest"):
        assert (out.padded, out.crash, out.surplus_warning) == (True, None, True)
        assert "exceeds expected_num_active_requests (1)" in out.warnings[0]
    else:
        assert out.crash is not None and out.crash.startswith("AssertionError")
        assert "expected_num_active_requests" in out.crash  # the real line is quoted


@pytest.mark.parametrize("era", list(ERAS))
def test_a_carried_dummy_counts_as_schedulable(hooks, era):
    """A dummy that survived a skip (state GENERATION_IN_PROGRESS) keeps a second one away."""
    frame = FrameView(iter=3, rank=1, requests=((7, int(S.GENERATION_TO_COMPLETE), False),
                                                (0, int(S.GENERATION_IN_PROGRESS), True)),
                      expected=2, config=DISAGG)
    assert not hooks[era].pad_hook(frame).padded


def test_section9_two_ranks_busy_and_terminal(hooks):
    """Newest, expected 2 on both ranks: the busy rank keeps 1, the terminal rank pads to a
    schedulable count of 1, so neither offers a zero batch to can_queue."""
    hook = hooks["17278"].pad_hook
    busy = hook(view([S.GENERATION_IN_PROGRESS], 2))
    terminal = hook(view([S.GENERATION_TO_COMPLETE], 2))
    assert (busy.padded, terminal.padded) == (False, True)
    assert terminal.role == "generation"


def test_non_overlap_forward_intent_uses_the_peer_assumption(hooks):
    """Newest non-overlap loop all-reduces a forward intent: peers are assumed busy (generation)
    exactly when expected > 0, so an idle fleet pads nobody and a drained rank pads a generation
    dummy."""
    non_overlap = dataclasses.replace(DISAGG, overlap_scheduler=False)
    hook = hooks["newest"].pad_hook
    assert not hook(view([], 0, non_overlap)).padded
    out = hook(view([S.DISAGG_GENERATION_INIT], 1, non_overlap))
    assert (out.padded, out.role) == (True, "generation")
    assert hook(view([S.DISAGG_GENERATION_INIT], 1)).role == "context"  # overlap: frame's role


def test_feature_flags_follow_the_pp1_gate_and_the_loop():
    from replay.feature_flags import feature_flags
    flags = feature_flags(DISAGG)
    assert flags["_enable_adp_dummy_fixes"] and flags["_enable_scheduler_aware_adp_dummy"]
    assert not flags["_enable_non_overlap_adp_forward_intent"]  # overlap loop by default
    assert not feature_flags(dataclasses.replace(DISAGG, pp_size=2))["_enable_adp_dummy_fixes"]
    assert not feature_flags(AGG)["_enable_adp_dummy_fixes"]
    assert feature_flags(dataclasses.replace(DISAGG, overlap_scheduler=False))[
        "_enable_non_overlap_adp_forward_intent"]


def _shown(value, depth=0):
    """What code can read of a stand-in attribute: plain values, containers and objects'
    attributes, recursively (a few levels: the stand-in's objects are shallow)."""
    if isinstance(value, (list, tuple)):
        return tuple(_shown(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _shown(v, depth + 1)) for k, v in value.items()))
    if hasattr(value, "__dict__") and not isinstance(value, type) and depth < 4:
        return tuple(sorted((k, _shown(v, depth + 1)) for k, v in vars(value).items()))
    return value


def test_configurations_the_code_cannot_tell_apart_build_the_same_stand_in():
    """``config_seen`` is everything the stand-in shows of a configuration: configurations with
    one value there (for code naming every flag) build stand-ins equal in every attribute but
    the configuration itself; the explorer shares their searches on that ground. A stand-in
    attribute derived from another field of the configuration would fail this."""
    space = ConfigSpace(models=("deepseek_v4", "qwen3_5_moe", "kimi_k2", "llama"), caps=(1, 4))
    groups: dict = {}
    for config in space.configs(tp_size=2):
        frame = FrameView(iter=0, rank=1, requests=((1, int(S.GENERATION_IN_PROGRESS), False),),
                          expected=1, config=config)
        shown = tuple(sorted((k, _shown(v)) for k, v in vars(StandinExecutor(frame)).items()
                             if k not in WHOLE_CONFIG_ATTRS))
        groups.setdefault(config_seen(config, FEATURE_FLAGS), set()).add(shown)
    assert all(len(stand_ins) == 1 for stand_ins in groups.values())
    assert 1 < len(groups) < space.size()
    # Code naming no flag tells fewer configurations apart; code reading the whole
    # configuration tells every one apart.
    assert len({config_seen(c, ()) for c in space.configs(tp_size=2)}) < len(groups)
    assert len({config_seen(c, {"config"}) for c in space.configs(tp_size=2)}) == space.size()


def test_a_loop_tasks_context_bucket_is_not_the_whole_configuration(tmp_path):
    """The fork's loop task reads its flags through ``self._ctx.config``, a bucket of the
    stand-in's attributes, not the stand-in's ``config``: its code still shares the
    configurations it cannot tell apart (models outside every gate, aggregated runs)."""
    policy = resolve_policy(f"trtllm:{place_era(tmp_path, 'fork-ingestion-task')}")
    assert "config" not in policy.names_read and "_enable_adp_dummy_fixes" in policy.names_read
    agg = [dataclasses.replace(AGG, model_arch=m) for m in ("deepseek_v4", "llama")]
    assert policy.config_seen(agg[0]) == policy.config_seen(agg[1])
    llama = dataclasses.replace(DISAGG, model_arch="llama")
    assert policy.config_seen(DISAGG) != policy.config_seen(llama)


def test_pipeline_parallel_stays_on_the_legacy_count(hooks):
    """PR #16921 gates delegation on pp_size 1: with pp 2 a TO_COMPLETE request still counts."""
    pp2 = dataclasses.replace(DISAGG, pp_size=2)
    assert not hooks["17278"].pad_hook(view([S.GENERATION_TO_COMPLETE], 2, pp2)).padded
    assert hooks["17278"].pad_hook(view([S.GENERATION_TO_COMPLETE], 2)).padded


def test_cap_found_in_a_router_file_turns_the_2025_shape_into_prefix_2026(tmp_path):
    """Mid-2025 builds computed expected in the request queue; a min(.., cap) there is the cap."""
    root = place(tmp_path, "2025")
    assert era_of(resolve_policy(f"trtllm:{root}")) in ERAS["2025"]
    queue = root / "tensorrt_llm/_torch/pyexecutor/executor_request_queue.py"
    queue.write_text(
        "class ExecutorRequestQueue:\n"
        "    def _route(self, counts, num_new):\n"
        "        fair = -(-(sum(counts) + num_new) // self.tp_size)\n"
        "        self.expected_num_active_requests = min(max(fair, max(counts)),\n"
        "                                                self.max_num_active_requests)\n")
    policy = resolve_policy(f"trtllm:{root}")
    assert "[era: prefix-2026]" in policy.source
    assert "executor_request_queue.py:_route" in policy.notes


def test_post_schedule_padding_method_selects_the_postpad_loop(tmp_path):
    text = (FIXTURES / "py_executor_17278.py").read_text() + (
        "\n    def _pad_empty_attention_dp_batch(self, scheduled_batch):\n"
        "        return None\n")
    policy = resolve_policy(f"trtllm:{place(tmp_path, '17278', executor_text=text)}")
    assert "[era: postpad-17379]" in policy.source
    assert policy.postpad_empty_batch and policy.rollback_on_skip


def test_a_method_whose_body_is_elided_is_unknown_not_a_no_op(tmp_path):
    """A reduced source keeps ``_count_schedulable_active_requests`` as a docstring and ``...``:
    run as written it would count None (and pad every rank); it is refused, naming the method
    and its line. An elided method the stand-in answers itself (the KV-capacity precheck) or
    one the pad never reaches is no obstacle."""
    text = (FIXTURES / "py_executor_2026.py").read_text()
    body = ("        if self.kv_cache_transceiver is None:\n"
            "            return len(self.active_requests)\n"
            "        return len([r for r in self.active_requests\n"
            "                    if not (r.is_disagg_generation_init_state\n"
            "                            or r.is_disagg_generation_transmission_in_progress)])\n")
    assert body in text
    line = text[:text.index(body)].count("\n")   # the def line, 1-based
    stub = text.replace(body, '        """Elided."""\n        ...\n')
    with pytest.raises(PolicyError) as e:
        resolve_policy(f"trtllm:{place(tmp_path / 'a', '2026', executor_text=stub)}")
    assert "_count_schedulable_active_requests has its body elided" in str(e.value)
    assert e.value.line == line
    extra = ("\n    def _has_adp_dummy_kv_capacity(self, token_nums=None):\n        ...\n"
             "\n    def _never_reached(self):\n        ...\n")
    policy = resolve_policy(f"trtllm:{place(tmp_path / 'b', '2026', executor_text=text + extra)}")
    assert policy.pad_hook(view([S.DISAGG_GENERATION_INIT], 1)).padded


def test_module_level_side_effects_never_run(tmp_path):
    marker = tmp_path / "module-code-ran"
    text = (FIXTURES / "py_executor_2026.py").read_text()
    planted = (f"from pathlib import Path\nPath({str(marker)!r}).write_text('module')\n"
               "raise SystemExit('module-level code executed')\n")
    text = text.replace("import math\n", planted + "import math\n", 1)
    text = text.replace("class PyExecutor:\n", "class PyExecutor:\n"
                        f"    Path({str(marker)!r}).write_text('class body')\n", 1)
    root = place(tmp_path / "checkout", "2026", executor_text=text)
    policy = resolve_policy(f"trtllm:{root}")
    out = policy.pad_hook(view([S.DISAGG_GENERATION_INIT], 1))
    assert out.padded
    assert not marker.exists()


def test_missing_module_name_fails_naming_it_and_the_revision(git_repo):
    text = (FIXTURES / "py_executor_2026.py").read_text().replace(
        "return len(self.active_requests)\n",
        "return len(self.active_requests) + get_draft_token_length(self.active_requests[0])\n", 1)
    place(git_repo.root, "2026", executor_text=text)
    sha = git_repo.commit("needs a helper the stand-in lacks")
    policy = resolve_policy(f"trtllm:{git_repo.root}@{sha}")
    assert "get_draft_token_length" in policy.notes
    # Not reached on the disaggregated path: the hook works there.
    assert policy.pad_hook(view([S.DISAGG_GENERATION_INIT], 1)).padded
    with pytest.raises(PolicyError) as err:
        policy.pad_hook(view([S.GENERATION_IN_PROGRESS], 1, AGG))
    assert "'get_draft_token_length'" in str(err.value)
    assert sha[:12] in str(err.value)


def test_missing_standin_attribute_fails_naming_it(git_repo):
    text = (FIXTURES / "py_executor_fix16161.py").read_text().replace(
        "if self._should_skip_dummy_for_benchmark_disagg():",
        "if self._brand_new_gate or self._should_skip_dummy_for_benchmark_disagg():", 1)
    place(git_repo.root, "fix16161", executor_text=text)
    sha = git_repo.commit("uses a flag the stand-in lacks")
    policy = resolve_policy(f"trtllm:{git_repo.root}@{sha[:8]}")
    with pytest.raises(PolicyError) as err:
        policy.pad_hook(view([S.DISAGG_GENERATION_INIT], 1))
    assert "_brand_new_gate" in str(err.value) and sha[:12] in str(err.value)


def test_revision_is_read_with_git_show_not_the_working_tree(git_repo):
    old = git_repo.commit_era("2026", "pre-fix executor")
    place(git_repo.root, "fix16161")  # uncommitted working tree: the fix
    at_rev = resolve_policy(f"trtllm:{git_repo.root}@{old}")
    tree = resolve_policy(f"trtllm:{git_repo.root}")
    assert "[era: prefix-2026]" in at_rev.source and old[:12] in at_rev.source
    assert "[era: fix-16161]" in tree.source
    frame = view([S.GENERATION_TO_COMPLETE], 2)
    assert (at_rev.pad_hook(frame).padded, tree.pad_hook(frame).padded) == (False, True)


def test_bad_sources_fail_clearly(tmp_path, git_repo):
    with pytest.raises(PolicyError, match="no such directory"):
        resolve_policy(f"trtllm:{tmp_path / 'nowhere'}")
    with pytest.raises(PolicyError, match="py_executor.py"):
        resolve_policy(f"trtllm:{tmp_path}")
    git_repo.commit_era("2026", "one")
    with pytest.raises(PolicyError, match="unknown git revision 'no-such-rev'"):
        resolve_policy(f"trtllm:{git_repo.root}@no-such-rev")
    root = place(tmp_path / "nopad", "2026", executor_text="class PyExecutor:\n    pass\n")
    with pytest.raises(PolicyError, match="no _pad_attention_dp_dummy_request"):
        resolve_policy(f"trtllm:{root}")
    root = place(tmp_path / "broken", "2026", executor_text="def (:\n")
    with pytest.raises(PolicyError, match="does not parse"):
        resolve_policy(f"trtllm:{root}")


def test_installed_absent_is_a_clear_error(monkeypatch):
    asked = []

    def find_spec(name, *args):
        asked.append(name)
        return None

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(PolicyError) as err:
        resolve_policy("trtllm:installed")
    assert "tensorrt_llm is not installed" in str(err.value)
    assert "trtllm:/path/to/TensorRT-LLM" in str(err.value)
    assert asked == ["tensorrt_llm"]  # only the top-level spec: nothing is imported


def test_installed_package_is_found_without_importing(monkeypatch, tmp_path):
    root = place(tmp_path / "site-packages", "fix16161")
    pkg = root / "tensorrt_llm"
    (pkg / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    spec = types.SimpleNamespace(submodule_search_locations=[str(pkg)],
                                 origin=str(pkg / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: spec if name == "tensorrt_llm" else None)
    policy = resolve_policy("trtllm:installed")
    assert "[era: fix-16161]" in policy.source
    assert policy.pad_hook(view([S.GENERATION_TO_COMPLETE], 2)).padded


def test_parse_spec_and_resolve_policies():
    assert parse_spec("trtllm:/src/TensorRT-LLM@v1.2.0") == ("/src/TensorRT-LLM", "v1.2.0")
    assert parse_spec("trtllm:/src/TensorRT-LLM") == ("/src/TensorRT-LLM", None)
    assert parse_spec("trtllm:installed") == (None, None)
    with pytest.raises(PolicyError, match="names no source"):
        parse_spec("trtllm:")
    names = ["prefix-2026", "newest"]
    assert [p.name for p in resolve_policies(names)] == names
    with pytest.raises(PolicyError, match="unknown policy"):
        resolve_policy("no-such-policy")
