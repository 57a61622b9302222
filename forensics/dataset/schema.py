"""The Parquet layout of a dataset: one pyarrow schema per table, written down once.

This layout is a public contract. Changing a column (name, type or meaning) or the directory
layout bumps ``SCHEMA_VERSION``; ``forensics.load`` reads this major version and, for old
datasets, the 1.x layout (one ``TABLE.parquet`` file per table).

A dataset is a directory with one subdirectory per table, so that any engine reads a table by
path without mixing tables (``pd.read_parquet("DS/iterations")``,
``pyarrow.dataset.dataset("DS/events")``, duckdb ``'DS/stats/*.parquet'``,
``polars.scan_parquet("DS/frames/*.parquet")``, ``dask.dataframe.read_parquet("DS/requests")``)::

    DATASET/
      _meta.json     schema version, tool version, inputs (name, bytes read, their XXH3-128 digest, kind),
                     rows per table, ``files``: every Parquet file of each table, and for the
                     trace tables which run each file holds
      iterations/    part-00000.parquet: one row per executor iteration log line
      events/        part-00000.parquet: one row per typed event (single or multi-line)
      stats/         part-00000.parquet: one row per IterationStats dict
      runs/          run-00000.parquet, run-00001.parquet, ...: one row per trace run record
      frames/        run-NNNNN.parquet: one row per (run, iter, rank) frame
      requests/      run-NNNNN.parquet: one row per request per frame
      unparsed/      part-00000.parquet: every input line no parser claimed, verbatim
      traceback_frames/  part-00000.parquet: every frame of every traceback event
      states/        part-00000.parquet: request-state names, ``state`` -> ``name``
                     (``requests.state`` already holds the name; ``requests.state_value``
                     joins ``states.state``; the names of ``LlmRequestState``)

Names, not codes (2.3): enum-like columns are Arrow dictionaries of names (``requests.state``,
``events.kind``, ``events.severity``, ``iterations.format``; pandas ``category``, polars
``Categorical``, duckdb ``VARCHAR``), the request-state int codes stay in ``requests.state_value``.
Every file's key-value metadata also carries ``pandas`` column dtypes, so ``pd.read_parquet``
and dask give integers and booleans as nullable ``Int64``/``Int32``/``Int16``/``boolean``
(as ``forensics.load`` does) instead of float64 and object where a column has nulls.

The trace tables (``PARTITION_BY``) are partitioned by run: one file per run, numbered in the
order runs first appear, the ``run`` column inside every file (no ``run=`` directory names: an
engine's partition inference would retype run ids). Every table has at least one file (empty
when the table is), so an engine always finds its schema. Row groups hold up to
``ROW_GROUP_ROWS`` rows however many inputs were read. Every file's Parquet key-value metadata
holds ``forensics.table`` and ``forensics.schema_version``.

Line accounting (text inputs): every line of a text input is either the ``line`` of exactly one
row of ``iterations``, ``events``, ``stats``, ``runs``, ``frames`` or ``unparsed``, or lies inside
the ``line``..``line_end`` range of exactly one ``events`` or ``stats`` row (a pretty-printed
IterationStats object spans lines). Lines are 1-based. Exception: ``events`` of the kinds in
``forensics.readers.event_kinds.NOTES`` (``input_truncated``, ``nul_bytes``) mark a place and
claim no line.
"""
from __future__ import annotations

import pyarrow as pa

from forensics.dataset import log_fields

from replay.frame_schema import FRAMES

#: "1.1" added ``frames.postpadded`` (at the end; a 1.0 dataset loads with it null).
#: "2.0" one directory per table, trace tables one file per run, row groups of up to
#:       ROW_GROUP_ROWS rows, table name and schema version in each file's key-value metadata,
#:       the ``states`` table (1.x datasets are still read).
#:       Log lines: ``events.text`` (the event's lines as printed, after the
#: prefixes), new event kinds (``long_line``, ``nul_bytes`` notes outside the line accounting),
#: ``collector``/``collector_time``/``host`` on iterations and events, ``executor_*`` and
#: ``exception_chain`` on events, table ``traceback_frames`` (every frame of a traceback),
#: kinds cuda_device_assert / nccl_timeout / cuda_oom / dist_timeout and their number columns,
#: ``log_time`` / ``iterations.timestamp`` / ``stats.timestamp`` as ``timestamp[us]`` (the
#: logger's local clock) with
#: ``*_text`` beside them keeping a time that does not parse (see forensics.readers.timestamps).
#: "2.1" ``_meta.json`` inputs carry ``xxh3_128`` (hex XXH3-128 of the bytes read) instead of
#:       ``sha256``; the tables are unchanged. A 2.0 dataset is read; as a cache it is never
#:       reused (its digests cannot be compared), so ``as_dataset`` ingests its inputs again.
#: "2.2" added ``frames.kv_precheck_ok`` (at the end; a 2.1 dataset loads with it null, read as
#:       true: the KV-capacity precheck passed or was not made).
#: "2.3" names in the data: ``requests.state`` the state name as a dictionary (the int code
#:       moved to the new ``requests.state_value``), ``events.kind``, ``events.severity``,
#:       ``iterations.format`` dictionaries of names; ``pandas`` dtypes in every file's
#:       key-value metadata. 2.0-2.2 (and 1.x) datasets load in the 2.3 shape
#:       (``forensics.dataset.names.upgrade``).
SCHEMA_VERSION = "2.3"

#: Table names in a fixed order.
TABLES = ("iterations", "events", "stats", "runs", "frames", "requests", "unparsed",
          "traceback_frames", "states")

#: Tables of constant reference data (not read from the inputs; summaries leave them out).
REFERENCE_TABLES = ("states",)

#: Tables written one file per value of this column (the trace tables, by run).
PARTITION_BY: dict[str, str] = {"runs": "run", "frames": "run", "requests": "run"}

#: Rows per Parquet row group (at most; the last of a file holds the rest).
ROW_GROUP_ROWS = 1 << 17

#: The dataset's description (inputs, rows, files, partitions), written last: a directory
#: holding it is a dataset.
META_FILE = "_meta.json"

#: Key-value metadata keys of every Parquet file of a dataset.
META_TABLE_KEY = b"forensics.table"
META_VERSION_KEY = b"forensics.schema_version"

#: What a log line's wrappers said (iterations and events of text logs; null elsewhere).
WRAPPER_FIELDS = [
    pa.field("collector", pa.string()),      # wrappers recognised, "+"-joined: tab kubectl
                                             # journald docker srun mpirun pdsh
    pa.field("collector_time", pa.string()),  # the collector's time for the line, verbatim (its
                                             # own prefix, else a timestamp line just before it)
    pa.field("host", pa.string()),           # pdsh host label
]

#: Column types of the iteration line's fields (:mod:`forensics.dataset.log_fields`).
_FIELD = log_fields.column_types()

_ITERATIONS_LISTED = [
    pa.field("source", pa.string(), nullable=False),       # input file name as given
    pa.field("line", pa.int64(), nullable=False),          # 1-based line in the input
    pa.field("rank", _FIELD["rank"]),                      # global rank; null where the line says none
    pa.field("iter", pa.int64()),
    pa.field("local_rank", _FIELD["local_rank"]),          # the line's `rank = n`
    pa.field("num_scheduled_requests", _FIELD["num_scheduled_requests"]),
    pa.field("host_step_time_ms", _FIELD["host_step_time_ms"]),
    pa.field("prev_device_step_time_ms", _FIELD["prev_device_step_time_ms"]),
    pa.field("elapsed_time_s", _FIELD["elapsed_time_s"]),
    pa.field("timestamp", _FIELD["timestamp"]),            # the line's `timestamp = ...` field (the
                                                           # logger's local clock, no zone)
    pa.field("log_time", pa.timestamp("us")),              # the logger prefix's time (local clock)
    pa.field("kv_cache_util", _FIELD["kv_cache_util"]),
    pa.field("currank_requests", _FIELD["currank_requests"]),  # a of `currank_total_requests = a/b`
    pa.field("total_requests", _FIELD["total_requests"]),  # b
    pa.field("num_ctx_requests", _FIELD["num_ctx_requests"]),  # from the `states` dict
    pa.field("num_ctx_tokens", _FIELD["num_ctx_tokens"]),
    pa.field("num_generation_tokens", _FIELD["num_generation_tokens"]),
    pa.field("adp_dummy_ctx_tokens", _FIELD["adp_dummy_ctx_tokens"]),
    pa.field("adp_dummy_gen_tokens", _FIELD["adp_dummy_gen_tokens"]),
]
ITERATIONS = pa.schema([
    *_ITERATIONS_LISTED,
    # a field added to the table since: its column(s), in the table's order
    *[pa.field(c, t) for c, t in _FIELD.items() if c not in {f.name for f in _ITERATIONS_LISTED}],
    pa.field("format", pa.string()),                       # V1..V5 (log_fields.FORMATS)
    pa.field("extra", pa.map_(pa.string(), pa.string())),  # unknown `name = value` fields and states keys
    *WRAPPER_FIELDS,
    pa.field("timestamp_text", pa.string()),               # `timestamp` verbatim where it did not parse
    pa.field("log_time_text", pa.string()),                # `log_time` verbatim where it did not parse
])

EVENTS = pa.schema([
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("line_end", pa.int64(), nullable=False),      # last line of a multi-line event (== line if one)
    pa.field("rank", pa.int32()),
    pa.field("severity", pa.string()),                     # F E W I V D, or null
    pa.field("kind", pa.string(), nullable=False),         # see forensics.readers.event_kinds
    pa.field("message", pa.string()),
    pa.field("log_time", pa.timestamp("us")),              # logger prefix time (local clock, no zone)
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
    pa.field("text", pa.string()),                         # the event's lines as printed, after
                                                           # the prefixes, joined by "\n"
    *WRAPPER_FIELDS,
    pa.field("executor_file", pa.string()),                # tracebacks: innermost frame inside
    pa.field("executor_line", pa.int64()),                 # tensorrt_llm (the executor frame)
    pa.field("executor_function", pa.string()),
    pa.field("exception_chain", pa.string()),              # chained exceptions, "Type: message"
                                                           # per line, first raised first
    # CUDA / torch.distributed failures (forensics.readers.failure_messages)
    pa.field("cuda_block", pa.string()),                   # device assert: "x,y,z"
    pa.field("cuda_thread", pa.string()),
    pa.field("seq_num", pa.int64()),                       # NCCL watchdog: WorkNCCL fields
    pa.field("op_type", pa.string()),
    pa.field("numel_in", pa.int64()),
    pa.field("numel_out", pa.int64()),
    pa.field("timeout_ms", pa.int64()),                    # NCCL and store timeouts
    pa.field("elapsed_ms", pa.int64()),                    # NCCL: "ran for N milliseconds"
    pa.field("gpu", pa.int32()),                           # CUDA OOM
    pa.field("requested_bytes", pa.int64()),
    pa.field("total_bytes", pa.int64()),
    pa.field("free_bytes", pa.int64()),
    pa.field("clients_joined", pa.int64()),                # store timeout: "a/b clients joined"
    pa.field("clients_expected", pa.int64()),
    pa.field("log_time_text", pa.string()),                # `log_time` verbatim where it did not
                                                           # parse (glog has no year)
])

#: Every frame of every traceback event (``events`` kinds traceback / adp_assert).
TRACEBACK_FRAMES = pa.schema([
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),          # the event's first line (events.line)
    pa.field("chain", pa.int32(), nullable=False),         # 0 = the first traceback of a chain
    pa.field("depth", pa.int32(), nullable=False),         # 0 = outermost frame (printed first)
    pa.field("file", pa.string()),
    pa.field("file_line", pa.int64()),                     # null when absent or too large
    pa.field("function", pa.string()),
    pa.field("code", pa.string()),                         # the source line printed under it
    pa.field("at_line", pa.int64(), nullable=False),       # the input line of the `File` line
])

#: The rows the stats readers build (``timestamp`` as printed); every other numeric field is
#: flattened into `fields` with dotted names (``kvCacheStats.usedNumBlocks``).
STATS_READ = pa.schema([
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

#: `stats` keeps these typed columns: the readers' rows with ``timestamp`` typed (upstream prints
#: ``MM-DD-YYYY HH:MM:SS``, the local clock of the process; ``forensics.readers.timestamps``) and
#: ``timestamp_text`` keeping a time that does not parse (null where it did).
STATS = pa.schema([pa.field("timestamp", pa.timestamp("us")) if f.name == "timestamp" else f
                   for f in STATS_READ] + [pa.field("timestamp_text", pa.string())])

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

# FRAMES (one row per (run, iter, rank) frame) is defined in replay/frame_schema.py, imported
# above: the frames table is the replay's input and the replay imports nothing from forensics.

#: A request state's name: a dictionary over every ``LlmRequestState`` name
#: (``forensics.dataset.names.STATE_NAMES``, codes -> names without per-row work).
STATE_NAME = pa.dictionary(pa.int8(), pa.string())
#: An enum-like string column as stored: a dictionary of the names present.
NAME = pa.dictionary(pa.int32(), pa.string())

REQUESTS = pa.schema([
    pa.field("run", pa.string(), nullable=False),
    pa.field("iter", pa.int64(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("pos", pa.int32(), nullable=False),           # index in active_requests
    pa.field("request_id", pa.int64(), nullable=False),
    pa.field("state", STATE_NAME, nullable=False),         # LlmRequestState name
    pa.field("state_value", pa.int16(), nullable=False),   # LlmRequestState int value
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

#: Enum-like string columns the readers build as strings (the table constants above) and the
#: writer stores as dictionaries of names (:data:`NAME`).
NAMED_COLUMNS: dict[str, tuple[str, ...]] = {"iterations": ("format",),
                                             "events": ("kind", "severity")}


def _named(schema: pa.Schema, columns: tuple[str, ...]) -> pa.Schema:
    for c in columns:
        i = schema.get_field_index(c)
        schema = schema.set(i, schema.field(i).with_type(NAME))
    return schema


#: Every table as stored (written, read, typed empty frames).
SCHEMAS: dict[str, pa.Schema] = {
    "iterations": _named(ITERATIONS, NAMED_COLUMNS["iterations"]),
    "events": _named(EVENTS, NAMED_COLUMNS["events"]),
    "stats": STATS,
    "runs": RUNS,
    "frames": FRAMES,
    "requests": REQUESTS,
    "unparsed": UNPARSED,
    "traceback_frames": TRACEBACK_FRAMES,
    "states": STATES,
}


#: ``requests`` as layouts 1.x-2.2 wrote it: ``state`` the int code, no ``state_value``.
REQUESTS_2_2 = pa.schema([pa.field("state", pa.int16(), nullable=False) if f.name == "state"
                          else f for f in REQUESTS if f.name != "state_value"])

#: Every table as layouts 1.x-2.2 wrote it (codes and plain strings); such a dataset is read
#: with these and upgraded to :data:`SCHEMAS` (``forensics.dataset.names.upgrade``).
SCHEMAS_2_2: dict[str, pa.Schema] = {**SCHEMAS, "iterations": ITERATIONS, "events": EVENTS,
                                     "requests": REQUESTS_2_2}


def states_table() -> pa.Table:
    """The ``states`` table: every ``LlmRequestState`` value and its name."""
    from replay.states import RequestState

    members = sorted(RequestState, key=int)
    return pa.table({"state": pa.array([int(m) for m in members], pa.int16()),
                     "name": pa.array([m.name for m in members], pa.string())}, schema=STATES)


def empty_table(name: str) -> pa.Table:
    """A typed table with no rows."""
    return SCHEMAS[name].empty_table()
