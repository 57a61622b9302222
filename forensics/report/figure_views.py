"""The decisions a report's figures draw: each replay result cut to the iterations its figures show."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from forensics.report import figure_data as F


def figure_views(results: dict, names: Optional[Sequence[str]] = None) -> dict:
    """Each result (of ``names`` only, when given: the policies the figures draw) with the
    decisions of the iterations the figures draw only.

    A figure draws windows around its policy's crash, leaks and skips (``figure_data.windows_for``);
    the windows depend on the first and last iterations and those focus iterations alone, so
    the decisions of the windows of every policy, the first and last iteration, the iteration
    after the first leak and, for a policy with nothing to show, each rank's busiest iteration,
    draw the same figures as every decision of the run.
    """
    if names is not None:
        results = {n: results[n] for n in names if n in results}
    if not any(r.stored for r in results.values()):
        return dict(results)   # in memory: every decision is there already
    need: set[int] = set()
    per_iter: dict[str, pd.DataFrame] = {}
    for name, r in results.items():
        # A streamed replay's rows are its windows' iterations up to the crash.
        span = r.frames.iters if r.stored else r.decisions["iter"].to_numpy()
        if not len(span):
            continue
        lo = int(span.min())
        hi = int(r.crash.iter) if r.stored and r.crash is not None else int(span.max())
        need |= {lo, hi}
        skips = list(r.skipped_iters)
        focus = pd.DataFrame({"iter": [lo, hi] + skips,
                              "can_queue": pd.array([True, True] + [False] * len(skips), "boolean")})
        if r.stored:  # the overview and the peak-load window read the whole run, per iteration
            per_iter[name] = stored_per_iteration_active(r)
            focus.attrs[F.PER_ITERATION_ACTIVE] = per_iter[name]
        win = F.windows_for(focus, r.leaks, F.crash_marker(r.crash))
        for a, b in win.segments:
            need.update(range(a, b + 1))
        if r.leak_records:
            need.add(int(r.first_leak.iter_skipped) + 1)
        if r.crash is None and not r.leak_records and r.stored:
            need |= busiest_iterations(r)
    out = {}
    for name, r in results.items():
        if not r.stored:
            out[name] = r
            continue
        out[name] = view = r.at_iterations(need)
        if name in per_iter:
            view.decisions.attrs[F.PER_ITERATION_ACTIVE] = per_iter[name]
    return out


def stored_per_iteration_active(result) -> pd.DataFrame:
    """:func:`figure_data.per_iteration_active` of a streamed result, from one scan of its
    decisions file a row group at a time (an iteration may straddle two row groups)."""
    its, mxs, sums = [], [], []
    for b in result.decision_batches(["iter", "active"]):
        it, mx, sm = _per_iteration(b.column(0).to_numpy(), b.column(1).to_numpy())
        its.append(it), mxs.append(mx), sums.append(sm)
    if not its:
        return F.per_iteration_active(pd.DataFrame())
    it, mx, sm = np.concatenate(its), np.concatenate(mxs), np.concatenate(sums)
    order = np.argsort(it, kind="stable")
    it, mx, sm = it[order], mx[order], sm[order]
    starts = _run_starts(it)
    return pd.DataFrame({"max": np.maximum.reduceat(mx, starts), "sum": np.add.reduceat(sm, starts)},
                        index=it[starts])


def _per_iteration(it: np.ndarray, active: np.ndarray):
    """Per distinct iteration of one row group: (iterations, max, sum) of ``active``."""
    if len(it) and np.any(it[1:] < it[:-1]):
        order = np.argsort(it, kind="stable")
        it, active = it[order], active[order]
    if not len(it):
        return it, active, active
    starts = _run_starts(it)
    return it[starts], np.maximum.reduceat(active, starts), np.add.reduceat(active, starts)


def _run_starts(sorted_values: np.ndarray) -> np.ndarray:
    return np.r_[0, np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1]


def busiest_iterations(result) -> set[int]:
    """Per rank, the first iteration it holds its most active requests (a scan of the file)."""
    best: dict[int, tuple[int, int]] = {}
    for b in result.decision_batches(["iter", "rank", "active"]):
        it, rank, act = (b.column(k).to_numpy() for k in range(3))
        if not len(it):
            continue
        # per rank: its most active requests in this row group, and the first row holding them
        # (ranks are 0 .. tp_size - 1)
        top = np.full(int(rank.max()) + 1, np.iinfo(np.int64).min)
        np.maximum.at(top, rank, act)
        hit = np.flatnonzero(act == top[rank])
        first = np.full(top.size, len(act))
        np.minimum.at(first, rank[hit], hit)
        for i in first[first < len(act)]:
            r, a = int(rank[i]), int(act[i])
            if r not in best or a > best[r][0]:
                best[r] = (a, int(it[i]))
    return {it for _, it in best.values()}


__all__ = ["busiest_iterations", "figure_views", "stored_per_iteration_active"]
