"""Reconstruction from iteration log lines alone: batch sizes and ``can_queue`` per iteration.

Iteration lines are printed at the top of the next loop, so a line's ``iter`` is one more than
the stats ``iter`` of the body it describes (domain doc §8). This module reports the **body
iteration** (``iter = line iter - 1``, the trace's and the stats' numbering) and keeps the
line's own value in ``log_iter``.

Columns (``LOG_STATE_COLUMNS``), one row per (iter, rank) for every iteration some rank logged
and every rank in ``[0, tp_size)``:

    iter            the body iteration (stats/trace numbering)
    log_iter        the iteration line's own ``iter``
    rank            the rank (global rank of the line, else its ``rank = n`` field)
    batch           num_scheduled_requests where that rank logged the body, else NA
    known_ranks     ranks of the iteration with a known batch
    can_queue       'true' when every rank is known and none is 0, 'false' when a known batch
                    is 0 (one zero is enough), 'unknown' otherwise
    source, line    where the batch came from (NA when the rank did not log)

``num_scheduled_requests`` counts dummies like real requests (what ``_can_queue`` all-gathers).
By default only rank 0 prints iteration lines, so ``can_queue`` is mostly 'unknown' unless a
zero shows up or ``TLLM_PROFILE_LOG_RANKS=all`` was set.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

LOG_STATE_COLUMNS = ("iter", "log_iter", "rank", "batch", "known_ranks", "can_queue", "source", "line")


def log_state(source: Any, tp_size: int | None = None) -> pd.DataFrame:
    """Batch size per rank and ``can_queue`` per iteration from iteration lines.

    Args:
        source: a loaded dataset or its ``iterations`` DataFrame.
        tp_size: attention-DP ranks; default the largest rank seen + 1 (a guess: ranks that never
            log are then not counted, which is why a run record's ``tp_size`` is better).
    """
    df, R = logged_batches(source, tp_size)
    if df.empty:
        return pd.DataFrame({c: [] for c in LOG_STATE_COLUMNS})
    iters = np.sort(df["log_iter"].unique().astype(np.int64))
    # The (iteration, rank) grid built by position, not by a merge: a fleet hour where rank 0
    # logs is 100k lines but a 3.2M-row grid, and a merge of nullable columns peaks at several
    # times the result.
    row = np.searchsorted(iters, df["log_iter"].to_numpy(np.int64))
    at = np.full(iters.size * R, -1, np.int64)
    at[row * R + df["rank"].to_numpy(np.int64)] = np.arange(len(df))
    out = pd.DataFrame({"log_iter": pd.array(np.repeat(iters, R), dtype="Int64"),
                        "rank": pd.array(np.tile(np.arange(R, dtype=np.int64), iters.size),
                                         dtype="Int64")})
    for c in ("batch", "source", "line"):
        out[c] = df[c].array.take(at, allow_fill=True)
    out["iter"] = out["log_iter"] - 1
    batch = df["batch"].to_numpy(np.int64)
    known = np.repeat(np.bincount(row, minlength=iters.size), R).astype("int64")
    zero = np.repeat(np.bincount(row, weights=batch == 0, minlength=iters.size) > 0, R)
    out["known_ranks"] = known
    out["can_queue"] = _words(np.where(zero, 0, np.where(known == R, 1, 2)).astype(np.int8),
                              ("false", "true", "unknown"))
    return out[list(LOG_STATE_COLUMNS)].reset_index(drop=True)


def logged_batches(source: Any, tp_size: int | None = None) -> tuple[pd.DataFrame, int]:
    """The logged batches :func:`log_state` is built from, without its (iteration x rank) grid.

    Returns ``(lines, R)``: one row per (``log_iter``, ``rank``) that logged a batch (columns
    ``log_iter``, ``rank``, ``batch``, ``source``, ``line``; sorted by ``log_iter`` and
    ``rank``; a line logged twice keeps the first), and the number of ranks ``R`` of the grid
    (``tp_size``, else the largest rank seen + 1). Per-iteration aggregates need only these
    rows: the grid of a fleet hour where rank 0 logs is 32 times as many.
    """
    it = source if isinstance(source, pd.DataFrame) else source.iterations
    rank = it["rank"].astype("Int64")
    if "local_rank" in it:
        rank = rank.fillna(it["local_rank"].astype("Int64"))
    df = pd.DataFrame({"log_iter": it["iter"].astype("Int64"), "rank": rank,
                       "batch": it["num_scheduled_requests"].astype("Int64"),
                       "source": it["source"], "line": it["line"].astype("Int64")})
    df = df[df["log_iter"].notna() & df["rank"].notna() & df["batch"].notna()]
    if df.empty:
        return df, int(tp_size) if tp_size is not None else 0
    R = int(tp_size) if tp_size is not None else int(df["rank"].max()) + 1
    df = df[(df["rank"] >= 0) & (df["rank"] < R)]
    # A line logged twice (restart, duplicated file): keep the first.
    df = df.sort_values(["log_iter", "rank", "source", "line"]).drop_duplicates(["log_iter", "rank"])
    return df, R


def _words(codes: np.ndarray, words: tuple[str, ...]):
    """``np.array(words)[codes]`` as the default string column, without a numpy string array
    (28 bytes a row) and a per-row Python string on the way."""
    dtype = pd.Series(["x"]).dtype
    if getattr(dtype, "storage", None) != "pyarrow":
        return np.array(words)[codes]
    import pyarrow as pa
    arr = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(list(words))).cast(pa.large_string())
    return pd.array(arr, dtype=dtype)


__all__ = ["LOG_STATE_COLUMNS", "log_state", "logged_batches"]
