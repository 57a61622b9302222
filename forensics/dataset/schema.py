"""The Parquet layout of a dataset: one pyarrow schema per table, written down once.

This layout is a public contract. Changing a column (name, type or meaning) or the directory
layout bumps ``SCHEMA_VERSION``; ``forensics.load`` reads this major version and, for old
datasets, the 1.x layout (one ``TABLE.parquet`` file per table).

A dataset is a directory with one subdirectory per table, so that any engine reads a table by
path without mixing tables (``pd.read_parquet("DS/iterations")``,
``pyarrow.dataset.dataset("DS/events")``, duckdb ``'DS/stats/*.parquet'``,
``polars.scan_parquet("DS/frames/*.parquet")``, ``dask.dataframe.read_parquet("DS/requests")``)::

    DATASET/
      _meta.json     schema version, tool version, inputs (name, bytes read, their sha256, kind),
                     rows per table, ``files``: every Parquet file of each table, and for the
                     trace tables which run each file holds
      iterations/    part-00000.parquet: one row per executor iteration log line
      events/        part-00000.parquet: one row per typed event (single or multi-line)
      stats/         part-00000.parquet: one row per IterationStats dict
      runs/          run-00000.parquet, run-00001.parquet, ...: one row per trace run record
      frames/        run-NNNNN.parquet: one row per (run, iter, rank) frame
      requests/      run-NNNNN.parquet: one row per request per frame
      unparsed/      part-00000.parquet: every input line no parser claimed, verbatim
      states/        part-00000.parquet: request-state names, ``state`` -> ``name``
                     (join ``requests.state`` on it; the names of ``LlmRequestState``)

The trace tables (``PARTITION_BY``) are partitioned by run: one file per run, numbered in the
order runs first appear, the ``run`` column inside every file (no ``run=`` directory names: an
engine's partition inference would retype run ids). Every table has at least one file (empty
when the table is), so an engine always finds its schema. Row groups hold up to
``ROW_GROUP_ROWS`` rows however many inputs were read. Every file's Parquet key-value metadata
holds ``forensics.table`` and ``forensics.schema_version``.

Line accounting (text inputs): every line of a text input is either the ``line`` of exactly one
row of ``iterations``, ``events``, ``stats``, ``runs``, ``frames`` or ``unparsed``, or lies inside
the ``line``..``line_end`` range of exactly one ``events`` or ``stats`` row (a pretty-printed
IterationStats object spans lines). Lines are 1-based.
"""
from __future__ import annotations

import pyarrow as pa

#: "1.1" added ``frames.postpadded`` (at the end; a 1.0 dataset loads with it null).
#: "2.0" one directory per table, trace tables one file per run, row groups of up to
#:       ROW_GROUP_ROWS rows, table name and schema version in each file's key-value metadata,
#:       the ``states`` table (1.x datasets are still read).
SCHEMA_VERSION = "2.0"

#: Table names in a fixed order.
TABLES = ("iterations", "events", "stats", "runs", "frames", "requests", "unparsed", "states")

#: Tables of constant reference data (not read from the inputs; summaries leave them out).
REFERENCE_TABLES = ("states",)

#: Tables written one file per value of this column (the trace tables, by run).
PARTITION_BY: dict[str, str] = {"runs": "run", "frames": "run", "requests": "run"}

#: Rows per Parquet row group (at most; the last of a file holds the rest).
ROW_GROUP_ROWS = 1 << 17

#: Key-value metadata keys of every Parquet file of a dataset.
META_TABLE_KEY = b"forensics.table"
META_VERSION_KEY = b"forensics.schema_version"

ITERATIONS = pa.schema([
    pa.field("source", pa.string(), nullable=False),       # input file name as given
    pa.field("line", pa.int64(), nullable=False),          # 1-based line in the input
    pa.field("rank", pa.int32()),                          # global rank; null where the line says none
    pa.field("iter", pa.int64()),
    pa.field("local_rank", pa.int32()),                    # the line's `rank = n`
    pa.field("num_scheduled_requests", pa.int32()),
    pa.field("host_step_time_ms", pa.float64()),
    pa.field("prev_device_step_time_ms", pa.float64()),
    pa.field("elapsed_time_s", pa.float64()),
    pa.field("timestamp", pa.string()),                    # the line's `timestamp = ...` field, verbatim
    pa.field("log_time", pa.string()),                     # the logger prefix's [MM/DD/YYYY-HH:MM:SS]
    pa.field("kv_cache_util", pa.float64()),
    pa.field("currank_requests", pa.int64()),              # a of `currank_total_requests = a/b`
    pa.field("total_requests", pa.int64()),                # b
    pa.field("num_ctx_requests", pa.int64()),              # from the `states` dict
    pa.field("num_ctx_tokens", pa.int64()),
    pa.field("num_generation_tokens", pa.int64()),
    pa.field("adp_dummy_ctx_tokens", pa.int64()),
    pa.field("adp_dummy_gen_tokens", pa.int64()),
    pa.field("format", pa.string()),                       # V1..V5
    pa.field("extra", pa.map_(pa.string(), pa.string())),  # unknown `name = value` fields and states keys
])

EVENTS = pa.schema([
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("line_end", pa.int64(), nullable=False),      # last line of a multi-line event (== line if one)
    pa.field("rank", pa.int32()),
    pa.field("severity", pa.string()),                     # F E W I V D, or null
    pa.field("kind", pa.string(), nullable=False),         # see forensics.ingest.event_kinds
    pa.field("message", pa.string()),
    pa.field("log_time", pa.string()),
    pa.field("exception_type", pa.string()),               # tracebacks
    pa.field("innermost_file", pa.string()),
    pa.field("innermost_line", pa.int64()),
    pa.field("innermost_function", pa.string()),
    pa.field("iter", pa.int64()),                          # where the message names one
    pa.field("num_active", pa.int64()),                    # surplus warning: active_requests (N)
    pa.field("num_expected", pa.int64()),                  # surplus warning: expected (M)
    pa.field("request_id", pa.int64()),
    pa.field("num_fetch_requests", pa.int64()),
    pa.field("num_schedulable_requests", pa.int64()),
    pa.field("error_count", pa.int64()),
    pa.field("version", pa.string()),                      # version banner
])

#: `stats` keeps these typed columns; every other numeric field is flattened into `fields`
#: with dotted names (``kvCacheStats.usedNumBlocks``).
STATS = pa.schema([
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),          # JSON Lines: its line; array: line of the object start
    pa.field("line_end", pa.int64(), nullable=False),      # last line of the object (== line for JSON Lines)
    pa.field("iter", pa.int64()),
    pa.field("rank", pa.int32()),                          # attentionDpRank, null when absent
    pa.field("timestamp", pa.string()),
    pa.field("num_active_requests", pa.int64()),
    pa.field("num_queued_requests", pa.int64()),
    pa.field("num_completed_requests", pa.int64()),
    pa.field("max_num_active_requests", pa.int64()),
    pa.field("num_context_requests", pa.int64()),
    pa.field("num_gen_requests", pa.int64()),
    pa.field("num_scheduled_requests", pa.int64()),
    pa.field("num_paused_requests", pa.int64()),
    pa.field("num_ctx_tokens", pa.int64()),
    pa.field("iter_latency_ms", pa.float64()),
    pa.field("host_step_time_ms", pa.float64()),
    pa.field("prev_device_step_time_ms", pa.float64()),
    pa.field("fields", pa.map_(pa.string(), pa.float64())),
])

RUNS = pa.schema([
    pa.field("run", pa.string(), nullable=False),          # run_id of the record, else the source
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("tp_size", pa.int32(), nullable=False),
    pa.field("pp_size", pa.int32(), nullable=False),
    pa.field("max_batch_size", pa.int32(), nullable=False),
    pa.field("max_num_active_requests", pa.int32(), nullable=False),
    pa.field("disaggregated", pa.bool_(), nullable=False),
    pa.field("overlap_scheduler", pa.bool_(), nullable=False),
    pa.field("encoder_decoder", pa.bool_(), nullable=False),
    pa.field("build", pa.string()),
    pa.field("record_json", pa.string(), nullable=False),  # the whole run record, verbatim JSON
])

FRAMES = pa.schema([
    pa.field("run", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("iter", pa.int64(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("num_requests", pa.int32(), nullable=False),  # len(active_requests), dummies included
    pa.field("num_dummies", pa.int32(), nullable=False),
    pa.field("expected", pa.int64()),                      # recorded decisions, null when absent
    pa.field("padded", pa.bool_()),
    pa.field("scheduled", pa.int64()),
    pa.field("can_queue", pa.bool_()),
    pa.field("alloc_ok", pa.bool_()),                      # false: add_dummy_requests would return None
    pa.field("postpadded", pa.bool_()),                    # dummy appended after scheduling
                                                           # (PR #17379); null: unknown
])

REQUESTS = pa.schema([
    pa.field("run", pa.string(), nullable=False),
    pa.field("iter", pa.int64(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("pos", pa.int32(), nullable=False),           # index in active_requests
    pa.field("request_id", pa.int64(), nullable=False),
    pa.field("state", pa.int16(), nullable=False),         # LlmRequestState int value
    pa.field("dummy", pa.bool_(), nullable=False),
])

UNPARSED = pa.schema([
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("text", pa.string(), nullable=False),         # verbatim (invalid UTF-8 replaced)
])

STATES = pa.schema([
    pa.field("state", pa.int16(), nullable=False),         # LlmRequestState int value
    pa.field("name", pa.string(), nullable=False),         # its name (GENERATION_IN_PROGRESS, ...)
])

SCHEMAS: dict[str, pa.Schema] = {
    "iterations": ITERATIONS,
    "events": EVENTS,
    "stats": STATS,
    "runs": RUNS,
    "frames": FRAMES,
    "requests": REQUESTS,
    "unparsed": UNPARSED,
    "states": STATES,
}


def states_table() -> pa.Table:
    """The ``states`` table: every ``LlmRequestState`` value and its name."""
    from replay.states import RequestState

    members = sorted(RequestState, key=int)
    return pa.table({"state": pa.array([int(m) for m in members], pa.int16()),
                     "name": pa.array([m.name for m in members], pa.string())}, schema=STATES)


def empty_table(name: str) -> pa.Table:
    """A typed table with no rows."""
    return SCHEMAS[name].empty_table()
