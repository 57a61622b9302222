"""Reading a dataset's tables as Arrow: files, whole or filtered tables, row-group batches.

The layout (one directory per table, trace tables one file per run) is described in
:mod:`forensics.dataset.schema`. Datasets of the 1.x layout (one ``TABLE.parquet`` per table)
and of 2.0-2.2 (codes, plain strings) are read too, in today's shape
(:mod:`forensics.dataset.names`). DataFrames are :mod:`forensics.dataset.store`'s: this module
imports no pandas, so an ingest, which reads back what it wrote, does not either.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.dataset.names import legacy_columns, upgrade
from forensics.dataset.schema import (
    META_FILE,
    PARTITION_BY,
    SCHEMA_VERSION,
    SCHEMAS,
    SCHEMAS_2_2,
    TABLES,
    states_table,
)
from forensics.dataset.swap import recover_unlocked
from forensics.errors import DatasetError

#: Major versions of the layout this module reads.
READABLE_MAJORS = ("1", "2")


class ArrowDataset:
    """A dataset directory's tables read as pyarrow Tables (or record batches): what the
    ingest's own steps read (its summary, parts written by other processes), with no pandas.
    :class:`forensics.dataset.store.Dataset` adds one DataFrame attribute per table.

    Attributes: ``path``, ``meta`` (``_meta.json``), ``major`` (of the layout's version),
    ``legacy`` (written before 2.3: read with ``SCHEMAS_2_2``, upgraded).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        meta_path = self.path / META_FILE
        if not os.path.lexists(self.path):
            recover_unlocked(self.path)
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
        (an iteration range of a fleet-hour run, ``replay.frame_windows.FrameWindows``) reads
        only its part.
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
                return upgrade(table, _read(files, SCHEMAS_2_2[table],
                                            legacy_columns(table, columns), filter), columns)
            return _read(files, SCHEMAS[table], columns, filter)
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
        framed = self._framed_runs()
        if framed is None:
            framed = self.arrow("frames", columns=["run"]).column("run")
            framed = {str(r) for r in pc.unique(framed).to_pylist()}
        return [r for r in dict.fromkeys(str(x) for x in runs) if r in framed]

    def _framed_runs(self) -> set[str] | None:
        """The runs with frames, from the footers of the frames files when each holds one run
        (its partition value, ``_meta.json``); else None. Reading the ``run`` column instead
        decodes a string per frame: measured at 64 ranks x 100k iterations, 0.67 s CPU and
        +280 MiB resident, for names the footers give in a millisecond."""
        parts = self.meta.get("partitions")
        names = self.meta.get("files", {}).get("frames")
        if self.legacy or parts is None or names is None:
            return None
        framed = set()
        try:
            for n in names:
                value = parts.get(Path(n).stem)
                if value is None:
                    return None
                if pq.ParquetFile(self.path / "frames" / n).metadata.num_rows:
                    framed.add(str(value))
        except OSError as e:
            raise self._read_fault(e) from None
        return framed

    def __repr__(self) -> str:
        rows = self.meta.get("rows", {})
        return f"{type(self).__name__}({str(self.path)!r}, " + ", ".join(f"{t}={rows.get(t, '?')}" for t in TABLES) + ")"


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of a dataset directory, None when it is gone: a writer's swap puts
    a new directory at the path."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read(files: list[Path], schema: pa.Schema, columns: list[str] | None,
          filter: pc.Expression | None) -> pa.Table:
    """``columns`` of the rows matching ``filter`` of ``files`` (a ``pyarrow.dataset`` of them in
    ``schema``), through ``pyarrow.parquet``: it imports ``pyarrow.dataset`` when first called,
    so importing this module does not (~0.015 s CPU an ingest needs only after its reading, for
    its summary). No partitioning is read from the paths (a directory named ``key=value``
    above a dataset is no column of it)."""
    return pq.read_table([str(f) for f in files], schema=schema, columns=columns,
                         filters=filter, partitioning=None)
