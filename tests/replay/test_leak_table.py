"""``ReplayResult.leaks`` (a typed DataFrame, the fatal leak first) and ``leak_records``."""
from __future__ import annotations

import pandas as pd
import pytest
from replay_traces import nvbug_records

import replay
from replay.leak_table import LEAK_COLUMNS, LeakTable


@pytest.fixture(scope="module")
def nvbug():
    return replay.RunFrames.from_records(nvbug_records())


@pytest.fixture(scope="module")
def prefix(nvbug):
    return replay.run(nvbug, policy="prefix-2026")


def test_leaks_frame_hand_worked(prefix):
    """The NVBug frames under prefix-2026 (worked in ``test_scenarios.test_nvbug_chain_prefix``):
    tp 4, cap 8. Dummies in creation order: d0 on rank 1 at 40 (removed at 40), d1 on rank 0 and
    d2 on rank 1 at 41: rank 2 offers batch 0, the fleet skips 41, neither is rolled back, so both
    leak (first skip 41, cause rank 2); d3 on rank 2 at 42 (no skip). At 42 rank 1 holds 8 real
    + d2 = 9 > 8: the assert fires on rank 1 at 42. So 2 leaks; d2 (rank 1, the crashing rank)
    is the fatal one and comes first, then d1 (rank 0)."""
    lk = prefix.leaks
    assert isinstance(lk, pd.DataFrame)
    assert list(lk.columns) == ["dummy", "rank", "role", "iter_created", "iter_skipped",
                                "cause_ranks", "fatal"] == list(LEAK_COLUMNS)
    assert {c: str(t) for c, t in lk.dtypes.items()} == {
        "dummy": "int64", "rank": "int64", "role": "category", "iter_created": "int64",
        "iter_skipped": "int64", "cause_ranks": "object", "fatal": "bool"}
    assert list(lk["role"].cat.categories) == ["context", "generation"]
    assert len(lk) == 2
    assert list(lk.itertuples(index=False, name=None)) == [
        (2, 1, "generation", 41, 41, (2,), True),
        (1, 0, "generation", 41, 41, (2,), False)]
    assert (prefix.crash.iter, prefix.crash.rank) == (42, 1)
    assert prefix.fatal_leak.dummy == 2 and prefix.first_leak.dummy == 1


def test_records_agree_row_for_row(prefix):
    recs = prefix.leak_records
    assert isinstance(recs, tuple) and all(isinstance(x, replay.Leak) for x in recs)
    assert len(recs) == len(prefix.leaks)
    for rec, row in zip(recs, prefix.leaks.itertuples(index=False)):
        assert (rec.dummy, rec.rank, rec.role, rec.iter_created, rec.iter_skipped,
                tuple(rec.cause_ranks), rec is prefix.fatal_leak) == \
            (row.dummy, row.rank, row.role, row.iter_created, row.iter_skipped, row.cause_ranks,
             row.fatal)
    # The explanations follow the same order: the fatal leak's chain first.
    assert "rank 1 counted 8 real requests + its leaked dummy = 9 > expected 8" in prefix.explain()[0]
    # --json keeps its pinned ledger order.
    assert [x["rank"] for x in prefix.to_json()["leaks"]] == [0, 1]


def test_no_leak_is_an_empty_typed_frame(nvbug, prefix):
    """fix-16161 pads rank 2 at 41 too: nothing skips, nothing leaks."""
    fix = replay.run(nvbug, policy="fix-16161")
    assert fix.leaks.empty and fix.leak_records == () and fix.fatal_leak is None
    assert fix.first_leak is None and fix.verdict == "clean"
    assert list(fix.leaks.columns) == list(LEAK_COLUMNS)
    assert (fix.leaks.dtypes == prefix.leaks.dtypes).all()


def test_views_keep_the_same_leaks(prefix):
    """with_changes / at_iterations rebuild the result: same order, same table."""
    for view in (prefix.with_changes(notes=("x",)), prefix.at_iterations([41])):
        assert view.leak_records == prefix.leak_records
        pd.testing.assert_frame_equal(view.leaks, prefix.leaks)
    assert len(repr(prefix)) < 250 and "2 leaked dummies" in repr(prefix)


def test_code_written_for_the_tuple_gets_a_clear_error_or_keeps_working(prefix):
    lk = prefix.leaks
    assert isinstance(lk, LeakTable) and type(lk.head()) is pd.DataFrame
    assert len(lk) == 2                                        # still counts the leaks
    with pytest.raises(ValueError, match=r"res\.leaks\.empty.*leak_records"):
        bool(lk)
    with pytest.raises(ValueError, match="truth value"):
        if prefix.leaks:
            pass
    with pytest.raises(KeyError, match=r"res\.leak_records\[0\].*res\.leaks\.iloc\[0\]"):
        lk[0]
    assert list(lk) == list(LEAK_COLUMNS)                      # a DataFrame iterates its columns
    with pytest.raises(AttributeError, match=r"iterate res\.leak_records"):
        [x.rank for x in lk]
    assert lk["rank"].tolist() == [1, 0]                       # column access unchanged
    with pytest.warns(DeprecationWarning, match="res.leaks"):
        assert lk.df is lk
    with pytest.warns(DeprecationWarning, match="res.leak_records"):
        assert lk.records == prefix.leak_records


def test_constructor_takes_records_under_either_name(prefix):
    kw = {"policy": prefix.policy, "config": prefix.config, "run": prefix.run,
          "decisions": prefix.decisions, "ledger": prefix.ledger, "crash": prefix.crash,
          "skipped_iters": prefix.skipped_iters, "first_divergence": None}
    ledger_order = tuple(sorted(prefix.leak_records, key=lambda x: x.dummy))
    for r in (replay.ReplayResult(leak_records=ledger_order, **kw),
              replay.ReplayResult(leaks=ledger_order, **kw)):
        assert r.leak_records == prefix.leak_records           # fatal first either way
    with pytest.raises(TypeError, match="Leak records"):
        replay.ReplayResult(leak_records=prefix.leaks, **kw)
