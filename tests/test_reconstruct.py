"""Reconstruction of per (iter, rank) state from frames and from iteration logs alone."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from forensics.ingest.trace_v1 import tables_from_records
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
