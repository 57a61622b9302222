"""Leaks grouped by mechanism (``ReplayResult.mechanisms``): one paragraph per cause, the leaks
counted, the fatal one named."""
from __future__ import annotations

import pytest
from replay_traces import nvbug_records

import replay


@pytest.fixture(scope="module")
def nvbug():
    return replay.RunFrames.from_records(nvbug_records())


def test_prefix_one_mechanism_with_the_fatal_leak_named(nvbug):
    """The NVBug frames under prefix-2026 (worked in ``test_leak_table``): rank 2 holds only
    GENERATION_TO_COMPLETE requests 17 and 23 at 41; the legacy predicate counts them, the
    scheduler's window refuses them, so rank 2 offers batch 0 without a dummy and the fleet
    skips 41. The dummies padded at 41 on ranks 0 and 1 both leak the same way: one mechanism
    of two leaks. The one on rank 1 is fatal (8 real + it = 9 > 8 at 42); the one on rank 0 is
    still alive when the run stops at 42."""
    res = replay.run(nvbug, policy="prefix-2026")
    (mech,) = res.mechanisms()
    assert mech.causes == ("predicate_wider",)
    assert (mech.role, mech.origin) == ("generation", "padded")
    assert mech.rollback == "prefix-2026 does not roll back a pending dummy"
    assert [(lk.rank, lk.iter_created) for lk in mech.leaks] == [(1, 41), (0, 41)]
    assert mech.fatal is res.fatal_leak and mech.fatal.rank == 1
    assert mech.outcomes == {"crash": 1, "alive": 1}
    assert mech.skipped_iters == (41,)
    text = mech.text
    assert text.startswith("2 generation dummies padded and leaked at 1 fleet-wide skip (iter 41): ")
    assert "rank 2 held only GENERATION_TO_COMPLETE requests (ids 17, 23)" in text
    assert "1 was still alive when the run stopped at iter 42." in text
    assert text.endswith("Fatal: the dummy padded on rank 1 at iter 41; iter 42: rank 1 counted "
                         "8 real requests + its leaked dummy = 9 > expected 8 (recorded, at the "
                         "cap max_num_active_requests = 8): AssertionError.")


def test_legacy_removes_both_and_says_which_raised_the_floor(nvbug):
    """legacy-2025 has no cap: both leaked dummies are removed later by
    _update_request_states_tp; the one on rank 1 first makes rank 1 count 9 > 8
    (pp_size*max_batch_size), which only raises the floor. No crash, so nothing is fatal."""
    res = replay.run(nvbug, policy="legacy-2025")
    (mech,) = res.mechanisms()
    assert mech.fatal is None and mech.outcomes == {"removed": 1, "raised_floor": 1}
    assert ("2 were removed later, by _update_request_states_tp (it was the last element); 1 of "
            "them first raised expected above pp_size*max_batch_size = 8") in mech.text
    assert "Fatal" not in mech.text


def test_a_clean_replay_has_no_mechanism(nvbug):
    assert replay.run(nvbug, policy="fix-16161").mechanisms() == []
