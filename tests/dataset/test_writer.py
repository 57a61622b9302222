"""The dataset writer: rows land in the order written though a thread of its own encodes them,
an error on that thread (a full disk while a row group is written) reaches the caller, who then
leaves no dataset; row groups carry the statistics readers select rows by."""
from __future__ import annotations

import errno
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import forensics
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
    with pytest.raises(EnvironmentFault), DatasetWriter(tmp_path / "ds") as w:
        for k in range(writer_module.PENDING_WRITES + 3):
            w.write("unparsed", _unparsed(k * ROW_GROUP_ROWS, ROW_GROUP_ROWS))
        w.finish({})
    assert not (tmp_path / "ds").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_row_groups_carry_statistics_of_the_columns_rows_are_selected_by(tmp_path):
    sample = Path(__file__).resolve().parents[2] / "traces" / "samples" / "healthy" / "trace.jsonl"
    forensics.ingest([sample], tmp_path / "ds")
    ds = ArrowDataset(tmp_path / "ds")
    for table in ("frames", "requests"):
        (path,) = ds.files(table)
        md = pq.ParquetFile(path).metadata
        assert md.num_rows > 0
        names = pq.ParquetFile(path).schema_arrow.names
        group = md.row_group(0)
        kept = {names[i] for i in range(group.num_columns) if group.column(i).is_stats_set}
        assert {"run", "iter", "rank"} <= kept           # replay.frame_windows reads by iter
        assert "request_id" not in kept and "num_requests" not in kept
