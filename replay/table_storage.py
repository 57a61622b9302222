"""Where a replay result's decisions and ledger live: built on first use, or in Parquet files.

An in-memory replay hands its tables over as :class:`DeferredTable` (built when first read); a
streamed replay writes them window by window with :class:`TableWriter` and reads them back as
:class:`StoredTable`, whose rows may lie in several files (:class:`Piece`) when policies decided
a window alike. :func:`filter_frame` applies the Parquet filters to a table held in memory.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd


class DeferredTable:
    """A table built from arrays on first use (``ReplayResult`` of an in-memory replay): a
    post-mortem reads the decisions of a few policies only, and building a DataFrame costs
    more than replaying a small run (measured on the bundled sample)."""

    def __init__(self, build: Callable[[], pd.DataFrame]):
        self.build = build


class StoredTable:
    """A decisions or ledger table in a Parquet file, read when asked.

    A streamed replay (``replay.streaming.replay_windows``) writes its tables window by window;
    :meth:`read` returns them (or the rows a filter keeps) with the dtypes of the in-memory
    table, rows in the in-memory order (``sort_by``).
    """

    def __init__(self, path: str | os.PathLike, dtypes: dict[str, Any], sort_by: str | None = None,
                 frame: pd.DataFrame | None = None, pieces: list[Piece] | None = None):
        self.path = Path(path)
        self.dtypes = dict(dtypes)
        self.sort_by = sort_by
        #: The whole table when it is small (``TableWriter.KEEP_ROWS``): read without the file.
        self._frame = frame
        #: Where the rows are, in order, when some live in other files (a streamed replay
        #: writes a window two policies decide alike once, ``replay.shared_windows.SharedWindows``);
        #: None: they are the whole of ``path``.
        self.pieces = pieces
        #: What the file's directory lives as long as (a ``TemporaryDirectory``), or None.
        self.owner: Any = None

    @property
    def num_rows(self) -> int:
        if self.pieces is not None:
            return sum(p.rows for p in self.pieces)
        import pyarrow.parquet as pq
        return int(pq.ParquetFile(self.path).metadata.num_rows)

    def _arrow(self, columns: list[str] | None, filters: list[tuple] | None):
        """The rows ``filters`` keep as an Arrow table, from the file or from the pieces (those
        whose iterations a filter on ``iter`` excludes are not read)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        if self.pieces is None:
            return pq.read_table(self.path, columns=columns, filters=filters or None)
        expr = pq.filters_to_expression(filters) if filters else None
        read = None if columns is None else list(dict.fromkeys(
            list(columns) + [f[0] for f in filters or ()]))
        parts = []
        for piece in self.pieces:
            if filters and not piece.may_hold(filters):
                continue
            batches = list(piece.batches(read))
            if batches:
                t = pa.Table.from_batches(batches)
                t = t.filter(expr) if expr is not None else t
                parts.append(t.select(columns) if columns is not None else t)
        if not parts:   # typed, empty
            first = self.pieces[0] if self.pieces else None
            schema = pq.read_schema(first.path if first is not None else self.path)
            empty = schema.empty_table()
            return empty.select(columns) if columns is not None else empty
        return pa.concat_tables(parts)

    def read(self, filters: list[tuple] | None = None,
             columns: list[str] | None = None) -> pd.DataFrame:
        """The rows ``filters`` keep (``pyarrow.parquet`` filters), or every row."""
        if self._frame is not None:
            df = filter_frame(self._frame, filters).copy()
            if self.sort_by is not None and len(df) and not df[self.sort_by].is_monotonic_increasing:
                df = df.sort_values(self.sort_by, kind="stable").reset_index(drop=True)
            return df[list(columns)] if columns is not None else df
        cols = None if columns is None else list(dict.fromkeys(
            list(columns) + ([self.sort_by] if self.sort_by else [])))
        df = self._arrow(cols, filters).to_pandas()
        for name, dtype in self.dtypes.items():
            if name not in df.columns:
                continue
            if isinstance(dtype, pd.CategoricalDtype):
                df[name] = df[name].astype("object").astype(dtype)
            elif df[name].dtype != dtype:
                df[name] = df[name].astype(dtype)
        if self.sort_by is not None and len(df) and not df[self.sort_by].is_monotonic_increasing:
            df = df.sort_values(self.sort_by, kind="stable")
        df = df.reset_index(drop=True)
        return df[list(columns)] if columns is not None else df

    def frames(self, columns: list[str]):
        """The rows of ``columns`` as DataFrames, a row group at a time (bounded memory); a
        table kept in memory is one frame, with no Arrow round trip."""
        if self._frame is not None:
            yield self._frame[list(columns)]
            return
        for b in self.batches(columns):
            yield b.to_pandas()

    def batches(self, columns: list[str]):
        """The file's rows in record batches of ``columns`` (a scan in bounded memory)."""
        if self._frame is not None:
            import pyarrow as pa
            yield pa.RecordBatch.from_pandas(self._frame[list(columns)], preserve_index=False)
            return
        if self.pieces is not None:
            # one open per file, not per piece: a streamed run's pieces are many (49 at
            # fleet-1h 32x100k) and each open cost ~4 ms (measured)
            opened: dict[Path, Any] = {}
            for piece in self.pieces:
                yield from piece.batches(columns, opened)
            return
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(self.path)
        for i in range(pf.num_row_groups):   # a row group at a time (iter_batches reads ahead)
            yield from pf.read_row_group(i, columns=columns).to_batches()


@dataclasses.dataclass(frozen=True)
class Piece:
    """Consecutive rows of a stored table in a Parquet file: ``rows`` rows from row
    ``first_row``, of iterations ``iter_lo`` to ``iter_hi``. ``patches``: pieces of other files
    holding some columns of these rows (their ``columns``) in place of this file's: a window
    that policies decide alike but for a few columns has those columns written alone
    (``replay.shared_windows.SharedWindows``)."""

    path: Path
    first_row: int
    rows: int
    iter_lo: int
    iter_hi: int
    patches: tuple[Piece, ...] = ()
    columns: tuple[str, ...] = ()

    def may_hold(self, filters: list[tuple]) -> bool:
        """False when a filter on ``iter`` excludes every iteration of the piece."""
        lo, hi = self.iter_lo, self.iter_hi
        for col, op, val in filters:
            if col != "iter":
                continue
            if op == "in":
                vals = [int(v) for v in val]
                if not any(lo <= v <= hi for v in vals):
                    return False
            elif ((op == "==" and not lo <= val <= hi) or (op == "<" and lo >= val)
                  or (op == "<=" and lo > val) or (op == ">" and hi <= val)
                  or (op == ">=" and hi < val)):
                return False
        return True

    def batches(self, columns: list[str] | None, opened: dict | None = None):
        """The piece's rows of ``columns``, a row group at a time (the whole piece at once when
        it has patches); ``opened``: the files opened already, by path (filled as they are
        opened)."""
        opened = {} if opened is None else opened
        if not self.patches:
            yield from self._own_batches(columns, opened)
            return
        import pyarrow as pa
        table = pa.Table.from_batches(list(self._own_batches(columns, opened)))
        for patch in self.patches:
            names = [c for c in patch.columns if c in table.column_names]
            if not names:
                continue
            got = pa.Table.from_batches(list(patch._own_batches(names, opened)))
            for name in names:
                i = table.schema.get_field_index(name)
                table = table.set_column(i, table.schema.field(i), got.column(name))
        yield from table.to_batches()

    def _own_batches(self, columns: list[str] | None, opened: dict):
        import pyarrow.parquet as pq
        pf = opened.get(self.path)
        if pf is None:
            pf = opened[self.path] = pq.ParquetFile(self.path)
        start, end, at = self.first_row, self.first_row + self.rows, 0
        for i in range(pf.num_row_groups):
            n = pf.metadata.row_group(i).num_rows
            if at < end and at + n > start:
                t = pf.read_row_group(i, columns=columns)
                a = max(start - at, 0)
                yield from t.slice(a, min(end, at + n) - at - a).to_batches()
            at += n
            if at >= end:
                break


class TableWriter:
    """Append DataFrames of one table to a Parquet file (one row group each), then hand back
    the :class:`StoredTable`. The file appears complete or not at all (written beside, renamed)."""

    def __init__(self, path: str | os.PathLike, empty: pd.DataFrame, sort_by: str | None = None,
                 statistics: list[str] | None = None):
        self.path = Path(path)
        #: The columns whose row-group statistics are written (None: every column). Readers
        #: skip row groups by the columns they filter on; statistics of the others cost
        #: writing time only (the decisions: 16 % of a write without them, measured).
        self.statistics = statistics
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self.dtypes = dict(empty.dtypes)    # until the first rows say otherwise
        self.sort_by = sort_by
        self._empty = empty
        self._writer = None
        self._schema = None
        self._buffer: list[pd.DataFrame] = []
        self._buffered = 0
        self._kept: pd.DataFrame | None = None
        #: Rows handed to :meth:`write` so far: where the next rows start in the file.
        self.rows = 0

    #: Rows gathered before a row group is written (small windows share one).
    ROWS_PER_GROUP = 1 << 16
    #: A table of at most this many rows, written in one piece, stays in memory as well: a
    #: small run's figures and chains then read no file back (a few hundred KiB at most).
    KEEP_ROWS = 4096

    def write(self, df) -> None:
        """Append rows: a DataFrame, or an Arrow table of the schema ``pa.Table.from_pandas``
        gives such a DataFrame (pandas metadata included; one writer takes one kind)."""
        if not len(df):
            return
        self._buffer.append(df)
        self._buffered += len(df)
        self.rows += len(df)
        if self._buffered >= self.ROWS_PER_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        if not self._buffer:
            return
        arrow = isinstance(self._buffer[0], pa.Table)
        if arrow:
            table = self._buffer[0] if len(self._buffer) == 1 else pa.concat_tables(self._buffer)
            df = None
        else:
            df = self._buffer[0] if len(self._buffer) == 1 else pd.concat(self._buffer, ignore_index=True)
        self._buffer, self._buffered = [], 0
        if self._writer is None:
            if arrow:
                self._schema = table.schema
                self.dtypes = _empty_dtypes(table)
                self._kept = table.to_pandas() if table.num_rows <= self.KEEP_ROWS else None
            else:
                self.dtypes = dict(df.dtypes)
                # nthreads=1: a pool of threads per call costs more than it saves on a window
                # (and the windowed replay already runs policies on threads)
                table = pa.Table.from_pandas(df, preserve_index=False, nthreads=1)
                self._schema = table.schema
                self._kept = df if len(df) <= self.KEEP_ROWS else None
            self._writer = pq.ParquetWriter(self._tmp, self._schema, **_write_options(self._schema),
                                            write_statistics=self.statistics
                                            if self.statistics is not None else True)
        else:
            if not arrow:
                table = pa.Table.from_pandas(df, schema=self._schema, preserve_index=False, nthreads=1)
            self._kept = None
        self._writer.write_table(table)

    def describe(self, table) -> None:
        """Take the dtypes of ``table`` (an Arrow table :meth:`write` would take) while no row
        is written: a table whose rows all live in other files (:meth:`close` ``pieces``) reads
        back with the dtypes of the rows it holds."""
        if self._writer is None and not self._buffer:
            self.dtypes = _empty_dtypes(table)

    def close(self, pieces: list[Piece] | None = None) -> StoredTable:
        """The table written; ``pieces``: where its rows are when some live in other files
        (None, or every piece this file's own rows in order: the whole file)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        self._flush()
        if self._writer is None:
            pq.write_table(pa.Table.from_pandas(self._empty, preserve_index=False), self._tmp)
            self._kept = None
        else:
            self._writer.close()
        os.replace(self._tmp, self.path)
        kept = self._kept.reset_index(drop=True) if self._kept is not None else None
        if pieces is not None and all(p.path == self.path and not p.patches for p in pieces):
            pieces = None   # its own rows, in order: the whole file
        return StoredTable(self.path, self.dtypes, self.sort_by,
                           frame=kept if pieces is None else None, pieces=pieces)


def _write_options(schema) -> dict[str, Any]:
    """How a replay's tables are written: integers delta-encoded, a dictionary for the
    categories and strings only, LZ4, a row group's values encoded at once. Measured on 3.2 M
    decisions of fleet-1h 32x100k against zstd with a dictionary for every column: writing
    122 -> 88 ns a row, 3.6 -> 4.7 MB (the files live in the report directory)."""
    import pyarrow as pa
    return {"compression": "lz4", "write_batch_size": TableWriter.ROWS_PER_GROUP,
            "use_dictionary": [f.name for f in schema if pa.types.is_dictionary(f.type)
                               or pa.types.is_string(f.type)],
            "column_encoding": {f.name: "DELTA_BINARY_PACKED" for f in schema
                                if pa.types.is_integer(f.type)}}


def _empty_dtypes(table) -> dict[str, Any]:
    """The pandas dtypes of an Arrow table's rows (what ``to_pandas`` of none of them gives: a
    slice keeps the dictionaries, so the categories are all there), once per schema and set of
    dictionaries: converting costs ~14 ms, and every stream of a replay's policies asks
    (measured on fleet-1h: 48 times)."""
    import pyarrow as pa
    dictionaries = tuple(tuple(tuple(chunk.dictionary.to_pylist()) for chunk in c.chunks)
                         for c, f in zip(table.columns, table.schema)
                         if pa.types.is_dictionary(f.type))
    key = (table.schema.serialize().to_pybytes(), dictionaries)
    got = _DTYPES.get(key)
    if got is None:
        got = _DTYPES[key] = dict(table.slice(0, 0).to_pandas().dtypes)
    return dict(got)


#: :func:`_empty_dtypes` by schema (metadata included) and dictionaries.
_DTYPES: dict[tuple, dict[str, Any]] = {}


def filter_frame(df: pd.DataFrame, filters: list[tuple] | None) -> pd.DataFrame:
    """``df`` rows kept by ``[(column, op, value), ...]`` (ANDed), as the Parquet filters read."""
    if not filters:
        return df
    import numpy as np
    keep = np.ones(len(df), bool)
    for col, op, val in filters:
        c = df[col]
        m = {"==": lambda: c == val, "!=": lambda: c != val, "<": lambda: c < val,
             "<=": lambda: c <= val, ">": lambda: c > val, ">=": lambda: c >= val,
             "in": lambda: c.isin(list(val)), "not in": lambda: ~c.isin(list(val))}[op]()
        keep &= pd.array(m, dtype="boolean").fillna(False).to_numpy(dtype=bool)
    return df[keep].reset_index(drop=True)


__all__ = ["DeferredTable", "Piece", "StoredTable", "TableWriter", "filter_frame"]
