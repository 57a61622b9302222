"""Candidate patches ``py:...`` replayed like any policy (issue #6 item 4).

The trace is the one of ``test_bisect`` (see its docstring for the arithmetic): under the
legacy count rank 0's dummy leaks at iter 0 and the 2026 build asserts at iter 1 (rank 0);
counting only the scheduler window pads rank 1 too and nothing leaks.
"""
from __future__ import annotations

import textwrap

import pytest
from trtllm_checkouts import RECORDS

from forensics.errors import PolicyError
from replay.candidate import parse_spec
from replay.config import RunConfig
from replay.walk import run
from replay.frames import RunFrames
from replay.policy import FrameView
from replay.resolve import resolve_policy
from replay.states import RequestState as S

CANDIDATES = textwrap.dedent('''
    def count_in_window(self):
        """The #16161 idea: with a transceiver count only [CONTEXT_INIT, GENERATION_TO_COMPLETE)."""
        if self.kv_cache_transceiver is None:
            return len(self.active_requests)
        low, high = self.scheduler.scheduling_state_range
        return sum(1 for r in self.active_requests if int(low) <= r.state_value < int(high))

    def count_legacy(self):
        if self.kv_cache_transceiver is None:
            return len(self.active_requests)
        return sum(0 if (r.is_disagg_generation_init_state
                         or r.is_disagg_generation_transmission_in_progress) else 1
                   for r in self.active_requests)

    def pad_via_scheduler(self):
        """A whole pad method: delegate to the scheduler, tolerate a refused dummy."""
        if not self.enable_attention_dp:
            return
        if any(self.scheduler.is_request_in_schedulable_state(r) for r in self.active_requests):
            return
        if self.expected_num_active_requests <= 0:
            return
        got = self.kv_cache_manager.add_dummy_requests(request_ids=[0],
                                                       is_gen=self._adp_dummy_is_gen)
        if got is None:
            self.logger.warning("Cannot allocate the pad dummy")
            return
        got[0].is_attention_dp_dummy = True
        self.active_requests.append(got[0])

    def fix_it(self):
        return 1
''')


@pytest.fixture(scope="module")
def frames():
    return RunFrames.from_records(RECORDS)


@pytest.fixture
def candidates(tmp_path):
    path = tmp_path / "my_fix.py"
    path.write_text(CANDIDATES)
    return path


def _verdict(result):
    leaks = [(l.rank, l.iter_created, l.iter_skipped) for l in result.leak_records]
    return leaks, None if result.crash is None else (result.crash.iter, result.crash.rank)


def test_count_candidate_on_the_prefix_loop_fixes_the_recorded_failure(frames, candidates):
    policy = resolve_policy(f"py:{candidates}:count_in_window:count:prefix-2026")
    assert "replaces _count_schedulable_active_requests" in policy.source
    assert policy.cap and not policy.rollback_on_skip  # prefix-2026's loop
    assert _verdict(run(frames, None, policy)) == ([], None)
    assert _verdict(run(frames, None, "prefix-2026")) == ([(0, 0, 0)], (1, 0))


def test_legacy_count_candidate_reproduces_the_catalogue(frames, candidates):
    """The base pad step around a count equal to the legacy one gives prefix-2026's verdict."""
    policy = resolve_policy(f"py:{candidates}:count_legacy:count:prefix-2026")
    assert _verdict(run(frames, None, policy)) == ([(0, 0, 0)], (1, 0))


def test_pad_candidate_is_inferred_from_its_name(frames, candidates):
    policy = resolve_policy(f"py:{candidates}:pad_via_scheduler")
    assert "replaces _pad_attention_dp_dummy_request" in policy.source
    assert policy.name == f"py:{candidates}:pad_via_scheduler"
    assert _verdict(run(frames, None, policy)) == ([], None)
    cfg = RunConfig(tp_size=2, disaggregated=True)
    refused = FrameView(0, 0, ((1, int(S.DISAGG_GENERATION_INIT), False),), 1, cfg, alloc_ok=False)
    out = policy.pad_hook(refused)
    assert (out.padded, out.alloc_failed, out.crash) == (False, True, None)
    assert out.warnings == ("Cannot allocate the pad dummy",)


def test_base_entry_check_applies_to_count_candidates(candidates):
    """Two TO_COMPLETE requests, expected 1: the prefix loop asserts, the newest loop warns."""
    cfg = RunConfig(tp_size=2, disaggregated=True)
    frame = FrameView(0, 0, ((1, 14, False), (2, 14, False)), 1, cfg)
    strict = resolve_policy(f"py:{candidates}:count_in_window:count:prefix-2026").pad_hook(frame)
    assert strict.crash is not None and strict.crash.startswith("AssertionError")
    tolerant = resolve_policy(f"py:{candidates}:count_in_window").pad_hook(frame)
    assert (tolerant.padded, tolerant.surplus_warning, tolerant.crash) == (True, True, None)


def test_module_form(candidates, monkeypatch):
    monkeypatch.syspath_prepend(str(candidates.parent))
    policy = resolve_policy("py:my_fix:count_in_window")
    assert policy.name == "py:my_fix:count_in_window"
    assert "newest" in policy.source


def test_candidate_errors(candidates, tmp_path):
    with pytest.raises(PolicyError, match="cannot tell whether"):
        resolve_policy(f"py:{candidates}:fix_it")
    assert resolve_policy(f"py:{candidates}:fix_it:count").pad_hook is not None
    with pytest.raises(PolicyError, match="no function 'nope'"):
        resolve_policy(f"py:{candidates}:nope")
    with pytest.raises(PolicyError, match="no such candidate file"):
        resolve_policy(f"py:{tmp_path / 'absent.py'}:count_x")
    with pytest.raises(PolicyError, match="cannot be imported"):
        resolve_policy("py:no_such_module_xyz:count_x")
    with pytest.raises(PolicyError, match="unknown base policy"):
        parse_spec(f"py:{candidates}:count_in_window:count:no-such-base")
    with pytest.raises(PolicyError, match="is not py:MODULE:FUNCTION"):
        parse_spec("py:only")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PolicyError, match="importing the candidate failed: RuntimeError: boom"):
        resolve_policy(f"py:{broken}:count_x")


def test_candidate_touching_a_missing_attribute_fails_clearly(tmp_path):
    path = tmp_path / "needs_more.py"
    path.write_text("def count_new(self):\n    return self._future_flag\n")
    policy = resolve_policy(f"py:{path}:count_new")
    frame = FrameView(0, 0, ((1, 13, False),), 1, RunConfig(tp_size=2, disaggregated=True))
    with pytest.raises(PolicyError, match="_future_flag"):
        policy.pad_hook(frame)
