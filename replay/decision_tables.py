"""A replay's decisions and dummy ledger as tables, built from the walk's ``(I, R)`` arrays.

Both forms of the decisions come from one set of column arrays (:func:`decision_columns`): a
DataFrame (:func:`decisions_frame`, an in-memory replay) and an Arrow table of the same schema
(:func:`decisions_arrow`, what a streamed replay writes to Parquet). The ledger pairs each
dummy's creation with its removal (:func:`ledger_table`); a leaked dummy's record is
:func:`leak_record`. Columns: ``replay.results``.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from replay.frames import RunFrames
from replay.results import DECISION_COLUMNS, Leak
from replay.states import RequestState
from replay.step import EXPECTED_SOURCE_NAMES, REMOVAL_PATH_NAMES


@functools.cache
def _categories(names: tuple) -> pd.CategoricalDtype:
    """The categorical dtype of ``names`` (None left out), built once: building and validating
    it costs about 1 ms per column, a third of a small replay's CPU (measured on the bundled
    sample: 10 policies, 3 categorical columns in each table)."""
    return pd.CategoricalDtype([x for x in names if x is not None])


def _cat(codes: np.ndarray, names: tuple) -> pd.Categorical:
    c = np.asarray(codes, np.int64).ravel()
    if None in names:
        c = c - 1  # code 0 (None) becomes -1 (missing)
    return pd.Categorical.from_codes(c, dtype=_categories(names))


def _nullable(values: np.ndarray, mask: np.ndarray, dtype: str) -> pd.arrays.ExtensionArray:
    return pd.array(values.ravel(), dtype=dtype) if not mask.any() else \
        pd.arrays.BooleanArray(values.ravel().astype(bool), mask.ravel()) if dtype == "boolean" else \
        pd.arrays.IntegerArray(values.ravel().astype(np.int64), mask.ravel())


def decision_columns(frames, o, st, n, stopped, crashed_row, removed, alive_at_stop) -> dict:
    """The decisions table's columns as arrays, one entry per column in
    ``DECISION_COLUMNS`` order: ``("plain", values)``, ``("cat", codes, names)`` (code 0 is
    missing when ``names[0]`` is None) or ``(dtype, values, mask)`` for the nullable ``Int64`` and
    ``boolean`` columns. Both forms of the table are built from these (:func:`decisions_frame`,
    :func:`decisions_arrow`)."""
    R = frames.num_ranks
    stop_mask = np.broadcast_to(stopped[:, None], (n, R))
    # pad_role codes 0 none, 1 context, 2 generation, from 0/1 masks (two np.where cost ~0.1 ms
    # a window's walk, measured)
    role = (o["padded"].astype(np.int8) * np.int8(2)
            - (o["padded"] & o["role_context"]).astype(np.int8))
    alive = o["survives"].copy()
    alive[-1] = alive_at_stop if stopped[-1] else alive[-1]
    iters, ranks = frames.decision_rows(n)
    return {
        "iter": ("plain", iters),
        "rank": ("plain", ranks),
        "active": ("plain", o["active"].ravel()),
        "real": ("plain", frames.n_real[:n].ravel()),
        "schedulable": ("plain", st.schedulable[:n].ravel()),
        "window_real": ("plain", frames.window_real[:n].ravel()),
        "expected": ("plain", o["expected"].ravel()),
        "expected_source": ("cat", o["expected_source"], EXPECTED_SOURCE_NAMES),
        "carried_dummy": ("plain", st.carried[:n].ravel()),
        "carried_last": ("plain", st.carried_last[:n].ravel()),
        "padded": ("plain", o["padded"].ravel()),
        "pad_role": ("cat", role, (None, "context", "generation")),
        "alloc_failed": ("plain", o["alloc_failed"].ravel()),
        "postpadded": ("plain", o["postpadded"].ravel()),
        "batch": ("Int64", o["batch"], crashed_row),
        "can_queue": ("boolean", o["can_queue"], stop_mask),
        "can_queue_this_rank": ("boolean", o["can_queue_this_rank"], stop_mask),
        "processed_prev": ("boolean", o["processed_prev"], stop_mask),
        "surplus": ("plain", o["surplus"].ravel() | (o["crash"] & (o["crash_kind"] == 1)).ravel()),
        "crash": ("plain", o["crash"].ravel()),
        "removed_path": ("cat", removed, REMOVAL_PATH_NAMES),
        "dummy_alive": ("plain", alive.ravel()),
    }


def decisions_frame(cols: dict) -> pd.DataFrame:
    out = {}
    for name, (kind, *rest) in cols.items():
        if kind == "plain":
            out[name] = rest[0]
        elif kind == "cat":
            out[name] = _cat(*rest)
        else:
            out[name] = _nullable(rest[0], rest[1], kind)
    return pd.DataFrame(out)


def decisions_arrow(cols: dict):
    """The decisions as an Arrow table of the schema ``pa.Table.from_pandas`` gives
    :func:`decisions_frame` (pandas metadata included, so it reads back as the same
    DataFrame), built from the arrays without a DataFrame: a streamed replay writes every
    decision of a long run (measured on a dataset of 32 ranks x 20k iterations: the post-mortem
    0.7 s CPU less, about 6 %)."""
    import pyarrow as pa
    schema = _decisions_schema(cols)
    arrays = []
    for field, (kind, *rest) in zip(schema, cols.values()):
        if kind == "plain":
            arrays.append(pa.array(np.ascontiguousarray(rest[0]), type=field.type))
        elif kind == "cat":
            codes, names = rest
            c = np.asarray(codes).ravel().astype(np.int8, copy=False)   # a few names
            if None in names:
                c = c - np.int8(1)
            idx = pa.array(c, mask=c < 0 if None in names else None, type=field.type.index_type)
            arrays.append(pa.DictionaryArray.from_arrays(
                idx, pa.array([x for x in names if x is not None], type=field.type.value_type)))
        else:
            values, mask = rest[0].ravel(), rest[1].ravel()
            arrays.append(pa.array(values.astype(bool if kind == "boolean" else np.int64),
                                   mask=mask if mask.any() else None, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _decisions_schema(cols: dict):
    """The Arrow schema (pandas metadata included) that ``pa.Table.from_pandas`` gives the
    frame of ``cols``, from an empty frame of the same dtypes (one per set of dtypes), with
    the columns that cannot hold a missing value (plain arrays, categories without None) not
    nullable: Parquet then writes no definition level per value (measured on 3.2 M decisions
    of fleet-1h 32x100k: writing 156 -> 124 ns a row); they read back as the same DataFrame."""
    import pyarrow as pa
    key = tuple((name, kind, rest[0].dtype.str) for name, (kind, *rest) in cols.items())
    schema = _SCHEMAS.get(key)
    if schema is None:
        empty = {name: (kind, *(x[:0] if isinstance(x, np.ndarray) else x for x in rest))
                 for name, (kind, *rest) in cols.items()}
        schema = pa.Table.from_pandas(decisions_frame(empty), preserve_index=False).schema
        for i, (kind, *rest) in enumerate(cols.values()):
            if kind == "plain" or (kind == "cat" and None not in rest[1]):
                schema = schema.set(i, schema.field(i).with_nullable(False))
        _SCHEMAS[key] = schema
    return schema


_SCHEMAS: dict = {}


@functools.lru_cache(maxsize=1)
def empty_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Empty decisions and ledger tables, built once (categoricals are slow to build and every
    policy's stream starts from a copy)."""
    return empty_decisions(), ledger_frame([], [], [], [], [], [], [], [], [])


def empty_decisions() -> pd.DataFrame:
    return pd.DataFrame({c: [] for c in DECISION_COLUMNS})


def ledger_frame(seq, rank, created, origin, role, iter_removed, path, skips, leaked) -> pd.DataFrame:
    return pd.DataFrame({
        "dummy": np.asarray(seq, np.int64),
        "rank": np.asarray(rank, np.int64),
        "iter_created": np.asarray(created, np.int64),
        "origin": pd.Categorical(origin, dtype=_categories(("pad", "postpad"))),
        "role": pd.Categorical(role, dtype=_categories(("context", "generation"))),
        "iter_removed": pd.array(iter_removed, dtype="Int64"),
        "removal_path": pd.Categorical(path, dtype=_categories(REMOVAL_PATH_NAMES)),
        "skips_survived": np.asarray(skips, np.int64),
        "leaked": np.asarray(leaked, bool),
    })


def ledger_table(frames, o, st, n, survives, removed, crashed_row):
    iters = frames.iters[:n]
    new = o["padded"] | o["postpadded"]
    ci, cr = np.nonzero(new)                          # row-major: ordered by (iter, rank)
    ri, rr = np.nonzero(removed)
    stride = n + 1
    ckey = cr.astype(np.int64) * stride + ci
    rkey_order = np.argsort(rr.astype(np.int64) * stride + ri, kind="stable")
    rkey = (rr.astype(np.int64) * stride + ri)[rkey_order]
    pos = np.searchsorted(rkey, ckey, side="left")
    pos_c = np.minimum(pos, max(rkey.size - 1, 0))
    has_rm = (pos < rkey.size) & (rkey[pos_c] // stride == cr) if rkey.size else np.zeros(ci.size, bool)
    rm_row = np.where(has_rm, rkey[pos_c] % stride if rkey.size else 0, -1)
    cs = np.cumsum(survives, axis=0)
    end_row = np.where(has_rm, rm_row, n - 1)
    skips = cs[end_row, cr] - np.where(ci > 0, cs[np.maximum(ci - 1, 0), cr], 0)
    leaked = skips > 0
    # The categorical and nullable columns from codes, not from Python lists of names.
    context = o["role_context"][ci, cr] & o["padded"][ci, cr]
    origin = _cat(o["postpadded"][ci, cr], ("pad", "postpad"))
    role = _cat(~context, ("context", "generation"))
    path = _cat(np.where(has_rm, removed[rm_row, cr], 0), REMOVAL_PATH_NAMES)
    iter_removed = pd.arrays.IntegerArray(np.where(has_rm, iters[rm_row], 0).astype(np.int64),
                                          ~has_rm)
    ledger = ledger_frame(np.arange(ci.size), cr, iters[ci], origin, role, iter_removed, path,
                           skips, leaked)
    leaks = [leak_record(frames, o, int(ci[d]), int(cr[d]), "context" if context[d] else "generation",
                   int(d))
             for d in np.flatnonzero(leaked)]
    return ledger, leaks


def leak_record(frames: RunFrames, o: dict, row: int, rank: int, role: str, dummy: int) -> Leak:
    """The leak of the dummy created at ``row`` on ``rank``: a dummy not removed at its creation
    row survived it, so that row is its first skip; the cause ranks offered batch 0 there."""
    cause = tuple(int(r) for r in np.flatnonzero(o["batch"][row] == 0))
    states = {c: tuple((rid, RequestState(s).name) for rid, s in frames.requests_of(row, c))
              for c in cause}
    it = int(frames.iters[row])
    return Leak(rank=rank, iter_created=it, iter_skipped=it, cause_ranks=cause, cause_states=states,
                role=role, dummy=dummy)


__all__ = ["decision_columns", "decisions_arrow", "decisions_frame",
           "empty_decisions", "empty_tables", "leak_record", "ledger_frame", "ledger_table"]
