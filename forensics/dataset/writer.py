"""Writing datasets: streamed Parquet writes swapped in atomically.

A writer takes an advisory lock beside the target (``.NAME.lock``, ``fcntl.flock``: a second
writer fails at once with a clear message, or waits ``wait`` seconds), removes what dead writers
left (``.NAME.tmp-*`` directories), fills a new hidden temporary directory beside the target and,
once every table is closed, swaps it in with one ``renameat2(RENAME_EXCHANGE)`` (Linux): at every
instant ``NAME`` is the complete old dataset or the complete new one. Where the exchange is not
available (another OS, a file system without it) the old dataset is first renamed to
``.NAME.old-PID`` and the new one renamed into place; a kill between the two renames leaves the
old dataset there, and the next writer, or a reader, puts it back. The lock, the exchange and
that recovery are :mod:`forensics.dataset.swap`.

The layout (one directory per table, trace tables one file per run) is described in
:mod:`forensics.dataset.schema`; reading is :mod:`forensics.dataset.tables` (Arrow) and
:mod:`forensics.dataset.store` (pandas). An ingest imports this module and the Arrow reader
only: neither pandas nor ``pyarrow.dataset``.
"""
from __future__ import annotations

import base64
import collections
import concurrent.futures
import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.dataset.schema import (
    META_FILE,
    META_TABLE_KEY,
    META_VERSION_KEY,
    PARTITION_BY,
    ROW_GROUP_ROWS,
    SCHEMA_VERSION,
    SCHEMAS,
    TABLES,
    states_table,
)
from forensics.dataset.swap import WriteLock, exchange, recover
from forensics.dataset.tables import ArrowDataset
from forensics.errors import DatasetError, EnvironmentFault
from replay.stage_clock import CLOCK

logger = logging.getLogger(__name__)

#: Buffered bytes of one table's rows that force a write before ``ROW_GROUP_ROWS`` rows.
ROW_GROUP_BYTES = 64 << 20

#: Parquet files a writer keeps open at once (each run has three).
MAX_OPEN_FILES = 48


#: Row-group writes a writer's encoding thread may have queued before its caller waits.
PENDING_WRITES = 2


def _fault(e: OSError, path: Path) -> EnvironmentFault:
    return EnvironmentFault.from_os_error(e, path=str(path), name_path=True)


class _Encoder:
    """The one thread that encodes, compresses and writes a writer's Parquet files, in the
    order handed to it, while its caller goes on reading: an ingest reads a trace on one
    thread and the IterationStats on another, and the trace's Parquet writing (a third of its
    CPU, measured at 32 ranks x 100k iterations) then runs on whichever core is free. Arrow
    encodes without the GIL. At most ``PENDING_WRITES`` writes wait, so memory stays bounded;
    the first error is raised to the caller at its next hand-off or at :meth:`drain`, and the
    writes after it are skipped."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: collections.deque[concurrent.futures.Future] = collections.deque()

    def submit(self, fn: Callable[[], None]) -> None:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="parquet")
        while len(self._pending) >= PENDING_WRITES:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(_timed, fn))

    def drain(self) -> None:
        """Wait for every write handed over; raise the first one's error."""
        while self._pending:
            self._pending.popleft().result()

    def stop(self) -> None:
        """Drop the writes not started, wait for the running one, ignore errors (an abort)."""
        for f in self._pending:
            f.cancel()
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _timed(fn: Callable[[], None]) -> None:
    with CLOCK.stage("dataset write"):
        fn()


class _TableFile:
    """One Parquet file of a table: rows buffered into row groups of ``ROW_GROUP_ROWS``,
    written by the dataset writer's :class:`_Encoder` (every call on ``writer`` runs there)."""

    def __init__(self, path: Path, table: str, encoder: _Encoder, part: Any = None):
        self.path = path
        self.table = table
        self.encoder = encoder
        self.schema = _file_schema(table)
        #: The value of the partition column in every row of the file (a string), written as a
        #: one-value dictionary (:func:`_one_value`); None: the column is written as it is.
        self.constant = part if isinstance(part, str) and _constant_column(self.schema, table) \
            is not None else None
        self.writer: pq.ParquetWriter | None = None
        self.buffer: list[pa.Table] = []
        self.rows = 0
        self.bytes = 0
        self.adopted = False    # a finished file moved in (DatasetWriter.adopt): nothing to write

    def add(self, data: pa.Table) -> None:
        self.buffer.append(data)
        self.rows += data.num_rows
        self.bytes += data.nbytes
        if self.rows >= ROW_GROUP_ROWS or self.bytes >= ROW_GROUP_BYTES:
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if not self.buffer:
            return
        data = pa.concat_tables(self.buffer).replace_schema_metadata(self.schema.metadata)
        self.buffer.clear()
        whole = (data.num_rows // ROW_GROUP_ROWS) * ROW_GROUP_ROWS
        if final or self.bytes >= ROW_GROUP_BYTES:
            whole = data.num_rows
        if whole:
            self.encoder.submit(lambda: self._write(data.slice(0, whole)))
        rest = data.slice(whole)
        self.buffer = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.bytes = rest.nbytes if rest.num_rows else 0

    def _write(self, data: pa.Table) -> None:
        if self.writer is None:
            codec = CODECS.get(self.table, "zstd")
            schema, options = self.schema, {}
            if self.constant is not None:
                schema, options = _one_value_schema(self.schema, self.table), {"store_schema": False}
            # write_batch_size: a row group's values reach the column writers at once, not
            # 1024 at a time (measured at 32x100k: stats 336 -> 307 ns a row written,
            # requests 36 -> 33, frames 94 -> 92)
            self.writer = pq.ParquetWriter(self.path, schema, compression=codec,
                                           compression_level=ZSTD_LEVELS.get(self.table)
                                           if codec == "zstd" else None,
                                           use_dictionary=_dictionary_columns(self.schema),
                                           column_encoding=_delta_columns(self.table, self.schema),
                                           write_statistics=_statistics_columns(self.schema),
                                           write_batch_size=ROW_GROUP_ROWS, **options)
        if self.constant is not None:
            data = _one_value(data, self.table, self.constant)
        self.writer.write_table(data, row_group_size=ROW_GROUP_ROWS)

    def close(self) -> None:
        if self.adopted:
            return
        self.flush(final=True)
        self.encoder.submit(self._close)

    def _close(self) -> None:
        if self.writer is None:
            pq.write_table(self.schema.empty_table(), self.path, compression="zstd")
        else:
            if self.constant is not None:   # the key-value metadata store_schema writes
                self.writer.add_key_value_metadata(_stored_metadata(self.schema))
            self.writer.close()
            self.writer = None

    def abort(self) -> None:
        """After the encoder has stopped: close what it left open."""
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None
        self.buffer.clear()


#: zstd levels other than the default (1) by table. ``iterations`` is mostly measured times
#: and counts whose bytes zstd's entropy stage barely shrinks: its fast level -3 measured
#: 0.54 -> 0.49 s CPU to write the 1.5 M rows of the 538 MB bench log, 31.6 -> 34.2 MB.
ZSTD_LEVELS: dict[str, int] = {"iterations": -3}

#: Codecs other than zstd by table. ``requests`` (tens of millions of rows in a fleet-hour
#: trace) in LZ4 (Parquet's ``LZ4_RAW``, which pandas, pyarrow, polars and duckdb read):
#: measured on 3.1 M rows of 32 ranks x 100k iterations, writing 0.26-0.28 -> 0.23-0.24 s
#: CPU and reading back 0.045-0.05 -> 0.03 s, for files 21 % larger (3.4 -> 4.1 MB).
CODECS: dict[str, str] = {"requests": "lz4"}


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """Columns written dictionary-encoded: the strings only. Measured on 400k iteration rows
    (zstd): every column 0.27-0.34 s CPU, strings only 0.16-0.20 s; numbers rarely repeat
    enough for a dictionary to pay (files 9% smaller to 20% larger than with every column).
    Arrow dictionaries (names, layout 2.3) are written as the dictionaries they are."""
    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]


def _delta_columns(table: str, schema: pa.Schema) -> dict[str, str]:
    """Integer and timestamp columns written delta-encoded (``DELTA_BINARY_PACKED``): lines,
    iterations, counts and times move by small steps, so zstd gets a fraction of the bytes.
    Measured on 1.5 M iteration rows: 0.81 -> 0.58 s CPU to write, 35.7 -> 30.9 MB; frames
    4x smaller. Every engine the layout promises reads it (tests/dataset/test_layout.py).

    Not in the LZ4 tables (:data:`CODECS`): LZ4 finds the repeats and zero bytes of plain
    integers but nothing in bit-packed deltas. Measured on 5.2 M rows of ``requests`` (32 ranks
    x 100k iterations), plain integers: writing 55 -> 37 ns a row, 7.0 -> 5.7 MB (request ids
    4.2 -> 2.0 MB), reading back 35 -> 31 ns a row."""
    if table in CODECS:
        return {}
    return {f.name: "DELTA_BINARY_PACKED" for f in schema
            if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)}


#: The columns rows are selected by: the readers' filters (``run``; ``iter``, whose row-group
#: minima and maxima ``replay.frame_windows`` reads windows by) and the keys a query of the
#: dataset names (file, line, rank, time).
STATISTICS_COLUMNS = frozenset({"run", "source", "line", "iter", "rank", "timestamp"})


def _statistics_columns(schema: pa.Schema) -> list[str]:
    """Columns whose row-group statistics (minimum, maximum, nulls) are written: those of
    :data:`STATISTICS_COLUMNS`. Nobody prunes by a count, an id or a state, and a string's
    minimum and maximum are compared value by value: measured at 32 ranks x 100k iterations,
    writing the requests 19 % less CPU (0.187 -> 0.151 s per 2 M rows), frames 22 %, stats
    11 %."""
    return [f.name for f in schema if f.name in STATISTICS_COLUMNS]


#: pandas dtypes (by name) of the Arrow types that pandas reads as float64 or object when a
#: column has nulls: written into each file's ``pandas`` metadata, and what
#: :func:`forensics.dataset.store.to_pandas` maps them to.
PANDAS_DTYPES = {pa.int16(): "Int16", pa.int32(): "Int32", pa.int64(): "Int64",
                  pa.bool_(): "boolean"}


def pandas_metadata(schema: pa.Schema) -> bytes:
    """The ``pandas`` key-value metadata of a table's files: the nullable dtype of every integer
    and boolean column, so ``pd.read_parquet`` (and dask) read the dtypes ``forensics.load``
    gives (pyarrow's ``to_pandas`` restores extension dtypes named there)."""
    columns = [{"name": f.name, "field_name": f.name, "pandas_type": PANDAS_DTYPES[f.type].lower(),
                "numpy_type": PANDAS_DTYPES[f.type], "metadata": None}
               for f in schema if f.type in PANDAS_DTYPES]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                       "creator": {"library": "adp-forensics"}}).encode()


def _file_schema(table: str) -> pa.Schema:
    return SCHEMAS[table].with_metadata({META_TABLE_KEY: table.encode(),
                                         META_VERSION_KEY: SCHEMA_VERSION.encode(),
                                         b"pandas": pandas_metadata(SCHEMAS[table])})


def _constant_column(schema: pa.Schema, table: str) -> int | None:
    """Index of ``table``'s partition column when it is a string column, else None."""
    column = PARTITION_BY.get(table)
    if column is None or not pa.types.is_string(schema.field(column).type):
        return None
    return schema.get_field_index(column)


def _one_value_schema(schema: pa.Schema, table: str) -> pa.Schema:
    """``schema`` with the partition column as a dictionary of strings (what
    :func:`_one_value` hands the Parquet writer)."""
    i = _constant_column(schema, table)
    return schema.set(i, schema.field(i).with_type(pa.dictionary(pa.int32(), pa.string())))


def _one_value(data: pa.Table, table: str, value: str) -> pa.Table:
    """``data`` with its partition column (every row ``value``) as a one-value dictionary.

    Parquet writes a string column with a dictionary either way, and the same bytes; from
    strings it hashes and compares every value, from an Arrow dictionary it takes the indices
    as they are: the run column of ``requests`` was a third of its writing time (measured on
    5.2 M rows of 32 ranks x 100k iterations: 37 -> 28 ns a row, the file byte for byte the
    same). The file's Arrow schema stays the layout's (:func:`_stored_metadata`)."""
    i = _constant_column(data.schema, table)
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(data.num_rows, np.int32)),
                                            pa.array([value], pa.string()))
    schema = _one_value_schema(data.schema, table)
    return pa.Table.from_arrays([column if k == i else c for k, c in enumerate(data.columns)],
                                schema=schema)


def _holds(column: pa.ChunkedArray, part: Any) -> bool:
    """The first and last values of ``column`` are ``part`` (a caller's promise checked at its
    ends: comparing every row cost a third of what :func:`_one_value` saves)."""
    return column[0].as_py() == part and column[-1].as_py() == part


def _stored_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """The key-value metadata ``pq.ParquetWriter`` writes for ``schema`` (with
    ``store_schema``): the schema's own, and the Arrow schema as ``ARROW:schema`` (base64 of
    its IPC serialization), which readers take the column types from."""
    return {**schema.metadata, b"ARROW:schema": base64.b64encode(schema.serialize().to_pybytes())}


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` in ``schema``: its columns in order, only those of another type cast (the names
    the readers build as strings become dictionaries; a whole-table cast copied every column:
    0.14 s of a 64 MB log's 1.2 s ingest)."""
    data = data.select(schema.names)
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(data.columns, schema)]
    return pa.Table.from_arrays(columns, schema=schema)


class DatasetWriter:
    """Stream record batches of each table into a new dataset directory.

    Use as a context manager; on an exception (or a kill) nothing changes at ``path``.

    Args:
        path: the dataset directory (replaced atomically when it holds a dataset).
        overwrite: replace an existing dataset (else :class:`DatasetError`).
        wait: seconds to wait for another writer's lock before failing.
    """

    def __init__(self, path: str | os.PathLike, *, overwrite: bool = True, wait: float = 0.0):
        self.path = Path(path)
        self.overwrite = overwrite
        self.wait = wait
        self._tmp: Path | None = None
        self._lock: WriteLock | None = None
        self._open: collections.OrderedDict[tuple[str, str | None], _TableFile] = \
            collections.OrderedDict()          # least recently written first
        self._done: list[_TableFile] = []      # closed files
        self._made: dict[tuple[str, str | None], int] = {}   # files made per (table, part)
        self._parts: dict[Any, str] = {}       # partition value -> file stem, first-seen order
        self._partitions: dict[str, Any] = {}  # file stem -> partition value
        self.rows: dict[str, int] = {t: 0 for t in TABLES}
        self._order: dict[tuple[str, str], int] = {}   # (file name, table) -> creation order
        self._encoder = _Encoder()

    def __enter__(self) -> "DatasetWriter":
        try:
            parent = Path(os.path.abspath(self.path)).parent
            parent.mkdir(parents=True, exist_ok=True)
            self._lock = WriteLock(parent / self.path.name, self.wait).acquire()
            recover(parent / self.path.name)
            if os.path.lexists(self.path) and not self.overwrite:
                raise DatasetError("dataset already exists", path=str(self.path))
            self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-{os.getpid()}-",
                                              dir=parent))
        except OSError as e:
            self._release()
            raise _fault(e, self.path) from None
        except BaseException:
            self._release()
            raise
        return self

    def _file(self, table: str, part: Any) -> _TableFile:
        """The open file of (table, partition value); at most ``MAX_OPEN_FILES`` stay open (a
        campaign of many runs), so a partition written again after its file was closed gets a
        further file (``run-00003-1.parquet``)."""
        key = (table, None if part is None else str(part))
        f = self._open.get(key)
        if f is not None:
            self._open.move_to_end(key)
            return f
        assert self._tmp is not None
        n = self._made.get(key, 0)
        self._made[key] = n + 1
        if part is None:
            stem = f"part-{n:05d}"
        else:
            base = self._parts.setdefault(part, f"run-{len(self._parts):05d}")
            stem = base if n == 0 else f"{base}-{n}"
            self._partitions[stem] = part
        d = self._tmp / table
        d.mkdir(exist_ok=True)
        f = self._open[key] = _TableFile(d / f"{stem}.parquet", table, self._encoder, part)
        self._order[f.path.name, table] = len(self._order)
        while len(self._open) > MAX_OPEN_FILES:
            _, oldest = self._open.popitem(last=False)
            oldest.close()
            self._done.append(oldest)
        return f

    def write(self, table: str, data: pa.Table | pa.RecordBatch, part: str | None = None) -> None:
        """Append rows (must already have the table's schema, columns in order).

        ``part``: the partition value of every row (of a table in ``PARTITION_BY``), when the
        caller built them so: a trace reader's batch is one run's. Else the values are looked
        up (hashing every row: 0.14 s CPU for 10 M requests, measured). The file's partition
        column is written from it (:func:`_one_value`); a batch whose first or last row says
        otherwise is looked up row by row instead.
        """
        if data.num_rows == 0:
            return
        schema = SCHEMAS[table]
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not data.schema.equals(schema):
            data = _conform(data, schema)
        try:
            column = PARTITION_BY.get(table)
            if column is None:
                self._file(table, None).add(data)
            elif part is not None and _holds(data.column(column), part):
                self._file(table, part).add(data)
            else:
                values = pc.unique(data.column(column)).to_pylist()
                if len(values) == 1:
                    self._file(table, values[0]).add(data)
                else:
                    for v in values:
                        self._file(table, v).add(data.filter(pc.equal(data.column(column), v)))
        except OSError as e:
            raise _fault(e, self.path) from None
        self.rows[table] += data.num_rows

    def scratch(self) -> Path:
        """A private directory inside the new dataset's temporary directory, for parts written
        by other processes (:meth:`adopt`); removed before the dataset is swapped in."""
        assert self._tmp is not None
        d = self._tmp / ".scratch"
        d.mkdir(exist_ok=True)
        return d

    def adopt(self, part: str | os.PathLike) -> dict[str, Any]:
        """Move the tables of the finished dataset ``part`` (another writer's, e.g. one input
        ingested in another process) into this one, after the rows written so far: the files
        are renamed, not rewritten. Returns the part's ``_meta.json``.

        Reads back the same rows, in the same order, as writing the part's rows here would.
        """
        src = ArrowDataset(part)
        parts = src.meta.get("partitions", {})
        try:
            for table in TABLES:
                if table == "states":       # reference table: this writer adds it itself
                    continue
                for path in src.files(table):
                    rows = pq.ParquetFile(path).metadata.num_rows
                    if rows == 0:
                        continue
                    value = parts.get(path.stem) if table in PARTITION_BY else None
                    key = (table, None if value is None else str(value))
                    if key in self._open:    # later rows of it go after the part's
                        done = self._open.pop(key)
                        done.close()
                        self._done.append(done)
                    f = self._file(table, value)
                    f.adopted = True
                    os.replace(path, f.path)
                    self._open.pop(key)
                    self._done.append(f)
                    self.rows[table] += rows
        except OSError as e:
            raise _fault(e, self.path) from None
        return src.meta

    def finish(self, meta: dict[str, Any]) -> Path:
        """Close every table, write ``_meta.json`` and swap the dataset into place."""
        assert self._tmp is not None
        try:
            self.write("states", states_table())
            for name in TABLES:
                if not any(t == name for t, _ in self._made):
                    self._file(name, None)   # an empty file: every table has its schema
            while self._open:
                _, f = self._open.popitem(last=False)
                f.close()
                self._done.append(f)
            self._encoder.drain()
            self._encoder.stop()
            # Files in the order they were made: rows read back in the order written (a run
            # continued in a further file, ``run-00000-1``, comes after ``run-00000``).
            files = {name: sorted((f.path.name for f in self._done if f.table == name),
                                  key=lambda n, t=name: self._order[n, t])
                     for name in TABLES}
            full = {"schema_version": SCHEMA_VERSION, **meta, "rows": dict(self.rows),
                    "files": files, "partitions": dict(self._partitions)}
            shutil.rmtree(self._tmp / ".scratch", ignore_errors=True)
            meta_tmp = self._tmp / META_FILE
            with open(meta_tmp, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(full, indent=2, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self._swap()
        except OSError as e:
            raise _fault(e, self.path) from None
        self._tmp = None
        return self.path

    def _swap(self) -> None:
        assert self._tmp is not None
        target = self.path
        if not os.path.lexists(target):
            os.rename(self._tmp, target)
            return
        if not (target / META_FILE).is_file() and not (target.is_dir() and not any(target.iterdir())):
            raise DatasetError("exists and is not a dataset; refusing to replace it",
                               path=str(target), hint="choose a new output directory")
        if exchange(self._tmp, target):
            shutil.rmtree(self._tmp, ignore_errors=True)  # now the old dataset
            return
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.rename(target, old)
        os.rename(self._tmp, target)
        shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        self._encoder.stop()
        for f in [*self._open.values(), *self._done]:
            f.abort()
        self._open.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._tmp is not None:
                self.abort()
        finally:
            self._release()
