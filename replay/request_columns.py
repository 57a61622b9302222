"""The requests table read into the compact arrays the replay counts frames from.

One place for which columns the replay reads and in what dtypes (``state_value`` int16, ids
int64, ...), whatever the table's layout (2.3's ``state_value`` or an older ``state`` code) and
whether it comes whole (a dataset's Arrow table), batch by batch (a Parquet file) or filtered by
window (:mod:`replay.frame_windows`). Recorded dummies are dropped here: each policy carries its
own (``replay.walk``).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replay.heap import release_arrow


def column_array(col, dtype=None, fill=None, copy: bool = True) -> np.ndarray:
    """An Arrow column as numpy, nulls replaced by ``fill``; ``copy=False``: the Arrow buffer
    itself (read-only) where it already has the dtype."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if fill is not None and col.null_count:
        col = col.fill_null(fill)
    out = col.to_numpy(zero_copy_only=False)
    return out.astype(dtype, copy=copy) if dtype is not None else out


#: Requests columns the replay reads, with the compact dtypes they are held in.
#: ``state_value`` is the int code (dataset layout 2.3, where ``state`` is the name); a table of
#: an older layout has the code in ``state`` (:func:`code_column`).
_REQ_COLUMNS = (("iter", np.int64), ("rank", np.int32), ("request_id", np.int64),
                ("state_value", np.int16), ("pos", np.int32))
REQUEST_COLUMNS = [name for name, _ in _REQ_COLUMNS] + ["dummy"]


def code_column(names: Iterable[str]) -> str:
    """Where a requests table holds the state codes: ``state_value``, else (layouts before
    2.3, pandas frames of them) ``state``."""
    return "state_value" if "state_value" in names else "state"


def request_columns(names: Iterable[str]) -> list[str]:
    """:data:`REQUEST_COLUMNS` as a requests file with these column names holds them."""
    code = code_column(names)
    return [code if c == "state_value" else c for c in REQUEST_COLUMNS]


def real_requests(t: pa.Table | pa.RecordBatch) -> tuple[np.ndarray, ...]:
    """``(iter, rank, request_id, state code, pos)`` of the real (non-dummy) requests, compact
    dtypes; read-only where a column has its dtype already (not copied: a window's requests
    are ~1M rows, read once)."""
    dummy = t.column("dummy")
    keep = pc.invert(pc.fill_null(dummy, False)) if pc.any(dummy).as_py() else None
    code = code_column(t.column_names)
    out = []
    for name, dtype in _REQ_COLUMNS:
        c = t.column(code if name == "state_value" else name)
        out.append(column_array(c.filter(keep) if keep is not None else c, dtype, 0, copy=False))
    return tuple(out)


def read_real_requests(file: Path, run: str | None) -> tuple[np.ndarray, ...]:
    """:func:`real_requests` of a requests Parquet file, read batch by batch into arrays
    sized by the file's row count (pages past the real requests are never touched)."""
    pf = pq.ParquetFile(file)
    total = pf.metadata.num_rows
    bufs = [np.empty(total, dtype) for _, dtype in _REQ_COLUMNS]
    columns = request_columns(pf.schema_arrow.names) + (["run"] if run is not None else [])
    n = 0
    batch = parts = None
    for batch in pf.iter_batches(batch_size=1 << 18, columns=columns):
        if run is not None:
            batch = batch.filter(pc.equal(batch.column("run"), run))
        parts = real_requests(batch)
        k = parts[0].size
        for buf, part in zip(bufs, parts):
            buf[n:n + k] = part
        n += k
    del batch, parts
    release_arrow()
    return tuple(buf[:n] for buf in bufs)



__all__ = ["REQUEST_COLUMNS", "code_column", "column_array", "read_real_requests",
           "real_requests", "request_columns"]
