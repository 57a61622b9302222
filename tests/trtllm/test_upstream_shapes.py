"""Shapes met when replaying real TensorRT-LLM revisions through ``trtllm:PATH`` (issue #6).

Each fixture is our own code reproducing one shape that the first version of the extraction or the
stand-in got wrong on a real revision (reported in the helper's validation notes):

* ``py_executor_2025_early``: the dummy's draft budget read as ``self.max_draft_tokens``, the name
  early-2025 builds used; the stand-in lacked it and the replay stopped with a PolicyError.
* ``py_executor_16279``: PR #16279's window count and pending dummy behind
  ``_enable_dsv4_adp_dummy_fixes`` (one model family, pp_size 1); the stand-in lacked the flag, and
  the fix-16161 loop did not roll the pending dummy back.
* ``py_executor_property``: a property with a setter; the setter (a later ``def`` of the same name)
  replaced the getter, so reading the property gave a bound method (always true).
"""
from __future__ import annotations

import dataclasses

import pytest
from trtllm_checkouts import place

from replay.config import RunConfig
from replay.walk import run
from replay.frames import RunFrames
from replay.policy import FrameView
from replay.resolve import resolve_policy
from replay.trtllm_source import era_of
from replay.states import RequestState as S

DISAGG = RunConfig(tp_size=2, disaggregated=True)


def view(states, expected, config=DISAGG, alloc_ok=True):
    reqs = tuple((i + 1, int(s), False) for i, s in enumerate(states))
    return FrameView(iter=0, rank=0, requests=reqs, expected=expected, config=config,
                     alloc_ok=alloc_ok)


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    return {shape: resolve_policy(f"trtllm:{place(tmp_path_factory.mktemp(shape), shape)}")
            for shape in ("2025_early", "16279", "property")}


def test_early_2025_draft_budget_name_is_provided(policies):
    """The early-2025 shape runs: a rank whose only request awaits KV (count 0, expected 1) gets a
    context dummy (``is_gen = not has_context_request``); a refused dummy is indexed unchecked,
    so ``None[0]`` is the replayed crash."""
    pol = policies["2025_early"]
    assert era_of(pol) in ("mid-2025", "legacy-2025")  # the catalogue's name for that shape
    out = pol.pad_hook(view([S.DISAGG_GENERATION_INIT], 1))
    assert (out.padded, out.role, out.crash) == (True, "context", None)
    refused = pol.pad_hook(view([S.DISAGG_GENERATION_INIT], 1, alloc_ok=False))
    assert not refused.padded and refused.crash.startswith("TypeError")


def test_16279_model_gated_window_needs_pp1_and_states_the_assumption(policies):
    """One GENERATION_TO_COMPLETE request, expected 2: the gated window count sees 0 and pads;
    with pp_size 2 the flag is off, the legacy count sees 1 and does not pad."""
    pol = policies["16279"]
    assert era_of(pol) in ("fix-16279", "fix-16161")  # the merged fix where the catalogue has it
    assert "assumed a DeepSeek-V4 model" in pol.notes
    assert pol.pad_hook(view([S.GENERATION_TO_COMPLETE], 2)).padded
    pp2 = dataclasses.replace(DISAGG, pp_size=2)
    assert not pol.pad_hook(view([S.GENERATION_TO_COMPLETE], 2, pp2)).padded
    assert pol.rolls_back(DISAGG) and not pol.rolls_back(pp2)


#: Two ranks, cap 2, disaggregated, non-overlap; rank 1's dummy allocation is refused at iter 0.
RECORDS = [
    {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
     "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
     "overlap_scheduler": False, "build": "fix-16161"},
    {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": "DISAGG_GENERATION_INIT"}]},
    {"kind": "frame", "iter": 0, "rank": 1, "requests": [{"id": 2, "state": "DISAGG_GENERATION_INIT"}],
     "alloc_ok": False},
    {"kind": "frame", "iter": 1, "rank": 0, "requests": [{"id": 1, "state": "GENERATION_IN_PROGRESS"}]},
    {"kind": "frame", "iter": 1, "rank": 1, "requests": [{"id": 2, "state": "GENERATION_IN_PROGRESS"}]},
]


def test_16279_pending_dummy_is_rolled_back_when_the_fleet_skips(policies):
    """Iter 0: expected 1 on both ranks, both counts 0 (awaiting KV). Rank 0 pads (pending);
    rank 1's allocation is refused, so its batch is 0 and can_queue is False: the fleet skips.
    The source's ``_finalize_adp_dummy_allocation`` rolls rank 0's dummy back: no leak, and at
    iter 1 rank 0 holds 1 request (expected max(ceil(2 / 2), 1) = 1). The fix-16161 loop alone
    keeps the dummy across the skip: leak (rank 0, created 0, skipped 0), rank 0 holds 2."""
    frames = RunFrames.from_records(RECORDS)
    dsv4 = dataclasses.replace(frames.config, model_arch="deepseek_v4")  # inside the #16279 gate
    real = run(frames, dsv4, policies["16279"])
    assert real.skipped_iters == (0,) and real.leaks.empty and real.crash is None
    d = real.decisions.set_index(["iter", "rank"])
    assert d.loc[(0, 0), "removed_path"] == "rollback"
    assert (d.loc[(1, 0), "active"], d.loc[(1, 0), "expected"]) == (1, 1)
    modelled = run(frames, dsv4, "fix-16161")
    assert [(l.rank, l.iter_created, l.iter_skipped) for l in modelled.leak_records] == [(0, 0, 0)]


def test_property_with_a_setter_is_read_through_its_getter(policies):
    """``pad_suspended`` is a property (getter False) with a setter: an empty rank with expected 1
    pads. Had the setter been taken as a method, ``self.pad_suspended`` would be truthy and the
    pad step would return early."""
    pol = policies["property"]
    assert "pad_suspended" in pol.notes.split("extracted:")[1]
    assert pol.pad_hook(view([], 1)).padded
