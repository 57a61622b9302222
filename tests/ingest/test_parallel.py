"""Reading an ingest's files at once, on threads (the default) or in processes, gives the
serial ingest's dataset."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest
import zstandard

import forensics
from forensics.dataset.schema import TABLES
from forensics.errors import TraceFormatError
from forensics.readers import ingest
from forensics.readers import parallel

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"
NVBUG = SAMPLES / "nvbug-6438685"
#: 4 ranks: split by rank, 6 files, each read in a process of its own with ``jobs=2``
HEALTHY = SAMPLES / "healthy"


def _same_dataset(a, b) -> None:
    da, db = forensics.load(a.path), forensics.load(b.path)
    for t in TABLES:   # rows and their order, dtypes
        pd.testing.assert_frame_equal(da.table(t), db.table(t), obj=t)
    assert da.meta["inputs"] == db.meta["inputs"] and da.meta["rows"] == db.meta["rows"]
    assert da.meta["refused"] == db.meta["refused"]


def _split_by_rank(trace: Path, out: Path, extra: dict | None = None) -> None:
    """One trace file per rank (each with the run record naming its rank), the log and stats
    beside; ``extra`` adds a frame line to a rank's file: {rank: frame}."""
    lines = trace.read_text().splitlines()
    record = json.loads(lines[0])
    frames = [json.loads(x) for x in lines[1:] if x.strip()]
    out.mkdir(parents=True)
    for rank in range(record["tp_size"]):
        mine = [f for f in frames if f.get("rank") == rank] + [(extra or {}).get(rank)]
        rows = [dict(record, rank=rank), *[f for f in mine if f]]
        (out / f"trace-rank{rank}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for name in ("executor.log", "stats.jsonl"):
        (out / name).write_bytes((trace.parent / name).read_bytes())


@pytest.fixture
def threads(monkeypatch):
    """The default reading on threads, for inputs of any size on any machine."""
    monkeypatch.setattr(parallel, "THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "usable_cores", lambda: 2)


def test_how_files_are_read(tmp_path, monkeypatch):
    small, big = tmp_path / "a.jsonl", tmp_path / "b.jsonl.zst"
    small.write_bytes(b"{}\n" * 10)
    big.write_bytes(zstandard.ZstdCompressor().compress(b"{}\n" * (1 << 20)))   # 3 MiB of text
    monkeypatch.setattr(parallel, "usable_cores", lambda: 8)
    monkeypatch.setattr(parallel, "THREADS_MIN_BYTES", 3 << 20)
    # explicit jobs: processes (at most one per file); 1: serial
    assert parallel.readers(4, [small, big]) == ("processes", 2)
    assert parallel.readers(1, [small, big]) == ("serial", 1)
    assert parallel.readers(3, [big]) == ("serial", 1)
    # default: two threads when the files hold enough text, counted decompressed
    assert big.stat().st_size < 3 << 20
    assert parallel.readers(None, [small, big]) == ("threads", 2)
    assert parallel.readers(None, [small, big, big, big]) == ("threads", parallel.MAX_THREADS)
    assert parallel.readers(None, [small, small]) == ("serial", 1)
    assert parallel.readers(None, [big]) == ("serial", 1)
    monkeypatch.setattr(parallel, "usable_cores", lambda: 1)
    assert parallel.readers(None, [small, big]) == ("serial", 1)


def test_default_is_serial_inside_a_cluster_task(tmp_path, monkeypatch, threads):
    """A Dask worker's task reads its files one after the other (the cluster uses the cores)."""
    distributed = pytest.importorskip("distributed")
    paths = [tmp_path / "a", tmp_path / "b"]
    for p in paths:
        p.write_bytes(b"x")
    assert parallel.readers(None, paths) == ("threads", 2)
    monkeypatch.setattr(distributed, "get_worker", lambda: object())
    assert parallel.readers(None, paths) == ("serial", 1)


def test_samples_in_parallel_equal_serial(tmp_path, threads):
    """Six files of two runs, two processes, then two threads: every table reads the same (rows, order, dtypes);
    the cached-dataset fingerprints are the same."""
    inputs = [SAMPLES / "nvbug-6438685", SAMPLES / "healthy"]
    serial = ingest(inputs, tmp_path / "serial.ds", jobs=1)
    for name, jobs in (("parallel", 2), ("threads", None)):
        par = ingest(inputs, tmp_path / f"{name}.ds", jobs=jobs)
        _same_dataset(serial, par)
        summary = {k: v for k, v in par.summary.to_dict().items() if k != "path"}
        assert par.rows == serial.rows
        assert summary == {k: v for k, v in serial.summary.to_dict().items() if k != "path"}
        assert not list(tmp_path.glob(f".{name}.ds*")), "scratch parts left behind"
        assert not list((tmp_path / f"{name}.ds").glob(".scratch"))


def test_per_rank_trace_files_in_parallel(tmp_path, threads):
    """Six files of one run (4 per-rank traces): the frames of the run follow the file order."""
    run = tmp_path / "run"
    _split_by_rank(HEALTHY / "trace.jsonl", run)
    serial = ingest([run], tmp_path / "s.ds", jobs=1)
    _same_dataset(serial, ingest([run], tmp_path / "p.ds", jobs=2))
    _same_dataset(serial, ingest([run], tmp_path / "t.ds"))


def test_a_frame_in_two_rank_files_is_refused_in_parallel(tmp_path, threads):
    """The checks across files run as in a serial ingest: same error, file and line."""
    lines = (HEALTHY / "trace.jsonl").read_text().splitlines()
    frame0 = next(json.loads(x) for x in lines[1:] if json.loads(x).get("rank") == 0)
    run = tmp_path / "run"
    _split_by_rank(HEALTHY / "trace.jsonl", run, extra={1: frame0})   # rank 0's frame again
    errors = []
    for jobs in (1, 2, None):
        with pytest.raises(TraceFormatError) as e:
            ingest([run], tmp_path / f"j{jobs}.ds", jobs=jobs)
        errors.append(str(e.value))
        assert not (tmp_path / f"j{jobs}.ds").exists()
    assert errors[0] == errors[1] == errors[2] and "duplicate frame" in errors[0] and "trace-rank1" in errors[0]


def test_bad_input_in_a_worker_is_raised_with_file_and_line(tmp_path, threads):
    """A trace that breaks its format in a worker: the typed error, naming file and line, as a
    serial ingest raises it; nothing is written."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("executor.log", "stats.jsonl"):
        (run / name).write_bytes((NVBUG / name).read_bytes())
    lines = (NVBUG / "trace.jsonl").read_text().splitlines()
    lines[5] = lines[5][:-5]           # a truncated JSON object on line 6
    (run / "trace.jsonl").write_text("\n".join(lines) + "\n")
    got = []
    for jobs in (1, 2, None):
        with pytest.raises(TraceFormatError) as e:
            ingest([run], tmp_path / f"j{jobs}.ds", jobs=jobs)
        got.append((e.value.path, e.value.line, e.value.message))
        assert not (tmp_path / f"j{jobs}.ds").exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("ingest")]
    assert got[0] == got[1] == got[2] and got[0][1] == 6 and got[0][0].endswith("trace.jsonl")
