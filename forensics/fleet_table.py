"""Fleet analysis: many runs, one row each, with every policy's leak / crash / near-miss verdict.

:func:`fleet_table` replays each traced run under each policy and tabulates (per policy):

``leak`` (bool)
    some dummy survived a fleet-wide skipped iteration (``ReplayResult.leaks`` is not empty).
``leaks`` (int)
    how many dummies did.
``crash`` (bool), ``crash_iter`` (Int64), ``crash_rank`` (Int64)
    the replay stopped at an entry assert or a failed dummy allocation, and where.
``first_leak_iter`` (Int64)
    the first skipped iteration a dummy survived (``iter_skipped`` of the first leak).
``time_to_first_leak`` (Int64)
    ``first_leak_iter`` minus the run's first replayed iteration: iterations from the start of
    the recording to the first leak.
``near_miss_skips`` (int)
    leaked dummies that did **not** end in a crash: a dummy that survived at least one skipped
    iteration and was then removed, or was still alive when the run ended, or was on a rank that
    did not crash. (A dummy alive on a crashing rank at the crash iteration is the fatal one and
    is not counted.)
``near_miss_cap`` (int)
    (iteration, rank) rows where the rank carried a dummy that survived an earlier iteration
    (``carried_dummy``) and ``active >= cap - 1`` (``active`` counts that dummy; ``cap`` is the
    run's ``max_num_active_requests``, whether or not the policy enforces it), and the rank did
    not crash there: the fleet was within one request of the assert.
``near_miss`` (bool)
    ``near_miss_skips > 0 or near_miss_cap > 0``.
``diverged_iter`` (Int64)
    first iteration where the replay departs from a recorded decision; after it the replay
    answers "what this version decides on the same request mix" (``replay.walk``), so a
    verdict of a policy other than the recording build is a counterfactual.

Configuration columns (one row per run): ``input``, ``run``, ``build`` (the recording build),
``ranks``, ``pp_size``, ``max_batch_size``, ``cap``, ``disaggregated``, ``overlap``,
``iters`` (replayed iterations), ``first_iter``, and from a simulated run's record
(``simulator``) ``scenario``, ``seed`` plus any workload parameters recorded there; a grid from
:func:`simulate_grid` adds its own parameter columns (``burst_size`` ...). An input without a
request-state trace gets a row with a ``note`` and no policy values.

Layouts: ``wide`` (default; one row per run, policy columns named ``"<policy>.<metric>"``) or
``long`` (one row per run and policy, a ``policy`` column, metric columns unprefixed).
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from forensics import cluster
from forensics.errors import ConfigError
from forensics.output_dir import atomic_path
from forensics.readers import as_dataset, on_cluster
from forensics.simulate import get_scenario, simulate
from forensics.version import __version__
from replay.streaming import replay_windows, stream_windows
from replay.walk import run as replay_run
from replay.frames import RunFrames
from replay.resolve import resolve_policies

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Configuration columns, in order (simulator and grid columns follow them).
CONFIG_COLUMNS = ("input", "run", "build", "ranks", "pp_size", "max_batch_size", "cap",
                  "disaggregated", "overlap", "iters", "first_iter")
#: Per-policy metric columns and their pandas dtypes.
METRIC_DTYPES: dict[str, str] = {
    "leak": "boolean", "leaks": "Int64", "crash": "boolean", "crash_iter": "Int64",
    "crash_rank": "Int64", "first_leak_iter": "Int64", "time_to_first_leak": "Int64",
    "near_miss_skips": "Int64", "near_miss_cap": "Int64", "near_miss": "boolean",
    "diverged_iter": "Int64",
}


def run_metrics(result) -> dict[str, Any]:
    """The metrics of one replay (:class:`replay.results.ReplayResult`); definitions in the module
    docstring."""
    crash = result.crash
    # Only the columns and rows needed: a streamed result reads them from its files.
    iters = result.read_decisions(columns=["iter"])["iter"]
    carried = result.read_decisions([("carried_dummy", "==", True)], columns=["active", "crash"])
    ledger = result.read_ledger([("leaked", "==", True)], columns=["iter_removed", "rank"])
    leaks = result.leak_records
    first_iter = int(iters.min()) if len(iters) else None
    first_leak = min((lk.iter_skipped for lk in leaks), default=None)
    crash_ranks = set(crash.ranks) if crash is not None else set()
    leaked = ledger
    fatal = leaked["iter_removed"].isna() & leaked["rank"].isin(crash_ranks) if crash is not None \
        else pd.Series(False, index=leaked.index)
    cap = int(result.config.cap)
    near_cap = (carried["active"].to_numpy() >= cap - 1) & ~carried["crash"].to_numpy(bool)
    skips = int((~fatal).sum())
    ncap = int(near_cap.sum())
    div = result.first_divergence
    return {
        "leak": bool(leaks), "leaks": len(leaks), "crash": crash is not None,
        "crash_iter": None if crash is None else int(crash.iter),
        "crash_rank": None if crash is None else int(crash.rank),
        "first_leak_iter": first_leak,
        "time_to_first_leak": None if first_leak is None or first_iter is None
        else int(first_leak) - first_iter,
        "near_miss_skips": skips, "near_miss_cap": ncap, "near_miss": bool(skips or ncap),
        "diverged_iter": None if div is None else int(div.iter),
    }


def fleet_table(runs: Iterable[PathLike] | PathLike | pd.DataFrame, policies: Sequence[str] | None = None,
                *, cache_dir: PathLike | None = None, layout: str = "wide", client: Any = None,
                done: Callable[[int, int], None] | None = None,
                window: int | None = None) -> pd.DataFrame:
    """One row per traced run (or per run and policy) with leak / crash / near-miss verdicts.

    Args:
        runs: inputs, each one run: a directory of one run's files, a trace file or a dataset
            directory; or a DataFrame with a ``path`` column (e.g. :func:`simulate_grid`'s) whose
            other columns are kept as configuration columns.
        policies: policy specs (default: the whole catalogue).
        cache_dir: where raw inputs are ingested, one subdirectory per input (reused while the
            input is unchanged); default temporary directories.
        layout: ``"wide"`` or ``"long"`` (module docstring).
        client: a ``distributed.Client`` (:func:`forensics.cluster.connect`): each input's
            ingest and replay is one task on the cluster, reading its files where it runs; when
            there are fewer inputs than workers, the files of each input are ingested in
            parallel first. The table is the same as without a client.
        done: called with ``(finished, total)`` after each input (a progress bar).
        window: iterations per replay window; a run longer than one window (or than
            ``replay.streaming.STREAM_MIN_FRAMES`` frames by default) is replayed in windows, in
            bounded memory, with the same verdicts.

    Raises:
        InputError, DatasetError, PolicyError: a bad input or policy name (names the file).
        ValueError: an unknown layout.
    """

    if layout not in ("wide", "long"):
        raise ValueError(f"layout must be 'wide' or 'long', got {layout!r}")
    specs = list(policies) if policies else None
    pols = resolve_policies(specs)  # bad names fail here, before any task is sent
    extra_dtypes: dict[str, Any] = {}
    if isinstance(runs, pd.DataFrame):
        if "path" not in runs.columns:
            raise ValueError("a runs DataFrame needs a 'path' column")
        extra_dtypes = {k: v for k, v in runs.dtypes.items() if k != "path"}
        items = [(str(p), {k: v for k, v in row.items() if k != "path"})
                 for p, (_, row) in zip(runs["path"], runs.iterrows())]
    else:
        if isinstance(runs, (str, os.PathLike)):
            runs = [runs]
        items = [(str(p), {}) for p in runs]
    caches = [None if cache_dir is None else _cache_for(cache_dir, path) for path, _ in items]
    sources: list[str] = [path for path, _ in items]
    held = []  # datasets ingested file by file: kept alive (temporary ones) until replayed
    if client is not None and 0 < len(items) < _worker_count(client):
        for i, (path, _) in enumerate(items):
            if not (Path(path) / "_meta.json").is_file() and Path(path).is_dir():
                ds = on_cluster.as_dataset([path], cache_dir=caches[i], client=client)
                held.append(ds)
                sources[i] = str(ds.path)
    tasks = [(src, path, extra, specs, None if src != path else cache, layout, window)
             for src, (path, extra), cache in zip(sources, items, caches)]
    # On a cluster the largest inputs go first: the last task to start is then a short one
    # (no worker left alone with a long run at the end).
    order = list(range(len(tasks)))
    if client is not None:
        order.sort(key=lambda i: -_input_bytes(sources[i]))
    got = cluster.map_tasks(input_rows, [tasks[i] for i in order], client=client, done=done,
                            key="fleet-run")
    per_input = [None] * len(tasks)
    for i, rows_of in zip(order, got):
        per_input[i] = rows_of
    rows = [row for group in per_input for row in group]
    df = pd.DataFrame(rows)
    for k, dt in extra_dtypes.items():
        if k in df and k not in CONFIG_COLUMNS:
            try:
                df[k] = df[k].astype(dt)
            except (TypeError, ValueError):
                pass
    return _typed(df, [p.name for p in pols], layout)


def input_rows(source: PathLike, label: str, extra: dict[str, Any], policies: Sequence[str] | None,
               cache: PathLike | None, layout: str, window: int | None = None
               ) -> list[dict[str, Any]]:
    """The fleet rows of one input (one per traced run, or per run and policy): ingest, replay
    under every policy, metrics. One task of :func:`fleet_table`; ``label`` is the ``input``
    column, ``source`` what is read (the input itself or a dataset ingested from it). A long
    run is replayed in windows (``replay.streaming.stream_windows``; ``window`` iterations each),
    one policy at a time, in bounded memory."""

    pols = resolve_policies(list(policies) if policies else None)
    ds = as_dataset([source], cache_dir=cache)
    names = ds.traced_runs()
    rows: list[dict[str, Any]] = []
    if not names:
        base = {c: None for c in CONFIG_COLUMNS}
        base.update(input=label, note="no request-state trace: not replayed", **extra)
        return [dict(base, policy=p.name) for p in pols] if layout == "long" else [base]
    for name in names:
        windows = stream_windows(ds, name, window)
        if windows is not None:
            frames = windows
            # Every policy in one pass over the windows; the metrics read a few columns of
            # each policy's files (removed with the results).
            streamed = replay_windows(windows, pols, None, threads=1 if cluster.in_worker_task() else None)
            metrics = {p.name: run_metrics(streamed[p.name]) for p in pols}
            del streamed
        else:
            frames = RunFrames.from_dataset(ds, run=name)
            metrics = {p.name: run_metrics(replay_run(frames, None, p)) for p in pols}
        base = _config_row(label, name, frames, ds)
        base.update(extra)
        base["note"] = None
        if layout == "long":
            rows.extend(dict(base, policy=p, **m) for p, m in metrics.items())
        else:
            for p, m in metrics.items():
                base.update({f"{p}.{k}": v for k, v in m.items()})
            rows.append(base)
    return rows


def fleet(inputs: Iterable[PathLike] | PathLike | pd.DataFrame, policies: Sequence[str] | None = None,
          *, client: Any = None, output: PathLike | None = None, cache_dir: PathLike | None = None,
          layout: str = "wide", done: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """``forensics.fleet(inputs, client=...)``: :func:`fleet_table`, optionally written as Parquet.

    Args:
        output: write the table to this Parquet file as well (atomically).
        client, cache_dir, layout, done: as :func:`fleet_table`.

    Example:
        >>> from forensics.cluster import connect                            # doctest: +SKIP
        >>> with connect(workers=2) as client:                                # doctest: +SKIP
        ...     table = forensics.fleet(["runs/a", "runs/b"], client=client)
    """
    table = fleet_table(inputs, policies, cache_dir=cache_dir, layout=layout, client=client, done=done)
    if output is not None:
        write_parquet(table, output, table_name="fleet")
    return table


def write_parquet(table: pd.DataFrame, path: PathLike, *, table_name: str,
                  meta: dict[str, Any] | None = None) -> Path:
    """Write a result table to one Parquet file atomically, its name (and ``meta`` as JSON) in
    the file's key-value metadata (``forensics.table``, ``forensics.meta``)."""


    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    kv = dict(arrow.schema.metadata or {})
    kv.update({b"forensics.table": table_name.encode(), b"forensics.version": __version__.encode()})
    if meta is not None:
        kv[b"forensics.meta"] = json.dumps(meta, sort_keys=True, default=str).encode()
    arrow = arrow.replace_schema_metadata(kv)
    with atomic_path(out) as tmp:
        pq.write_table(arrow, tmp, compression="zstd")
    return out


def _input_bytes(path: str) -> int:
    """Bytes of an input (every file below a directory): how long its task will take."""
    p = Path(path)
    try:
        if p.is_dir():
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        return p.stat().st_size
    except OSError:
        return 0


def _cache_for(cache_dir: PathLike, path: str) -> Path:
    key = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{Path(path).name}-{key}"


def _worker_count(client: Any) -> int:
    try:
        return len(client.scheduler_info().get("workers", {}))
    except Exception:  # pragma: no cover - an unusual client; no file-level split then
        return 0


def fleet_policies(table: pd.DataFrame) -> list[str]:
    """The policies of a wide :func:`fleet_table`, in column order."""
    return list(dict.fromkeys(c[:-len(".leak")] for c in table.columns if c.endswith(".leak")))


def fleet_failed(table: pd.DataFrame) -> bool:
    """Whether any run of a wide :func:`fleet_table` leaks or crashes under any of its policies."""
    return any(bool(table[f"{p}.leak"].fillna(False).any() or table[f"{p}.crash"].fillna(False).any())
               for p in fleet_policies(table))


def fleet_json(table: pd.DataFrame) -> dict[str, Any]:
    """A wide :func:`fleet_table` as ``{"runs": [{config..., "policies": {NAME: {metric...}}}]}``
    with plain JSON values (missing values as null); what ``forensics fleet --json`` prints."""
    metric_cols = [c for c in table.columns if "." in c and c.rsplit(".", 1)[1] in METRIC_DTYPES]
    config_cols = [c for c in table.columns if c not in metric_cols]
    runs = []
    for _, row in table.iterrows():
        item = {c: plain_value(row[c]) for c in config_cols}
        pols: dict[str, dict[str, Any]] = {}
        for c in metric_cols:
            p, k = c.rsplit(".", 1)
            pols.setdefault(p, {})[k] = plain_value(row[c])
        item["policies"] = pols
        runs.append(item)
    return {"runs": runs}


def plain_value(v: Any) -> Any:
    """A table cell as a plain JSON value: a missing value as None, a NumPy scalar as Python's."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def _config_row(path: str, name: str, frames, ds) -> dict[str, Any]:
    c = frames.config
    row: dict[str, Any] = {
        "input": path, "run": name, "build": c.build or None, "ranks": c.tp_size,
        "pp_size": c.pp_size, "max_batch_size": c.max_batch_size, "cap": c.cap,
        "disaggregated": c.disaggregated, "overlap": c.overlap_scheduler,
        "iters": len(frames.iters), "first_iter": int(frames.iters[0]) if len(frames.iters) else None,
    }
    runs = ds.runs
    rec = runs[runs["run"] == name]
    try:
        full = json.loads(rec["record_json"].iloc[0]) if len(rec) else {}
    except (TypeError, ValueError):
        full = {}
    sim = full.get("simulator") if isinstance(full, dict) else None
    if isinstance(sim, dict):
        for k in ("scenario", "seed"):
            if k in sim:
                row[k] = sim[k]
        wl = sim.get("workload")
        if isinstance(wl, dict):
            row.update({k: v for k, v in wl.items() if isinstance(v, (int, float, str, bool))
                        and k not in row})
    return row


def _typed(df: pd.DataFrame, policies: list[str], layout: str) -> pd.DataFrame:
    """Stable dtypes (nullable where a value can be missing) and column order."""
    for col in ("ranks", "pp_size", "max_batch_size", "cap", "iters", "first_iter"):
        if col in df:
            df[col] = df[col].astype("Int64")
    for col in ("disaggregated", "overlap"):
        if col in df:
            df[col] = df[col].astype("boolean")
    if layout == "long":
        metric_cols = list(METRIC_DTYPES)
        for k, dt in METRIC_DTYPES.items():
            df[k] = (df[k] if k in df else pd.Series(None, index=df.index, dtype=object)).astype(dt)
        df["policy"] = pd.Categorical(df["policy"], categories=policies) if len(df) else \
            pd.Categorical([], categories=policies)
    else:
        metric_cols = [f"{p}.{k}" for p in policies for k in METRIC_DTYPES]
        for p in policies:
            for k, dt in METRIC_DTYPES.items():
                col = f"{p}.{k}"
                df[col] = (df[col] if col in df else pd.Series(None, index=df.index, dtype=object)).astype(dt)
    head = [c for c in CONFIG_COLUMNS if c in df]
    rest = [c for c in df.columns if c not in head and c not in metric_cols and c not in ("policy", "note")]
    order = head + rest + (["policy"] if layout == "long" else []) + metric_cols + ["note"]
    for c in order:
        if c not in df:
            df[c] = None
    return df[order].reset_index(drop=True)


# ---------------------------------------------------------------------- simulated fleets

#: Default grid of :func:`simulate_grid`: 3 x 2 x 2 x 3 = 36 configurations.
DEFAULT_GRID: dict[str, tuple] = {
    "ranks": (4, 8, 16),
    "max_batch_size": (4, 8),
    "overlap": (True, False),
    "burst_size": (0, 16, 32),
}


def simulate_grid(out_dir: PathLike, *, scenario: str = "nvbug-6438685",
                  grid: dict[str, Sequence[Any]] | None = None, policy: str = "prefix-2026",
                  iters: int = 200, seed: int = 0, replicates: int = 1,
                  arrival_per_rank: float | None = None) -> pd.DataFrame:
    """Simulate every combination of ``grid`` on top of a scenario's workload, one run each.

    Each configuration is written to ``out_dir/<NNN>/trace.jsonl`` (trace only: quick to write
    and ingest) by :func:`forensics.simulate.simulate`, recorded under ``policy`` (the build the
    fleet ran). Grid keys are :class:`~forensics.simulate.workload.Workload` fields (``ranks``,
    ``max_batch_size``, ``overlap``, ``burst_size``, ``pp_size``, ``cap``, ...). A
    ``burst_size`` of 0 turns bursts off. The arrival rate scales with the number of ranks
    (``arrival_per_rank``, default the scenario's rate per rank) so that larger fleets are as
    busy per rank. ``replicates`` runs each configuration with seeds ``seed, seed + 1, ...``
    (same configuration, other traffic), so that prevalence per configuration is a share.

    Returns:
        One row per configuration: ``path`` (the run directory, what :func:`fleet_table` takes),
        the grid's parameters, ``seed`` and what the simulation itself saw under ``policy``:
        ``sim_verdict`` (crash / leak / clean), ``sim_crash_iter``, ``sim_leaked_dummies``.

    Raises:
        ConfigError, PolicyError: an unknown scenario, workload field or policy, or bad values.
    """


    sc = get_scenario(scenario)
    base = sc.workload
    grid = dict(DEFAULT_GRID if grid is None else grid)
    fields = {f.name for f in dataclasses.fields(type(base))}
    bad = [k for k in grid if k not in fields]
    if bad:
        raise ConfigError(f"unknown workload field(s) in the grid: {', '.join(bad)}",
                          hint="fields: " + ", ".join(sorted(fields)))
    if replicates < 1:
        raise ConfigError(f"replicates must be at least 1, got {replicates}")
    per_rank = arrival_per_rank if arrival_per_rank is not None else base.arrival_rate / base.ranks
    out = Path(out_dir)
    keys = list(grid)
    rows = []
    combos = itertools.product(*(grid[k] for k in keys))
    for n, (values, rep) in enumerate(itertools.product(combos, range(replicates))):
        params = dict(zip(keys, values))
        workload = grid_workload(base, params, per_rank)
        run_dir = out / f"{n:03d}"
        res = simulate(workload, out_dir=run_dir, policy=policy, iters=iters, seed=seed + rep,
                       write=("trace",))
        s = res.summary
        rows.append({"path": str(run_dir), **params, "seed": seed + rep, "sim_verdict": res.verdict,
                     "sim_crash_iter": s.crash_iter, "sim_leaked_dummies": s.leaked_dummies})
    df = pd.DataFrame(rows)
    if len(df):
        df["sim_crash_iter"] = df["sim_crash_iter"].astype("Int64")
    return df


def grid_workload(base, params: dict[str, Any], arrival_per_rank: float):
    """``base`` (a :class:`~forensics.simulate.workload.Workload`) with one grid point's
    parameters: a ``burst_size`` of 0 turns bursts off, and the arrival rate is
    ``arrival_per_rank`` times the ranks unless the point sets it."""
    changes = dict(params)
    if "burst_size" in changes and not changes["burst_size"]:
        changes["burst_every"] = 0.0
    ranks = int(changes.get("ranks", base.ranks))
    changes.setdefault("arrival_rate", arrival_per_rank * ranks)
    return base.with_overrides(**changes)


def prevalence(table: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] = ("leak", "crash", "near_miss")
               ) -> pd.DataFrame:
    """Share of runs with each metric per configuration group and policy, from a ``long`` table.

    Returns a frame indexed by ``by`` + ``policy`` with one column per metric (0..1) and ``runs``.
    """
    if "policy" not in table:
        raise ValueError("prevalence() needs fleet_table(..., layout='long')")
    keys = list(by) + ["policy"]
    g = table.groupby(keys, observed=True, sort=True)
    out = g[list(metrics)].agg(lambda s: float(np.mean(s.astype("boolean").fillna(False))))
    out["runs"] = g.size()
    return out


__all__ = [
    "CONFIG_COLUMNS",
    "DEFAULT_GRID",
    "fleet",
    "fleet_failed",
    "fleet_json",
    "fleet_policies",
    "fleet_table",
    "grid_workload",
    "input_rows",
    "METRIC_DTYPES",
    "plain_value",
    "prevalence",
    "run_metrics",
    "simulate_grid",
    "write_parquet",
]
