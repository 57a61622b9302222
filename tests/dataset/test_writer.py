"""The dataset writer: rows land in the order written though a thread of its own encodes them,
an error on that thread (a full disk while a row group is written) reaches the caller, who then
leaves no dataset; row groups carry the statistics readers select rows by."""
from __future__ import annotations

import base64
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


def _requests(run: str, n: int, first_iter: int = 0) -> pa.Table:
    schema = SCHEMAS["requests"]
    states = pa.DictionaryArray.from_arrays(pa.array([i % 3 for i in range(n)], pa.int8()),
                                            pa.array(["A", "B", "C"]))
    cols = {"run": pa.array([run] * n), "iter": pa.array(range(first_iter, first_iter + n), pa.int64()),
            "rank": pa.array([i % 4 for i in range(n)], pa.int32()),
            "pos": pa.array([i % 5 for i in range(n)], pa.int32()),
            "request_id": pa.array(range(1000, 1000 + n), pa.int64()), "state": states,
            "state_value": pa.array([i % 3 for i in range(n)], pa.int16()),
            "dummy": pa.array([i % 7 == 0 for i in range(n)])}
    return pa.table([cols[f.name] for f in schema], schema=schema)


def test_a_run_column_written_from_its_partition_value_is_the_same_file(tmp_path):
    """A trace batch's run column goes to Parquet as a one-value dictionary (cheaper to
    encode); the file is the one the strings make: same bytes, same Arrow schema stored."""
    n = ROW_GROUP_ROWS + 11
    data = _requests("run-a", n)
    with DatasetWriter(tmp_path / "ds") as w:
        w.write("requests", data.slice(0, 5), part="run-a")
        w.write("requests", data.slice(5), part="run-a")
        w.finish({})
    (path,) = ArrowDataset(tmp_path / "ds").files("requests")
    got = pq.read_table(path)
    assert got.equals(data) and got.schema.equals(SCHEMAS["requests"])
    stored = pq.read_metadata(path).metadata
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored[b"ARROW:schema"])))
    assert schema.equals(SCHEMAS["requests"])
    md = pq.ParquetFile(path).metadata
    column = md.row_group(0).column(0)
    assert column.path_in_schema == "run" and "RLE_DICTIONARY" in column.encodings
    assert (column.statistics.min, column.statistics.max) == ("run-a", "run-a")
    # the reference: the strings written with the same options, the schema stored by pyarrow
    ref = tmp_path / "ref.parquet"
    with pq.ParquetWriter(ref, schema, compression=writer_module.CODECS["requests"],
                          use_dictionary=["run", "state"], column_encoding={},
                          write_statistics=sorted(writer_module.STATISTICS_COLUMNS)) as ref_writer:
        ref_writer.write_table(data.replace_schema_metadata(schema.metadata),
                               row_group_size=ROW_GROUP_ROWS)
    assert ref.read_bytes() == path.read_bytes()


def test_a_batch_not_of_its_stated_run_goes_by_its_rows(tmp_path):
    """``part`` is checked at the batch's ends: rows of another run go to that run's file."""
    with DatasetWriter(tmp_path / "ds") as w:
        w.write("requests", pa.concat_tables([_requests("run-a", 3), _requests("run-b", 2, 3)]),
                part="run-a")
        w.finish({})
    ds = ArrowDataset(tmp_path / "ds")
    for run, n in (("run-a", 3), ("run-b", 2)):
        (path,) = ds.files("requests", run=run)
        assert pq.read_table(path).column("run").to_pylist() == [run] * n
