"""Reconstruction from trace frames: one row per (run, iter, rank).

Columns (``FRAME_STATE_COLUMNS``):

    run, iter, rank     the frame's key
    active              len(active_requests) at pad entry, recorded dummies included
    dummies             recorded dummies in it (each survived an earlier iteration)
    real                active - dummies
    in_window           requests in the micro-batch scheduler window (dummies included: their
                        assumed states, GENERATION_IN_PROGRESS / CONTEXT_INIT, are inside it)
    new                 real requests first seen on the rank at this iteration (0 at the run's
                        first frame: whether they were just fetched is unknown there)
    fleet_ranks         ranks with a frame at this iteration
    fleet_total         sum of the all-gathered counts (``active`` over the ranks)
    fleet_max           their maximum
    expected            expected_num_active_requests: recorded where present, else computed (§5)
                        from the all-gathered counts with the run's cap; NA when some rank lacks
                        a frame and nothing was recorded
    expected_source     'recorded' | 'computed' | None
    surplus             active > expected (the entry assert of capped builds trips here)
    padded, scheduled, can_queue, alloc_ok   the recorded decisions (NA when absent)

The cap is applied unless the run's ``build`` names a catalogue policy without a cap
(``legacy-2025``). ``new`` and the computed ``expected`` follow the replay's rules, from the one
place each is written: ``replay.first_seen`` (a request is new at the first iteration its rank
holds it, never at the run's first frame) and ``replay.step.computed_expected`` (§5).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from forensics.dataset.store import to_pandas
from replay.catalogue import CATALOGUE
from replay.first_seen import first_seen, new_on_rank
from replay.states import micro_batch_window
from replay.step import computed_expected

FRAME_STATE_COLUMNS = ("run", "iter", "rank", "active", "dummies", "real", "in_window", "new",
                       "fleet_ranks", "fleet_total", "fleet_max", "expected", "expected_source",
                       "surplus", "padded", "scheduled", "can_queue", "alloc_ok")


def _tables(source: Any) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    if isinstance(source, tuple):
        return tuple(to_pandas(t) if isinstance(t, pa.Table) else t for t in source)  # type: ignore[return-value]
    return source.runs, source.frames, source.requests


def frame_state(source: Any, run: str | None = None) -> pd.DataFrame:
    """Reconstruct every frame of a dataset (or of one run).

    Args:
        source: a loaded dataset (``forensics.load`` / ``as_dataset``) or a
            ``(runs, frames, requests)`` tuple of tables (Arrow or pandas, dataset schema).
        run: keep only this run.

    Returns:
        A DataFrame with ``FRAME_STATE_COLUMNS``, sorted by (run, iter, rank).
    """
    runs, frames, requests = _tables(source)
    if run is not None:
        runs, frames = runs[runs["run"] == run], frames[frames["run"] == run]
        requests = requests[requests["run"] == run]
    if frames.empty:
        return pd.DataFrame({c: [] for c in FRAME_STATE_COLUMNS})
    out = []
    for run_id, fr in frames.groupby("run", sort=True):
        rec = runs[runs["run"] == run_id].iloc[0]
        out.append(_one_run(rec, fr, requests[requests["run"] == run_id]))
    return pd.concat(out, ignore_index=True)[list(FRAME_STATE_COLUMNS)]


def _one_run(rec, fr: pd.DataFrame, rq: pd.DataFrame) -> pd.DataFrame:
    tp = int(rec["tp_size"])
    cap = int(rec["max_num_active_requests"])
    build = CATALOGUE.get(str(rec["build"]))
    capped = build is None or build.cap
    mult = 1.0
    try:
        mult = float(json.loads(rec["record_json"]).get("expected_multiplier", 1.0))
    except (ValueError, TypeError, AttributeError):
        pass
    window = micro_batch_window(bool(rec["encoder_decoder"]))
    st = rq["state_value"].to_numpy(np.int64)
    dummy = rq["dummy"].to_numpy(bool)
    # Dummies are assumed inside the window (GENERATION_IN_PROGRESS or CONTEXT_INIT).
    in_win = dummy | ((st >= int(window.start)) & (st < int(window.end)))
    first_iter = int(fr["iter"].min())
    real = rq[~dummy]
    r_rank = real["rank"].to_numpy(np.int64)
    r_iter = real["iter"].to_numpy(np.int64)
    first = first_seen(r_rank, real["request_id"].to_numpy(np.int64), r_iter,
                       max(tp, int(r_rank.max()) + 1 if r_rank.size else 0))
    is_new = new_on_rank(first, r_iter, first_iter)
    keys = ["iter", "rank"]
    win = pd.DataFrame({"iter": rq["iter"].to_numpy(), "rank": rq["rank"].to_numpy(), "in_window": in_win}
                       ).groupby(keys)["in_window"].sum()
    new = pd.DataFrame({"iter": real["iter"].to_numpy(), "rank": real["rank"].to_numpy(), "new": is_new}
                       ).groupby(keys)["new"].sum()
    df = fr.sort_values(keys).reset_index(drop=True)
    df = df.join(win, on=keys).join(new, on=keys)
    df["in_window"] = df["in_window"].fillna(0).astype("int64")
    df["new"] = df["new"].fillna(0).astype("int64")
    df["active"] = df["num_requests"].astype("int64")
    df["dummies"] = df["num_dummies"].astype("int64")
    df["real"] = df["active"] - df["dummies"]
    g = df.groupby("iter")
    df["fleet_ranks"] = g["rank"].transform("size").astype("int64")
    df["fleet_total"] = g["active"].transform("sum").astype("int64")
    df["fleet_max"] = g["active"].transform("max").astype("int64")
    floor = (df["active"] - df["new"]).groupby(df["iter"]).transform("max")
    computed = computed_expected(df["fleet_total"].to_numpy(), floor.astype("int64").to_numpy(),
                                 tp, mult, cap if capped else None)
    complete = df["fleet_ranks"] == tp
    rec_exp = df["expected"]
    has_rec = rec_exp.notna().to_numpy()
    exp = np.where(has_rec, rec_exp.fillna(0).to_numpy(np.int64), computed)
    known = has_rec | complete.to_numpy()
    df["expected"] = pd.array(np.where(known, exp, 0), dtype="Int64")
    df.loc[~known, "expected"] = pd.NA
    df["expected_source"] = pd.Series(np.where(has_rec, "recorded", np.where(known, "computed", None)),
                                      dtype="object")
    df["surplus"] = (df["active"] > df["expected"]).astype("boolean")
    return df


__all__ = ["FRAME_STATE_COLUMNS", "frame_state"]
