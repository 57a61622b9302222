"""Dataset layout 2.x: every table read by path with other engines gives forensics.load's rows,
with names (not codes) and integer / boolean dtypes; one file per run for trace tables; row
groups independent of the number of inputs; table name and schema version in every file; the
``states`` table; 2.1 and 2.2 datasets still load; the write lock and leftovers."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import forensics
from forensics.dataset.schema import PARTITION_BY, SCHEMA_VERSION, SCHEMAS, TABLES
from forensics.dataset.writer import CODECS, DatasetWriter
from forensics.errors import DatasetError

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    """Logs, stats and traces of two runs, and a line nobody parses."""
    d = tmp_path_factory.mktemp("layout")
    extra = d / "odd.log"
    extra.write_text("a line nobody understands\n")
    out = d / "ds"
    forensics.ingest([SAMPLES / "nvbug-6438685", SAMPLES / "healthy" / "trace.jsonl", extra], out)
    return out


@pytest.fixture(scope="module")
def want(two_runs) -> dict[str, list[tuple]]:
    """``forensics.load``'s rows of every table (``_canonical``), read once for all the engines."""
    ds = forensics.load(two_runs)
    return {table: _canonical(ds.table(table), table) for table in TABLES}


def _scalar_columns(table: str) -> list[str]:
    return [f.name for f in SCHEMAS[table] if not pa.types.is_map(f.type)]


def _canonical(df: pd.DataFrame, table: str) -> list[tuple]:
    """Rows as sorted tuples of the scalar columns, nulls as None, numbers as Python numbers."""
    cols = _scalar_columns(table)
    df = df[cols]
    rows = []
    for rec in df.itertuples(index=False, name=None):
        rows.append(tuple(None if (v is None or (not isinstance(v, str) and pd.isna(v)))
                          else (v.item() if hasattr(v, "item") else v) for v in rec))
    return sorted(rows, key=repr)


def test_one_directory_per_table_and_one_file_per_run(two_runs):
    ds = forensics.load(two_runs)
    assert ds.meta["schema_version"] == SCHEMA_VERSION == "2.3"
    assert sorted(p.name for p in two_runs.iterdir() if p.is_dir()) == sorted(TABLES)
    assert not list(two_runs.glob("*.parquet"))  # no table mixes with another under one glob
    runs = ds.traced_runs()
    assert len(runs) == 2
    for table in PARTITION_BY:
        files = sorted(p.name for p in (two_runs / table).iterdir())
        assert files == ["run-00000.parquet", "run-00001.parquet"]
        for f in files:  # each file holds one run, the one _meta.json names
            run = ds.meta["partitions"][f.removesuffix(".parquet")]
            assert set(pq.read_table(two_runs / table / f).column("run").to_pylist()) == {run}
    for run in runs:
        assert [p.name for p in ds.files("requests", run=run)] != []


def test_every_file_names_its_table_and_schema_version(two_runs):
    for table in TABLES:
        for f in (two_runs / table).glob("*.parquet"):
            kv = pq.read_metadata(f).metadata
            assert kv[b"forensics.table"] == table.encode()
            assert kv[b"forensics.schema_version"] == SCHEMA_VERSION.encode()


def test_integers_are_delta_encoded_and_strings_dictionary_encoded(two_runs):
    """The encodings the engines below read: every integer or timestamp column written
    DELTA_BINARY_PACKED (plain in the LZ4 tables), every string column with a dictionary."""
    seen = set()
    for table in TABLES:
        for f in (two_runs / table).glob("*.parquet"):
            meta = pq.read_metadata(f)
            if not meta.num_row_groups:
                continue
            schema = meta.schema.to_arrow_schema()
            group = meta.row_group(0)
            for i in range(group.num_columns):
                col = group.column(i)
                field = schema.field(col.path_in_schema) if "." not in col.path_in_schema else None
                if field is None or not col.num_values:
                    continue
                if table in CODECS and (pa.types.is_integer(field.type)
                                        or pa.types.is_timestamp(field.type)):
                    assert "PLAIN" in col.encodings, (f, field, col.encodings)
                    assert "DELTA_BINARY_PACKED" not in col.encodings, (f, field)
                    assert col.compression == "LZ4", (f, field, col.compression)
                    seen.add("plain")
                elif pa.types.is_integer(field.type) or pa.types.is_timestamp(field.type):
                    assert "DELTA_BINARY_PACKED" in col.encodings, (f, field)
                    seen.add("delta")
                elif pa.types.is_string(field.type) or pa.types.is_dictionary(field.type):
                    assert "RLE_DICTIONARY" in col.encodings, (f, field)
                    seen.add("dictionary")
    assert seen == {"delta", "dictionary", "plain"}


def test_states_table_names_request_states(two_runs):
    ds = forensics.load(two_runs)
    names = dict(zip(ds.states["state"], ds.states["name"]))
    assert names[0] == "UNKNOWN"
    assert names[13] == "GENERATION_IN_PROGRESS"      # LlmRequestState value 13
    # requests.state is the name already; state_value (the code) joins the states table
    joined = ds.requests.merge(ds.states, left_on="state_value", right_on="state", how="left")
    assert len(joined) == len(ds.requests) > 0
    assert (joined["name"] == joined["state_x"].astype(str)).all()


@pytest.mark.parametrize("table", TABLES)
def test_pandas_and_pyarrow_by_path(two_runs, want, table):
    assert len(want[table]) > 0
    by_pandas = pd.read_parquet(two_runs / table)
    by_arrow = pads.dataset(two_runs / table, format="parquet").to_table()
    assert len(by_pandas) == by_arrow.num_rows == len(want[table])
    assert list(by_pandas.columns) == SCHEMAS[table].names
    assert _canonical(by_pandas, table) == want[table]
    assert _canonical(by_arrow.to_pandas(), table) == want[table]


@pytest.mark.parametrize("table", TABLES)
def test_duckdb_by_path(two_runs, want, table):
    duckdb = pytest.importorskip("duckdb")
    cols = ", ".join(f'"{c}"' for c in _scalar_columns(table))
    got = duckdb.sql(f"SELECT {cols} FROM '{two_runs / table}/*.parquet'").df()
    assert _canonical(got, table) == want[table]


@pytest.mark.parametrize("table", TABLES)
def test_polars_by_path(two_runs, want, table):
    pl = pytest.importorskip("polars")
    got = pl.scan_parquet(str(two_runs / table / "*.parquet")).select(_scalar_columns(table)).collect()
    assert _canonical(got.to_pandas(), table) == want[table]


@pytest.mark.parametrize("table", TABLES)
def test_dask_by_path(two_runs, want, table):
    dd = pytest.importorskip("dask.dataframe")
    got = dd.read_parquet(str(two_runs / table), columns=_scalar_columns(table)).compute()
    assert _canonical(got, table) == want[table]


#: (state, state_value) pairs of the samples' requests, from LlmRequestState (replay/states.py).
STATE_PAIRS = {("DISAGG_GENERATION_INIT", 8), ("DISAGG_GENERATION_TRANS_IN_PROGRESS", 9),
               ("DISAGG_GENERATION_TRANS_COMPLETE", 12), ("GENERATION_IN_PROGRESS", 13),
               ("GENERATION_TO_COMPLETE", 14), ("CONTEXT_INIT", 10)}

#: What each engine reads by path for the columns that were codes, objects or floats in 2.2.
ENGINE_TYPES = {
    "pandas": {("requests", "state"): "category", ("requests", "state_value"): "Int16",
               ("frames", "padded"): "boolean", ("frames", "can_queue"): "boolean",
               ("events", "iter"): "Int64", ("events", "kind"): "category",
               ("events", "severity"): "category", ("iterations", "format"): "category"},
    "pyarrow": {("requests", "state"): "dictionary<values=string, indices=int8, ordered=0>",
                ("requests", "state_value"): "int16", ("frames", "padded"): "bool",
                ("frames", "can_queue"): "bool", ("events", "iter"): "int64",
                ("events", "kind"): "dictionary<values=string, indices=int32, ordered=0>",
                ("events", "severity"): "dictionary<values=string, indices=int32, ordered=0>",
                ("iterations", "format"): "dictionary<values=string, indices=int32, ordered=0>"},
    "polars": {("requests", "state"): "Categorical", ("requests", "state_value"): "Int16",
               ("frames", "padded"): "Boolean", ("frames", "can_queue"): "Boolean",
               ("events", "iter"): "Int64", ("events", "kind"): "Categorical",
               ("events", "severity"): "Categorical", ("iterations", "format"): "Categorical"},
    "duckdb": {("requests", "state"): "VARCHAR", ("requests", "state_value"): "SMALLINT",
               ("frames", "padded"): "BOOLEAN", ("frames", "can_queue"): "BOOLEAN",
               ("events", "iter"): "BIGINT", ("events", "kind"): "VARCHAR",
               ("events", "severity"): "VARCHAR", ("iterations", "format"): "VARCHAR"},
    "dask": {("requests", "state"): "category", ("requests", "state_value"): "Int16",
             ("frames", "padded"): "boolean", ("frames", "can_queue"): "boolean",
             ("events", "iter"): "Int64", ("events", "kind"): "category",
             ("events", "severity"): "category", ("iterations", "format"): "category"},
}


def _read_by_path(engine: str, path: Path) -> tuple[dict[str, str], list[tuple]]:
    """(column -> dtype name, (state, state_value) rows or []) of a table read by path."""
    pairs = []
    if engine == "pandas":
        df = pd.read_parquet(path)
        types = {c: str(t) for c, t in df.dtypes.items()}
    elif engine == "pyarrow":
        t = pads.dataset(path, format="parquet").to_table()
        types = {f.name: str(f.type) for f in t.schema}
        df = t.to_pandas()
    elif engine == "polars":
        pl = pytest.importorskip("polars")
        got = pl.read_parquet(str(path / "*.parquet"))
        types = {c: str(t).split("(")[0] for c, t in got.schema.items()}
        df = pd.DataFrame({c: got[c].to_list() for c in ("state", "state_value")}) \
            if "state_value" in got.columns else None
    elif engine == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        rel = duckdb.sql(f"SELECT * FROM '{path}/*.parquet'")
        types = {c: str(t) for c, t in zip(rel.columns, rel.types)}
        df = rel.df()
    else:
        dd = pytest.importorskip("dask.dataframe")
        df = dd.read_parquet(str(path)).compute()
        types = {c: str(t) for c, t in df.dtypes.items()}
    if df is not None and "state_value" in df.columns:
        pairs = list(zip(df["state"].astype(str), (int(v) for v in df["state_value"])))
    return types, pairs


@pytest.mark.parametrize("engine", sorted(ENGINE_TYPES))
def test_engines_read_names_and_typed_columns_by_path(two_runs, engine):
    """Request states as names beside their codes, booleans as booleans and iteration numbers
    as integers (the nulls kept), read by path with no join and no cast."""
    for (table, column), want in ENGINE_TYPES[engine].items():
        types, pairs = _read_by_path(engine, two_runs / table)
        assert types[column] == want, (engine, table, column)
        if table == "requests":
            assert pairs and set(pairs) <= STATE_PAIRS, engine
    ds = forensics.load(two_runs)
    assert ds.frames["padded"].isna().any() and ds.events["iter"].isna().any()   # nulls kept
    assert str(ds.requests["state"].dtype) == "category"
    assert str(ds.requests["state_value"].dtype) == "Int16"


def _write_old_shaped(src: Path, dst: Path, version: str) -> None:
    """Rewrite a dataset as layout 2.2 (or 2.1) wrote it: ``requests.state`` the int code (no
    ``state_value``), kind/severity/format plain strings, no pandas dtypes, the version in every
    file and in ``_meta.json``; 2.1 also without ``frames.kv_precheck_ok`` (added in 2.2)."""
    import shutil
    shutil.copytree(src, dst)
    for table in TABLES:
        for f in (dst / table).glob("*.parquet"):
            t = pq.read_table(f)
            if table == "requests":
                codes = t.column("state_value")
                t = t.drop_columns(["state_value"])
                t = t.set_column(t.column_names.index("state"), "state", codes)
            if table == "frames" and version == "2.1":
                t = t.drop_columns(["kv_precheck_ok"])
            for i, field in enumerate(t.schema):
                if pa.types.is_dictionary(field.type):
                    t = t.set_column(i, field.name, t.column(i).cast(pa.string()))
            t = t.replace_schema_metadata({b"forensics.table": table.encode(),
                                           b"forensics.schema_version": version.encode()})
            pq.write_table(t, f, compression="zstd")
    meta = json.loads((dst / "_meta.json").read_text())
    (dst / "_meta.json").write_text(json.dumps(dict(meta, schema_version=version)))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_an_older_dataset_loads_with_names(two_runs, tmp_path, version):
    from replay.frame_windows import FrameWindows
    from replay.frames import RunFrames
    old = tmp_path / "old.ds"
    _write_old_shaped(two_runs, old, version)
    assert pq.read_schema(old / "requests" / "run-00000.parquet").field("state").type == pa.int16()
    new_ds, old_ds = forensics.load(two_runs), forensics.load(old)
    for table in TABLES:
        got, want = old_ds.arrow(table), new_ds.arrow(table)
        assert got.schema == SCHEMAS[table], table
        if table == "frames" and version == "2.1":   # kv_precheck_ok came in 2.2: null
            assert got.column("kv_precheck_ok").null_count == got.num_rows
            got, want = got.drop_columns(["kv_precheck_ok"]), want.drop_columns(["kv_precheck_ok"])
        assert got.to_pylist() == want.to_pylist(), table
    assert old_ds.arrow("requests", columns=["state_value", "iter"]).column_names == \
        ["state_value", "iter"]
    got = set(zip(old_ds.requests["state"].astype(str), old_ds.requests["state_value"]))
    assert got and got <= STATE_PAIRS
    batches = list(old_ds.batches("requests", columns=["state", "state_value"]))
    assert sum(b.num_rows for b in batches) == len(new_ds.requests)
    for run in new_ds.traced_runs():   # the replay's readers of both layouts: the same frames
        a, b = RunFrames.from_dataset(new_ds, run), RunFrames.from_dataset(old_ds, run)
        assert (a.req_state == b.req_state).all() and a.req_state.size
        wa = [w.req_state for w in FrameWindows(new_ds, run, size=7)]
        wb = [w.req_state for w in FrameWindows(old_ds, run, size=7)]
        assert len(wa) == len(wb) and all((x == y).all() for x, y in zip(wa, wb))


def test_many_small_inputs_make_few_row_groups(tmp_path):
    """100 one-line logs: one row group per table, not one per input."""
    logs = tmp_path / "logs"
    logs.mkdir()
    line = ("[TRT-LLM] [RANK {r}] [I] iter = {i}, global_rank = {r}, rank = {r}, "
            "currank_total_requests = 1/1, host_step_time = 1.0ms, prev_device_step_time = 1.0ms, "
            "timestamp = 2026-01-01 00:00:00, num_scheduled_requests: 1, states = "
            "{{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 1}}\n")
    for i in range(100):
        (logs / f"r{i:03d}.log").write_text(line.format(r=i % 8, i=i))
    forensics.ingest([logs], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.iterations) == 100
    for table in ("iterations",):
        files = list((tmp_path / "ds" / table).glob("*.parquet"))
        assert len(files) == 1 and pq.ParquetFile(files[0]).num_row_groups == 1


def test_row_groups_are_bounded(tmp_path, monkeypatch):
    import forensics.dataset.writer as writer
    monkeypatch.setattr(writer, "ROW_GROUP_ROWS", 1000)
    schema = SCHEMAS["unparsed"]
    with DatasetWriter(tmp_path / "ds") as w:
        for k in range(25):  # 25 batches of 170 rows: 4,250 rows
            w.write("unparsed", pa.table({"source": ["x"] * 170, "line": list(range(k * 170, (k + 1) * 170)),
                                          "text": ["t"] * 170}, schema=schema))
        w.finish({})
    pf = pq.ParquetFile(tmp_path / "ds" / "unparsed" / "part-00000.parquet")
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
    assert sizes == [1000, 1000, 1000, 1000, 250]
    assert pq.read_table(tmp_path / "ds" / "unparsed").column("line").to_pylist() == list(range(4250))


def test_second_writer_fails_with_a_clear_message(tmp_path):
    with DatasetWriter(tmp_path / "ds") as first:
        with pytest.raises(DatasetError, match="another writer is writing this dataset"):
            with DatasetWriter(tmp_path / "ds"):
                pass
        first.finish({})
    with DatasetWriter(tmp_path / "ds") as again:  # the lock is free again
        again.finish({})
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_second_writer_waits_when_asked(tmp_path):
    import threading
    import time

    first = DatasetWriter(tmp_path / "ds").__enter__()
    done = []

    def second():
        with DatasetWriter(tmp_path / "ds", wait=10) as w:
            w.finish({"who": "second"})
        done.append(time.monotonic())

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.3)
    assert not done
    first.finish({"who": "first"})
    first.__exit__(None, None, None)
    t.join(10)
    assert done and forensics.load(tmp_path / "ds").meta["who"] == "second"


def test_leftovers_of_dead_writers_are_removed_on_the_next_write(tmp_path):
    forensics.ingest([SAMPLES / "healthy" / "trace.jsonl"], tmp_path / "ds")
    stale = tmp_path / ".ds.tmp-999999-abc"
    (stale / "frames").mkdir(parents=True)
    (tmp_path / ".ds.lock").write_text("999999")   # a killed writer's lock file
    forensics.ingest([SAMPLES / "healthy" / "trace.jsonl"], tmp_path / "ds")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_a_dataset_stranded_by_an_interrupted_fallback_swap_is_restored(tmp_path):
    forensics.ingest([SAMPLES / "healthy" / "trace.jsonl"], tmp_path / "ds")
    os.rename(tmp_path / "ds", tmp_path / ".ds.old-999999")   # killed between the two renames
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.frames) > 0 and (tmp_path / "ds" / "_meta.json").is_file()


def test_fallback_swap_without_exchange(tmp_path, monkeypatch):
    import forensics.dataset.writer as writer
    monkeypatch.setattr(writer, "exchange", lambda a, b: False)
    forensics.ingest([SAMPLES / "healthy" / "trace.jsonl"], tmp_path / "ds")
    forensics.ingest([SAMPLES / "nvbug-6438685" / "trace.jsonl"], tmp_path / "ds")
    assert forensics.load(tmp_path / "ds").traced_runs()[0].startswith("sim-nvbug")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_unknown_major_version_is_a_clear_message(tmp_path):
    forensics.ingest([SAMPLES / "healthy" / "trace.jsonl"], tmp_path / "ds")
    meta = json.loads((tmp_path / "ds" / "_meta.json").read_text())
    (tmp_path / "ds" / "_meta.json").write_text(json.dumps(dict(meta, schema_version="3.0")))
    with pytest.raises(DatasetError, match="schema version '3.0' is not supported"):
        forensics.load(tmp_path / "ds")


def test_many_runs_keep_few_files_open(tmp_path, monkeypatch):
    """Runs interleaved beyond the open-file limit: a run written again gets a further file,
    and every reader still sees all its rows."""
    import forensics.dataset.writer as writer
    from replay.frames import RunFrames
    monkeypatch.setattr(writer, "MAX_OPEN_FILES", 3)
    run = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
           "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": False,
           "overlap_scheduler": False, "build": "prefix-2026"}

    def trace(name, run_id, rank):
        lines = [dict(run, run_id=run_id, rank=rank)] + [
            {"kind": "frame", "iter": i, "rank": rank,
             "requests": [{"id": 10 * rank + i, "state": "GENERATION_IN_PROGRESS"}]}
            for i in range(5)]
        p = tmp_path / name
        p.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return p

    files = [trace("a0.jsonl", "A", 0), trace("b0.jsonl", "B", 0), trace("b1.jsonl", "B", 1),
             trace("c0.jsonl", "C", 0), trace("c1.jsonl", "C", 1), trace("a1.jsonl", "A", 1)]
    forensics.ingest(files, tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert [f.name for f in ds.files("frames", run="A")] == ["run-00000.parquet",
                                                            "run-00000-1.parquet"]
    assert len(ds.frames) == 30 and pd.read_parquet(tmp_path / "ds" / "frames").shape[0] == 30
    frames = RunFrames.from_dataset(ds, "A")
    assert frames.num_ranks == 2 and len(pd.read_parquet(tmp_path / "ds" / "requests")) == 30
