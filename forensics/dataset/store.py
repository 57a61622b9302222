"""Writing and loading datasets: streamed Parquet writes swapped in atomically.

A writer takes an advisory lock beside the target (``.NAME.lock``, ``fcntl.flock``: a second
writer fails at once with a clear message, or waits ``wait`` seconds), removes what dead writers
left (``.NAME.tmp-*`` directories), fills a new hidden temporary directory beside the target and,
once every table is closed, swaps it in with one ``renameat2(RENAME_EXCHANGE)`` (Linux): at every
instant ``NAME`` is the complete old dataset or the complete new one. Where the exchange is not
available (another OS, a file system without it) the old dataset is first renamed to
``.NAME.old-PID`` and the new one renamed into place; a kill between the two renames leaves the
old dataset there, and the next writer, or :func:`load`, puts it back.

The layout (one directory per table, trace tables one file per run) is described in
:mod:`forensics.dataset.schema`.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import errno
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from forensics.dataset.schema import (
    META_TABLE_KEY,
    META_VERSION_KEY,
    PARTITION_BY,
    ROW_GROUP_ROWS,
    SCHEMA_VERSION,
    SCHEMAS,
    SCHEMAS_2_2,
    TABLES,
    states_table,
)
from forensics.dataset.names import legacy_columns, upgrade
from forensics.errors import DatasetError, EnvironmentFault

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pandas as pd     # imported where DataFrames are made: ingest never needs pandas

META_FILE = "_meta.json"

#: Buffered bytes of one table's rows that force a write before ``ROW_GROUP_ROWS`` rows.
ROW_GROUP_BYTES = 64 << 20

#: Parquet files a writer keeps open at once (each run has three).
MAX_OPEN_FILES = 48

#: Major versions of the layout this module reads.
READABLE_MAJORS = ("1", "2")

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _libc_renameat2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _libc_renameat2()


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two paths atomically (``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if _renameat2 is None:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fsdecode(b))


def _fault(e: OSError, path: Path) -> EnvironmentFault:
    return EnvironmentFault.from_os_error(e, path=str(path), name_path=True)


class WriteLock:
    """An advisory exclusive lock on ``.NAME.lock`` beside a dataset (no-op without fcntl)."""

    def __init__(self, target: Path, wait: float = 0.0):
        self.target = target
        self.file = target.with_name(f".{target.name}.lock")
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> "WriteLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        deadline = time.monotonic() + self.wait
        while True:
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise DatasetError(
                        "another writer is writing this dataset"
                        + (f" (pid {holder})" if holder else ""), path=str(self.target),
                        hint="wait for it to finish, or write to another -o") from None
                time.sleep(0.05)
                continue
            # The holder unlinks the file on release: a lock taken on a file no longer at
            # the path is not the lock; take it again on the current file.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.file).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.file)  # before unlocking: a waiter then retries on a new file
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _leftovers(target: Path) -> tuple[list[Path], list[Path]]:
    """Temporary directories of earlier writers beside ``target``: (tmp-*, old-*)."""
    parent = target.parent
    if not parent.is_dir():
        return [], []
    tmp, old = [], []
    prefix = f".{target.name}."
    for entry in os.scandir(parent):
        if not entry.name.startswith(prefix):
            continue
        rest = entry.name[len(prefix):]
        if rest.startswith("tmp-"):
            tmp.append(parent / entry.name)
        elif rest.startswith("old-"):
            old.append(parent / entry.name)
    return tmp, old


def _recover(target: Path) -> None:
    """Under the lock: put back a dataset stranded by a fallback swap killed between its two
    renames, and remove the temporaries of dead writers."""
    tmp, old = _leftovers(target)
    if not os.path.lexists(target) and old:
        keep = max(old, key=lambda p: p.stat().st_mtime)
        if (keep / META_FILE).is_file():
            os.rename(keep, target)
            logger.warning("%s: restored the dataset an interrupted write left at %s", target, keep)
            old.remove(keep)
    for p in tmp + old:
        shutil.rmtree(p, ignore_errors=True)
        logger.info("removed %s (left by an interrupted write)", p)


class _TableFile:
    """One Parquet file of a table: rows buffered into row groups of ``ROW_GROUP_ROWS``."""

    def __init__(self, path: Path, table: str):
        self.path = path
        self.table = table
        self.schema = _file_schema(table)
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
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd",
                                           compression_level=ZSTD_LEVELS.get(self.table),
                                           use_dictionary=_dictionary_columns(self.schema),
                                           column_encoding=_delta_columns(self.schema))
        whole = (data.num_rows // ROW_GROUP_ROWS) * ROW_GROUP_ROWS
        if final or self.bytes >= ROW_GROUP_BYTES:
            whole = data.num_rows
        if whole:
            self.writer.write_table(data.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
        rest = data.slice(whole)
        self.buffer = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.bytes = rest.nbytes if rest.num_rows else 0

    def close(self) -> None:
        if self.adopted:
            return
        self.flush(final=True)
        if self.writer is None:
            pq.write_table(self.schema.empty_table(), self.path, compression="zstd")
        else:
            self.writer.close()
            self.writer = None

    def abort(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None
        self.buffer.clear()


#: zstd levels other than the default (1) by table. ``iterations`` is mostly measured times
#: and counts whose bytes zstd's entropy stage barely shrinks: its fast level -3 measured
#: 0.54 -> 0.49 s CPU to write the 1.5 M rows of the 538 MB bench log, 31.6 -> 34.2 MB.
ZSTD_LEVELS: dict[str, int] = {"iterations": -3}


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """Columns written dictionary-encoded: the strings only. Measured on 400k iteration rows
    (zstd): every column 0.27-0.34 s CPU, strings only 0.16-0.20 s; numbers rarely repeat
    enough for a dictionary to pay (files 9% smaller to 20% larger than with every column).
    Arrow dictionaries (names, layout 2.3) are written as the dictionaries they are."""
    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]


def _delta_columns(schema: pa.Schema) -> dict[str, str]:
    """Integer and timestamp columns written delta-encoded (``DELTA_BINARY_PACKED``): lines,
    iterations, counts and times move by small steps, so zstd gets a fraction of the bytes.
    Measured on 1.5 M iteration rows: 0.81 -> 0.58 s CPU to write, 35.7 -> 30.9 MB; frames
    4x smaller. Every engine the layout promises reads it (tests/dataset/test_layout.py)."""
    return {f.name: "DELTA_BINARY_PACKED" for f in schema
            if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)}


#: pandas dtypes of the Arrow types that pandas reads as float64 or object when a column has
#: nulls (the types ``to_pandas`` below maps too).
_PANDAS_DTYPES = {pa.int16(): "Int16", pa.int32(): "Int32", pa.int64(): "Int64",
                  pa.bool_(): "boolean"}


def pandas_metadata(schema: pa.Schema) -> bytes:
    """The ``pandas`` key-value metadata of a table's files: the nullable dtype of every integer
    and boolean column, so ``pd.read_parquet`` (and dask) read the dtypes ``forensics.load``
    gives (pyarrow's ``to_pandas`` restores extension dtypes named there)."""
    columns = [{"name": f.name, "field_name": f.name, "pandas_type": _PANDAS_DTYPES[f.type].lower(),
                "numpy_type": _PANDAS_DTYPES[f.type], "metadata": None}
               for f in schema if f.type in _PANDAS_DTYPES]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                       "creator": {"library": "adp-forensics"}}).encode()


def _file_schema(table: str) -> pa.Schema:
    return SCHEMAS[table].with_metadata({META_TABLE_KEY: table.encode(),
                                         META_VERSION_KEY: SCHEMA_VERSION.encode(),
                                         b"pandas": pandas_metadata(SCHEMAS[table])})


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

    def __enter__(self) -> "DatasetWriter":
        try:
            parent = Path(os.path.abspath(self.path)).parent
            parent.mkdir(parents=True, exist_ok=True)
            self._lock = WriteLock(parent / self.path.name, self.wait).acquire()
            _recover(parent / self.path.name)
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
        f = self._open[key] = _TableFile(d / f"{stem}.parquet", table)
        self._order[f.path.name, table] = len(self._order)
        while len(self._open) > MAX_OPEN_FILES:
            _, oldest = self._open.popitem(last=False)
            oldest.close()
            self._done.append(oldest)
        return f

    def write(self, table: str, data: pa.Table | pa.RecordBatch) -> None:
        """Append rows (must already have the table's schema, columns in order)."""
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
        src = Dataset(part)
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
        for f in self._open.values():
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


class Dataset:
    """A loaded dataset: one pandas DataFrame attribute per table, read on first access.

    Attributes: ``iterations``, ``events``, ``stats``, ``runs``, ``frames``, ``requests``,
    ``unparsed``, ``states`` (see ``forensics.dataset.schema`` for the columns) and ``meta``
    (``_meta.json``). Datasets of the 1.x layout (one ``TABLE.parquet`` per table) and of 2.0-2.2
    (codes, plain strings) are read too, in today's shape (``forensics.dataset.names``).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        meta_path = self.path / META_FILE
        if not os.path.lexists(self.path):
            _recover_unlocked(self.path)
        if not self.path.is_dir() or not meta_path.is_file():
            raise DatasetError("not a dataset (no _meta.json)", path=str(self.path),
                               hint="create one with `forensics ingest INPUT... -o DATASET`")
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise DatasetError(f"_meta.json is not valid JSON: {e}", path=str(meta_path)) from None
        version = str(self.meta.get("schema_version", ""))
        self.major = version.split(".")[0]
        #: Written before 2.3 (codes and plain strings): read with ``SCHEMAS_2_2``, upgraded.
        self.legacy = self.major == "1" or version in ("2.0", "2.1", "2.2")
        if self.major not in READABLE_MAJORS:
            raise DatasetError(f"schema version {version!r} is not supported (this tool reads "
                               f"{SCHEMA_VERSION} and 1.x)", path=str(self.path),
                               hint="re-ingest the inputs with this version of the tool")
        self._cache: dict[str, pd.DataFrame] = {}
        self._identity = _identity(self.path)

    def _read_fault(self, e: OSError) -> Exception:
        """The error for a file of this dataset that could not be read: a precise one when the
        dataset was replaced (or removed) since it was opened, a writer having swapped in a new
        one, else the OS error itself."""
        if _identity(self.path) != self._identity:
            return DatasetError("the dataset was replaced while this command read it (another "
                                "command wrote it at the same time)", path=str(self.path),
                                hint="run the command again once the writer has finished, or "
                                     "read a copy of the dataset")
        return e

    def files(self, table: str, run: str | None = None) -> list[Path]:
        """The Parquet files of ``table`` (only the one of ``run`` for a trace table, when
        given and the dataset has one file per run); empty when the table has none."""
        if table not in SCHEMAS:
            raise DatasetError(f"no table {table!r}; tables: {', '.join(TABLES)}", path=str(self.path))
        if _identity(self.path) != self._identity:  # its files are another dataset's now
            raise self._read_fault(FileNotFoundError(str(self.path)))
        if self.major == "1":
            f = self.path / f"{table}.parquet"
            return [f] if f.is_file() else []
        names = self.meta.get("files", {}).get(table)
        if run is not None and table in PARTITION_BY:
            stems = [s for s, v in self.meta.get("partitions", {}).items() if str(v) == str(run)]
            return [self.path / table / f"{s}.parquet" for s in stems
                    if (self.path / table / f"{s}.parquet").is_file()]
        if names is None:
            d = self.path / table
            return sorted(d.glob("*.parquet")) if d.is_dir() else []
        return [self.path / table / n for n in names]

    def arrow(self, table: str, columns: list[str] | None = None,
              filter: pc.Expression | None = None,
              filters: list[tuple] | None = None) -> pa.Table:
        """The table (or only ``columns`` of it, rows matching ``filter``) as a pyarrow Table,
        typed even when empty.

        ``filters``: ``[(column, op, value), ...]`` ANDed (``pyarrow.parquet`` filters) with
        ``filter``; row groups whose statistics exclude them are not read, so a windowed reader
        (an iteration range of a fleet-hour run, ``replay.frame_windows.FrameWindows``) reads only its
        part.
        """
        files = self.files(table)
        if not files:
            if table == "states":
                empty = states_table()
            else:
                empty = SCHEMAS[table].empty_table()
            return empty.select(columns) if columns is not None else empty
        if filters:
            expr = pq.filters_to_expression(filters)
            filter = expr if filter is None else (filter & expr)
        try:
            if self.legacy:
                data = pads.dataset([str(f) for f in files], schema=SCHEMAS_2_2[table],
                                    format="parquet")
                return upgrade(table, data.to_table(columns=legacy_columns(table, columns),
                                                    filter=filter), columns)
            data = pads.dataset([str(f) for f in files], schema=SCHEMAS[table], format="parquet")
            return data.to_table(columns=columns, filter=filter)
        except OSError as e:
            raise self._read_fault(e) from None

    def num_rows(self, table: str) -> int:
        """Rows of ``table``, from the Parquet footers (no data read)."""
        try:
            return sum(pq.ParquetFile(f).metadata.num_rows for f in self.files(table))
        except OSError as e:
            raise self._read_fault(e) from None

    def batches(self, table: str, columns: list[str] | None = None):
        """The table (or ``columns`` of it) as pyarrow RecordBatches, a row group at a time: a
        scan of a long recording's tables in bounded memory (``ParquetFile.iter_batches`` reads
        ahead, holding far more than one batch)."""
        if table not in SCHEMAS:
            raise DatasetError(f"no table {table!r}; tables: {', '.join(TABLES)}", path=str(self.path))
        for file in self.files(table):
            try:
                pf = pq.ParquetFile(file)
            except OSError as e:
                raise self._read_fault(e) from None
            for i in range(pf.num_row_groups):
                if self.legacy:
                    group = pf.read_row_group(i, columns=legacy_columns(table, columns))
                    yield from upgrade(table, group, columns).to_batches()
                else:
                    yield from pf.read_row_group(i, columns=columns).to_batches()

    def traced_runs(self) -> list[str]:
        """Runs that have at least one frame, in run-record order: the runs a replay can use.

        Reads only the ``run`` columns: the frames table of a long recording is large, and the
        replay reads what it needs itself (``replay.frames.RunFrames.from_dataset``).
        """
        runs = self.arrow("runs", columns=["run"]).column("run").to_pylist()
        if not runs:
            return []
        framed = self.arrow("frames", columns=["run"]).column("run")
        framed = {str(r) for r in pc.unique(framed).to_pylist()}
        return [r for r in dict.fromkeys(str(x) for x in runs) if r in framed]

    def table(self, table: str) -> pd.DataFrame:
        if table not in self._cache:
            self._cache[table] = to_pandas(self.arrow(table))
        return self._cache[table]

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in SCHEMAS:
            return self.table(name)
        raise AttributeError(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(TABLES))

    def __repr__(self) -> str:
        rows = self.meta.get("rows", {})
        return f"Dataset({str(self.path)!r}, " + ", ".join(f"{t}={rows.get(t, '?')}" for t in TABLES) + ")"


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of a dataset directory, None when it is gone: a writer's swap puts
    a new directory at the path."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _recover_unlocked(path: Path) -> None:
    """A reader finding no dataset where an interrupted fallback swap left one: restore it
    when no writer holds the lock."""
    _, old = _leftovers(Path(os.path.abspath(path)))
    if not old:
        return
    lock = WriteLock(Path(os.path.abspath(path)))
    try:
        lock.acquire()
    except (DatasetError, OSError):
        return
    try:
        _recover(Path(os.path.abspath(path)))
    except OSError:
        pass
    finally:
        lock.release()


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow to pandas keeping integer columns with nulls as nullable integers."""
    import pandas as pd
    return table.to_pandas(types_mapper={
        pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
    }.get, maps_as_pydicts="strict")


def load(path: str | os.PathLike) -> Dataset:
    """Open a dataset written by ``forensics ingest``.

    Example:
        >>> ds = forensics.load("crash.ds")        # doctest: +SKIP
        >>> ds.iterations.groupby("rank").iter.max()  # doctest: +SKIP
    """
    return Dataset(path)
