"""Reconstruction of per (iter, rank) state from frames and from iteration logs alone."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from forensics.readers.trace_v1 import tables_from_records
from forensics.reconstruct import LOG_STATE_COLUMNS, frame_state, log_state

sys.path.insert(0, str(Path(__file__).parent / "replay"))
from replay_traces import DGI, GIP, GTC, frame, nvbug_records, run_record


def tables(records):
    t = tables_from_records(records, "mem")
    return t.runs, t.frames, t.requests


def test_frame_state_counts_dummies_window_and_recorded_expected():
    """NVBug trace, iter 42: rank 1 holds 8 TRANS_COMPLETE + a leaked dummy: active 9, all 9 in
    the window; fleet counts [3, 9, 0, 3] -> total 15, max 9; recorded expected 8 -> surplus."""
    df = frame_state(tables(nvbug_records()))
    r = df[(df["iter"] == 42) & (df["rank"] == 1)].iloc[0]
    assert (r.active, r.dummies, r.real, r.in_window) == (9, 1, 8, 9)
    assert (r.fleet_ranks, r.fleet_total, r.fleet_max) == (4, 15, 9)
    assert (r.expected, r.expected_source, bool(r.surplus)) == (8, "recorded", True)
    r41 = df[(df["iter"] == 41) & (df["rank"] == 2)].iloc[0]
    assert (r41.in_window, r41.scheduled, bool(r41.can_queue), bool(r41.padded)) == (0, 0, False, False)


def test_frame_state_computes_expected_with_the_cap_and_marks_missing_ranks():
    """No recorded expected. iter 0: counts [1, 3], first frame so nothing new: fair ceil(4/2) = 2,
    floor 3, cap 2 -> 2 (rank 1 surplus). iter 1: counts [1, 4], request 9 new on rank 1:
    floor max(1, 4-1) = 3, fair 3, cap 2 -> 2. iter 2 lacks rank 1: expected unknown (NA)."""
    recs = [run_record(2, build="prefix-2026", max_batch_size=2),
            frame(0, 0, [(1, DGI)]), frame(0, 1, [(2, GTC), (3, GTC), (4, GIP)]),
            frame(1, 0, [(1, DGI)]), frame(1, 1, [(2, GTC), (3, GTC), (4, GIP), (9, GIP)]),
            frame(2, 0, [(1, GIP)])]
    df = frame_state(tables(recs))
    assert df["expected"].tolist()[:4] == [2, 2, 2, 2]
    assert df["new"].tolist() == [0, 0, 0, 1, 0]
    assert df["surplus"].tolist()[:4] == [False, True, False, True]
    last = df.iloc[4]
    assert pd.isna(last.expected) and last.expected_source is None and last.fleet_ranks == 1
    legacy = frame_state(tables([dict(recs[0], build="legacy-2025")] + recs[1:]))
    assert legacy["expected"].tolist()[:4] == [3, 3, 3, 3]  # no cap


def iterations(rows):
    return pd.DataFrame(rows, columns=["source", "line", "rank", "iter", "local_rank",
                                       "num_scheduled_requests"])


def test_log_state_batch_can_queue_and_unknown():
    """tp 3. Line iter 11 (body 10): ranks 0, 1, 2 log 2, 1, 3 -> can_queue true. Line iter 12
    (body 11): rank 0 logs 0 -> false though rank 2 is unknown. Line iter 13: only rank 0 logs 4
    -> unknown."""
    it = iterations([("a.log", 1, 0, 11, 0, 2), ("a.log", 2, 1, 11, 1, 1), ("a.log", 3, 2, 11, 2, 3),
                     ("a.log", 4, 0, 12, 0, 0), ("a.log", 5, 1, 12, 1, 5), ("a.log", 6, 0, 13, 0, 4),
                     ("a.log", 7, None, None, None, None)])
    df = log_state(it, tp_size=3)
    assert list(df.columns) == list(LOG_STATE_COLUMNS)
    assert df["iter"].tolist() == [10, 10, 10, 11, 11, 11, 12, 12, 12]
    assert df["log_iter"].tolist() == [11, 11, 11, 12, 12, 12, 13, 13, 13]
    assert df.groupby("iter")["can_queue"].first().tolist() == ["true", "false", "unknown"]
    assert df["batch"].iloc[3] == 0 and df["batch"].iloc[4] == 5 and pd.isna(df["batch"].iloc[5])
    assert pd.isna(df["source"].iloc[5]) and df["line"].iloc[4] == 5
    assert df["known_ranks"].tolist()[6:] == [1, 1, 1]
    # Without tp_size the largest rank seen (2) decides: the same here.
    assert log_state(it)["can_queue"].tolist() == df["can_queue"].tolist()


def test_log_state_without_any_batch_is_empty():
    assert log_state(iterations([("a.log", 1, 0, 3, 0, None)])).empty


def _log_state_by_merge(it, tp_size=None):
    """The straightforward construction: a full (iteration, rank) grid left-merged with the lines."""
    import numpy as np
    import pandas as pd

    from forensics.reconstruct.log_state import LOG_STATE_COLUMNS
    rank = it["rank"].astype("Int64")
    if "local_rank" in it:
        rank = rank.fillna(it["local_rank"].astype("Int64"))
    df = pd.DataFrame({"log_iter": it["iter"].astype("Int64"), "rank": rank,
                       "batch": it["num_scheduled_requests"].astype("Int64"),
                       "source": it["source"], "line": it["line"].astype("Int64")})
    df = df[df["log_iter"].notna() & df["rank"].notna() & df["batch"].notna()]
    R = int(tp_size) if tp_size is not None else int(df["rank"].max()) + 1
    df = df[(df["rank"] >= 0) & (df["rank"] < R)]
    df = df.sort_values(["log_iter", "rank", "source", "line"]).drop_duplicates(["log_iter", "rank"])
    iters = np.sort(df["log_iter"].unique().astype(np.int64))
    grid = pd.DataFrame({"log_iter": pd.array(np.repeat(iters, R), dtype="Int64"),
                         "rank": pd.array(np.tile(np.arange(R), iters.size), dtype="Int64")})
    out = grid.merge(df, on=["log_iter", "rank"], how="left")
    out["iter"] = out["log_iter"] - 1
    known = out.groupby("log_iter")["batch"].transform("count").astype("int64")
    zero = (out["batch"] == 0).fillna(False).groupby(out["log_iter"]).transform("any")
    out["known_ranks"] = known
    out["can_queue"] = np.where(zero, "false", np.where(known == R, "true", "unknown"))
    return out[list(LOG_STATE_COLUMNS)].reset_index(drop=True)


@pytest.mark.parametrize("sample", ["nvbug-6438685", "surplus-17278", "healthy"])
def test_log_state_built_by_position_equals_the_merge(sample, tmp_path):
    """log_state fills its grid by position (bounded peak on a fleet hour); same frame as a merge,
    with the fleet size given, guessed, and larger than the ranks that log."""
    import pandas as pd

    from forensics.readers.dataset_cache import as_dataset
    from forensics.reconstruct import log_state
    src = Path(__file__).resolve().parents[1] / "traces" / "samples" / sample
    if not src.is_dir():
        pytest.skip("no samples")
    it = as_dataset([src], cache_dir=tmp_path / "ds").iterations
    it = pd.concat([it, it.iloc[:3]], ignore_index=True)          # duplicated lines: first kept
    for tp in (None, 8, 12):
        pd.testing.assert_frame_equal(log_state(it, tp), _log_state_by_merge(it, tp), check_exact=True)
