"""The decisions a report's figures draw: each replay result cut to the iterations its figures show."""
from __future__ import annotations

from typing import Optional, Sequence

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
            per_iter[name] = _per_iteration_active(r)
            focus.attrs[F.PER_ITERATION_ACTIVE] = per_iter[name]
        win = F.windows_for(focus, r.leaks, F.crash_marker(r.crash))
        for a, b in win.segments:
            need.update(range(a, b + 1))
        if r.leak_records:
            need.add(int(r.first_leak.iter_skipped) + 1)
        if r.crash is None and not r.leak_records and r.stored:
            need |= _busiest_iterations(r)
    out = {}
    for name, r in results.items():
        if not r.stored:
            out[name] = r
            continue
        out[name] = view = r.at_iterations(need)
        if name in per_iter:
            view.decisions.attrs[F.PER_ITERATION_ACTIVE] = per_iter[name]
    return out


def _per_iteration_active(result) -> pd.DataFrame:
    """:func:`figure_data.per_iteration_active` of a streamed result, a row group at a time."""
    parts = [F.per_iteration_active(df) for df in result._files["decisions"].frames(["iter", "active"])]
    if not parts:
        return F.per_iteration_active(pd.DataFrame())
    both = pd.concat(parts)   # an iteration may straddle two batches
    return pd.DataFrame({"max": both["max"].groupby(level=0).max(),
                         "sum": both["sum"].groupby(level=0).sum()}).sort_index()


def _busiest_iterations(result) -> set[int]:
    """Per rank, the first iteration it holds its most active requests (a scan of the file)."""
    best: dict[int, tuple[int, int]] = {}
    for df in result._files["decisions"].frames(["iter", "rank", "active"]):
        top = df.loc[df.groupby("rank")["active"].idxmax()]
        for it, rank, act in zip(top["iter"], top["rank"], top["active"]):
            if int(rank) not in best or int(act) > best[int(rank)][0]:
                best[int(rank)] = (int(act), int(it))
    return {it for _, it in best.values()}


__all__ = ["figure_views"]
