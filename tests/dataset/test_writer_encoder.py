"""The writer's encoding thread: rows land in the order written, and an error on that thread
(a full disk while a row group is written) reaches the caller, who then leaves no dataset."""
from __future__ import annotations

import errno

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics.dataset import writer as writer_module
from forensics.dataset.schema import ROW_GROUP_ROWS, SCHEMAS
from forensics.dataset.tables import ArrowDataset
from forensics.dataset.writer import DatasetWriter
from forensics.errors import EnvironmentFault


def _unparsed(first: int, n: int) -> pa.Table:
    schema = SCHEMAS["unparsed"]
    cols = {f.name: pa.nulls(n, f.type) for f in schema}
    cols["source"] = pa.array(["x.log"] * n)
    cols["line"] = pa.array(range(first, first + n), pa.int64())
    cols["text"] = pa.array([f"line {i}" for i in range(first, first + n)])
    return pa.table([cols[f.name] for f in schema], schema=schema)


def test_rows_come_back_in_the_order_written(tmp_path):
    n = ROW_GROUP_ROWS // 3 + 7        # several row groups, cut inside the batches
    with DatasetWriter(tmp_path / "ds") as w:
        for k in range(8):
            w.write("unparsed", _unparsed(k * n, n))
        w.finish({})
    lines = ArrowDataset(tmp_path / "ds").arrow("unparsed", columns=["line"]).column("line")
    assert lines.to_pylist() == list(range(8 * n))


def test_an_error_while_encoding_reaches_the_caller(tmp_path, monkeypatch):
    def full(self, table, row_group_size=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(EnvironmentFault):
        with DatasetWriter(tmp_path / "ds") as w:
            for k in range(writer_module.PENDING_WRITES + 3):
                w.write("unparsed", _unparsed(k * ROW_GROUP_ROWS, ROW_GROUP_ROWS))
            w.finish({})
    assert not (tmp_path / "ds").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []
