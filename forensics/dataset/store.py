"""Writing and loading datasets: streamed Parquet writes that appear atomically.

A writer fills a hidden temporary directory beside the target and renames it into place only
when every table is closed, so an interrupted ingest leaves no partial dataset behind.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.dataset.schema import SCHEMA_VERSION, SCHEMAS, TABLES
from forensics.errors import DatasetError

if TYPE_CHECKING:
    import pandas as pd     # imported where DataFrames are made: ingest never needs pandas

META_FILE = "_meta.json"


class DatasetWriter:
    """Stream record batches of each table into a new dataset directory.

    Use as a context manager; on an exception nothing appears at ``path``.
    """

    def __init__(self, path: str | os.PathLike, *, overwrite: bool = True):
        self.path = Path(path)
        self.overwrite = overwrite
        self._tmp: Path | None = None
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.rows: dict[str, int] = {t: 0 for t in TABLES}

    def __enter__(self) -> "DatasetWriter":
        if self.path.exists() and not self.overwrite:
            raise DatasetError("dataset already exists", path=str(self.path))
        parent = self.path.resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-", dir=parent))
        return self

    def write(self, table: str, data: pa.Table | pa.RecordBatch) -> None:
        """Append rows (must already have the table's schema, columns in order)."""
        if data.num_rows == 0:
            return
        schema = SCHEMAS[table]
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not data.schema.equals(schema):
            data = data.select(schema.names).cast(schema)
        w = self._writers.get(table)
        if w is None:
            assert self._tmp is not None
            w = pq.ParquetWriter(self._tmp / f"{table}.parquet", schema, compression="zstd")
            self._writers[table] = w
        w.write_table(data)
        self.rows[table] += data.num_rows

    def finish(self, meta: dict[str, Any]) -> Path:
        """Close every table, write ``_meta.json`` and move the dataset into place."""
        assert self._tmp is not None
        for name in TABLES:
            if name in self._writers:
                self._writers.pop(name).close()
            else:
                pq.write_table(SCHEMAS[name].empty_table(), self._tmp / f"{name}.parquet",
                               compression="zstd")
        full = {"schema_version": SCHEMA_VERSION, **meta, "rows": dict(self.rows)}
        (self._tmp / META_FILE).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
        if self.path.exists():
            backup = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
            os.replace(self.path, backup)
            os.replace(self._tmp, self.path)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.replace(self._tmp, self.path)
        self._tmp = None
        return self.path

    def abort(self) -> None:
        for w in self._writers.values():
            try:
                w.close()
            except Exception:  # pragma: no cover - best effort cleanup
                pass
        self._writers.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._tmp is not None:
            self.abort()


class Dataset:
    """A loaded dataset: one pandas DataFrame attribute per table, read on first access.

    Attributes: ``iterations``, ``events``, ``stats``, ``runs``, ``frames``, ``requests``,
    ``unparsed`` (see ``forensics.dataset.schema`` for the columns) and ``meta`` (``_meta.json``).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        meta_path = self.path / META_FILE
        if not self.path.is_dir() or not meta_path.is_file():
            raise DatasetError("not a dataset (no _meta.json)", path=str(self.path),
                               hint="create one with `forensics ingest INPUT... -o DATASET`")
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise DatasetError(f"_meta.json is not valid JSON: {e}", path=str(meta_path)) from None
        version = str(self.meta.get("schema_version", ""))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise DatasetError(f"schema version {version!r} is not supported (this tool reads "
                               f"{SCHEMA_VERSION})", path=str(self.path),
                               hint="re-ingest the inputs with this version of the tool")
        self._cache: dict[str, pd.DataFrame] = {}

    def arrow(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """The table (or only ``columns`` of it) as a pyarrow Table, typed even when empty."""
        if table not in SCHEMAS:
            raise DatasetError(f"no table {table!r}; tables: {', '.join(TABLES)}", path=str(self.path))
        file = self.path / f"{table}.parquet"
        if not file.is_file():
            empty = SCHEMAS[table].empty_table()
            return empty.select(columns) if columns is not None else empty
        return pq.read_table(file, schema=SCHEMAS[table], columns=columns)

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
