"""Fleet, sweep and postmortem on a Dask ``LocalCluster`` give what the serial path gives.

One cluster (2 worker processes, started through ``forensics.cluster.connect``) serves the whole
module: starting one costs seconds. Tests that need it skip when the ``[dask]`` extra is not
installed; the tests of what happens *without* the extra always run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import forensics
from forensics import cluster
from forensics.cli import cli
from forensics.errors import TraceFormatError
from forensics.fleet_table import fleet_table
from forensics.readers.on_cluster import ingest_parallel

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "traces" / "samples"
NVBUG = SAMPLES / "nvbug-6438685"
POLS = ["prefix-2026", "fix-16161", "legacy-2025"]

needs_dask = pytest.mark.skipif(not cluster.dask_available(),
                                reason="needs the [dask] extra (dask, distributed)")


@pytest.fixture(scope="module")
def client():
    if not cluster.dask_available():
        pytest.skip("needs the [dask] extra (dask, distributed)")
    with cluster.connect(workers=2) as c:
        yield c


def _split_by_rank(trace: Path, out: Path) -> list[Path]:
    """The trace as one file per rank, as a live fleet records it (each file starts with the run
    record, naming its rank), plus the log and stats beside it: one run directory."""
    lines = trace.read_text().splitlines()
    record = json.loads(lines[0])
    frames = [json.loads(x) for x in lines[1:] if x.strip()]
    out.mkdir(parents=True)
    files = []
    for rank in range(record["tp_size"]):
        p = out / f"trace-rank{rank}.jsonl"
        mine = [f for f in frames if f.get("rank") == rank]
        p.write_text("\n".join(json.dumps(r) for r in [dict(record, rank=rank), *mine]) + "\n")
        files.append(p)
    for name in ("executor.log", "stats.jsonl"):
        (out / name).write_bytes((trace.parent / name).read_bytes())
    return files


def _tables(ds) -> dict[str, pd.DataFrame]:
    from forensics.dataset.schema import TABLES
    return {t: ds.table(t) for t in TABLES}


@needs_dask
def test_fleet_on_a_cluster_equals_serial(client):
    """More runs than workers: one task per run. The NVBUG sample's recorded build asserts on
    rank 2 at iteration 76 (its trace.expect.toml); fix-16161 survives it."""
    inputs = [str(NVBUG), str(NVBUG / "trace.jsonl"), str(SAMPLES / "healthy"),
              str(SAMPLES / "regressions" / "nvbug-6438685-min.jsonl")]
    seen = []
    on_cluster = forensics.fleet(inputs, POLS, client=client, done=lambda n, total: seen.append((n, total)))
    pd.testing.assert_frame_equal(on_cluster, fleet_table(inputs, POLS))
    assert seen[-1] == (4, 4) and len(seen) == 4
    row = on_cluster.iloc[0]
    assert (row["prefix-2026.crash_iter"], row["prefix-2026.crash_rank"]) == (76, 2)
    assert not row["fix-16161.crash"] and not row["fix-16161.leak"]
    assert list(on_cluster["input"]) == inputs


@needs_dask
def test_per_rank_files_are_ingested_in_parallel(client, tmp_path):
    """Ten files of one run (8 per-rank traces, the log, the stats), one task each, merged:
    every table reads as a serial ingest of the same directory does."""
    run = tmp_path / "run"
    _split_by_rank(NVBUG / "trace.jsonl", run)
    serial = forensics.ingest([run], tmp_path / "serial.ds")
    done = []
    path = ingest_parallel([run], tmp_path / "parallel.ds", client=client,
                                   done=lambda n, total: done.append(n))
    assert len(done) == 10
    par = forensics.load(path)
    ser = forensics.load(serial.path)
    for name, table in _tables(ser).items():
        pd.testing.assert_frame_equal(_tables(par)[name], table, obj=name)
    assert par.meta["inputs"] == ser.meta["inputs"] and par.meta["rows"] == ser.meta["rows"]
    assert len(par.traced_runs()) == 1 and par.meta["rows"]["frames"] > 0

    # One run and two workers: fleet ingests that run file by file, then replays it.
    t = forensics.fleet([str(run)], POLS, client=client)
    pd.testing.assert_frame_equal(t, fleet_table([str(run)], POLS))
    assert (t.loc[0, "prefix-2026.crash_iter"], t.loc[0, "prefix-2026.crash_rank"]) == (76, 2)
    assert t.loc[0, "ranks"] == 8


@needs_dask
def test_a_frame_in_two_rank_files_is_refused_on_the_cluster_too(client, tmp_path):
    run = tmp_path / "run"
    files = _split_by_rank(NVBUG / "trace.jsonl", run)
    first_frame = files[0].read_text().splitlines()[1]
    with files[1].open("a") as f:  # rank 0's iteration-0 frame again, in rank 1's file
        f.write(first_frame + "\n")
    with pytest.raises(TraceFormatError, match=r"duplicate frame \(iter 0, rank 0\)") as serial:
        forensics.ingest([run], tmp_path / "serial.ds")
    with pytest.raises(TraceFormatError, match=r"duplicate frame \(iter 0, rank 0\)") as par:
        ingest_parallel([run], tmp_path / "parallel.ds", client=client)
    assert "trace-rank1.jsonl" in str(serial.value) and "trace-rank1.jsonl" in str(par.value)
    assert not (tmp_path / "parallel.ds").exists()


@needs_dask
def test_sweep_on_a_cluster_equals_serial(client):
    spec = {"grid": {"ranks": [4], "overlap": [True, False]}, "policies": ["prefix-2026", "fix-16161"],
            "seeds": 2, "iters": 80}
    on_cluster = forensics.sweep(spec, client=client)
    serial = forensics.sweep(spec)
    pd.testing.assert_frame_equal(on_cluster.runs, serial.runs)
    pd.testing.assert_frame_equal(on_cluster.configurations, serial.configurations)
    assert len(on_cluster.runs) == 8 and on_cluster.runs["agrees"].all()


@needs_dask
def test_cli_fleet_and_postmortem_on_a_running_scheduler(client, tmp_path):
    """``--scheduler ADDRESS`` joins the running cluster: same JSON, same report findings."""
    address = client.scheduler.address
    runner = CliRunner()
    args = ["fleet", str(NVBUG), str(SAMPLES / "healthy"), "--policy", "prefix-2026", "--json"]
    serial = runner.invoke(cli, args)
    joined = runner.invoke(cli, args + ["--scheduler", address, "-o", str(tmp_path / "fleet.parquet")])
    assert serial.exit_code == joined.exit_code == 1, joined.output
    assert json.loads(joined.stdout) == json.loads(serial.stdout)
    assert address in joined.stderr
    table = pd.read_parquet(tmp_path / "fleet.parquet")
    assert list(table["prefix-2026.crash_iter"].astype("Int64")) == [76, pd.NA]

    pm = [runner.invoke(cli, ["postmortem", str(NVBUG), "-o", str(tmp_path / name), "-q", *extra])
          for name, extra in (("serial", []), ("joined", ["--scheduler", address]))]
    assert [r.exit_code for r in pm] == [1, 1], pm[1].output
    found = [json.loads((tmp_path / n / "findings.json").read_text()) for n in ("serial", "joined")]
    for f in found:
        f["dataset"].pop("path", None)
    assert found[0] == found[1]
    assert found[1]["verdicts"]["prefix-2026"]["crash"]["iter"] == 76


def test_workers_without_the_extra_names_it(monkeypatch, near_run):
    monkeypatch.setattr(cluster, "dask_available", lambda: False)
    runner = CliRunner()
    for cmd in (["fleet", str(near_run)], ["sweep", "--grid", "ranks=4"],
                ["postmortem", str(near_run), "-o", str(near_run.parent / "r")]):
        r = runner.invoke(cli, cmd + ["--workers", "2"])
        assert r.exit_code == 2, r.output
        assert "[dask] extra" in r.output and 'pip install "adp-forensics[dask]"' in r.output
    # Without the options everything runs as before.
    assert runner.invoke(cli, ["fleet", str(near_run), "--policy", "fix-16161"]).exit_code == 0


def test_cluster_options_are_checked(near_run):
    runner = CliRunner()
    r = runner.invoke(cli, ["fleet", str(near_run), "--workers", "0"])
    assert r.exit_code == 2 and "--workers" in r.output
    r = runner.invoke(cli, ["fleet", str(near_run), "--workers", "2", "--scheduler", "tcp://x:1"])
    assert r.exit_code == 2 and "exclusive" in r.output


def test_import_forensics_does_not_import_dask():
    code = ("import sys, forensics, forensics.fleet_table, forensics.what_if, forensics.cluster, forensics.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.strip() == "[]"


@pytest.fixture
def near_run(tmp_path) -> Path:
    """A two-rank trace (the near-miss run of tests/test_fleet.py, where fix-16161 is clean)."""
    run = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
           "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
           "overlap_scheduler": True, "build": "prefix-2026", "run_id": "hand"}
    frames = [
        {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": 14}], "expected": 1,
         "padded": False, "scheduled": 0, "can_queue": False},
        {"kind": "frame", "iter": 0, "rank": 1, "requests": [{"id": 2, "state": 8}], "expected": 1,
         "padded": True, "scheduled": 1, "can_queue": False},
        {"kind": "frame", "iter": 1, "rank": 0, "requests": [], "expected": 2, "padded": True,
         "scheduled": 1, "can_queue": True},
        {"kind": "frame", "iter": 1, "rank": 1, "requests": [{"id": 2, "state": 12},
                                                             {"id": 0, "state": 13, "dummy": True}],
         "expected": 2, "padded": False, "scheduled": 2, "can_queue": True},
    ]
    p = tmp_path / "near" / "trace.jsonl"
    p.parent.mkdir()
    p.write_text("\n".join(json.dumps(r) for r in [run, *frames]) + "\n")
    return p


@needs_dask
def test_fleet_of_a_simulated_grid_on_a_cluster(client, tmp_path):
    """A runs DataFrame (simulate_grid's) keeps its parameter columns and dtypes on the cluster."""
    from forensics.fleet_table import simulate_grid

    grid = simulate_grid(tmp_path, grid={"ranks": (4,), "overlap": (True, False)}, iters=60)
    on_cluster = forensics.fleet(grid, ["prefix-2026"], client=client, layout="long")
    pd.testing.assert_frame_equal(on_cluster, fleet_table(grid, ["prefix-2026"], layout="long"))
    # The simulator ran prefix-2026 forward: the replays on the workers agree with what it saw.
    assert list(on_cluster["crash"]) == [v == "crash" for v in grid["sim_verdict"]]
    assert list(on_cluster["overlap"]) == [True, False]
