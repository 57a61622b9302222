"""`forensics ingest` and `forensics summary` through click's CliRunner, then reopened via the library."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import cli

LOG = ("[11/30/2026-10:00:0{i}] [TRT-LLM] [RANK {r}] [I] iter = {i}, global_rank = {r}, rank = {r}, "
       "num_scheduled_requests = 1, kv_cache_util = 0.5, adp_dummy_ctx_tokens = 0, "
       "adp_dummy_gen_tokens = {d}, currank_total_requests = 2/4, host_step_time = 9.5ms, "
       "prev_device_step_time = 8.0ms, timestamp = 2026-11-30 10:00:0{i}, "
       "states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 1}}")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    for r in range(2):
        lines = [LOG.format(i=i, r=r, d=1 if (r, i) == (1, 3) else 0) for i in range(1, 5)]
        lines.append(f"[11/30/2026-10:00:09] [TRT-LLM] [RANK {r}] [E] Error in event loop: boom")
        (d / f"rank{r}.log").write_text("\n".join(lines) + "\n")
    (d / "stats.jsonl").write_text("\n".join(
        json.dumps({"iter": i, "attentionDpRank": r, "numActiveRequests": 1})
        for i in range(4) for r in range(2)) + "\n")
    return d


def test_ingest_then_load(runner: CliRunner, logs: Path, tmp_path: Path):
    out = tmp_path / "crash.ds"
    result = runner.invoke(cli, ["ingest", str(logs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"ingested 3 input(s) into {out}"
    assert "inputs: 3 (log 2, stats 1)" in lines
    assert "ranks: 0-1 (2 ranks)" in lines
    assert "iter range (iterations): 1..4" in lines
    assert "iter range (stats): 0..3" in lines
    assert "  iterations          8" in lines
    assert "  stats               8" in lines
    assert "iteration line formats: V5 8" in lines
    ds = forensics.load(out)
    assert len(ds.iterations) == 8 and len(ds.stats) == 8
    assert ds.iterations.loc[ds.iterations.adp_dummy_gen_tokens > 0, ["rank", "iter"]].values.tolist() == [[1, 3]]
    assert list(ds.events.loc[ds.events.kind == "event_loop_error", "rank"]) == [0, 1]


def test_ingest_refused_input_exits_2_but_writes_the_rest(runner: CliRunner, logs: Path,
                                                          tmp_path: Path):
    blob = tmp_path / "blob.log"
    blob.write_bytes(b"\x00\x01\x02" * 50)
    out = tmp_path / "crash.ds"
    result = runner.invoke(cli, ["ingest", str(logs / "rank0.log"), str(blob),
                                 str(tmp_path / "gone.log"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.splitlines()[0] == f"ingested 1 input(s) into {out}"
    assert f"  {tmp_path / 'gone.log'}: no such file or directory" in result.output
    assert f"  {blob}: binary file, not a text log, JSON or trace; refused" in result.output
    assert len(forensics.load(out).iterations) == 4


def test_ingest_kind_override(runner: CliRunner, logs: Path, tmp_path: Path):
    out = tmp_path / "ds"
    result = runner.invoke(cli, ["ingest", str(logs / "stats.jsonl"), "--kind", "log", "-o", str(out)])
    assert result.exit_code == 0
    assert "inputs: 1 (log 1)" in result.output
    assert len(forensics.load(out).unparsed) == 8


def test_ingest_usage_errors(runner: CliRunner, tmp_path: Path):
    result = runner.invoke(cli, ["ingest", str(tmp_path / "none.log"), "-o", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "Error: nothing to ingest" in result.output
    assert not (tmp_path / "d").exists()
    assert runner.invoke(cli, ["ingest", "-o", str(tmp_path / "d")]).exit_code == 2   # no INPUT
    result = runner.invoke(cli, ["ingest", str(tmp_path), "--kind", "pcap", "-o", "x"])
    assert result.exit_code == 2 and "'pcap' is not one of" in result.output


def test_bad_trace_names_file_and_line(runner: CliRunner, tmp_path: Path):
    bad = tmp_path / "run.jsonl"
    bad.write_text('{"kind": "frame", "iter": 1, "rank": 0, "requests": []}\n')
    result = runner.invoke(cli, ["ingest", str(bad), "-o", str(tmp_path / "d")])  # detected as trace
    assert result.exit_code == 2
    assert f"Error: {bad}:1: " in result.output
    assert not (tmp_path / "d").exists()


def test_summary_text_and_json(runner: CliRunner, logs: Path, tmp_path: Path):
    out = tmp_path / "crash.ds"
    assert runner.invoke(cli, ["ingest", str(logs), "-o", str(out)]).exit_code == 0
    text = runner.invoke(cli, ["summary", str(out)])
    assert text.exit_code == 0
    assert text.output.splitlines()[0] == f"dataset {out} (schema 2.3, adp-forensics {forensics.__version__})"
    assert "  event_loop_error        2" in text.output.splitlines()
    js = runner.invoke(cli, ["summary", str(out), "--json"])
    assert js.exit_code == 0
    data = json.loads(js.output)
    assert data["ranks"] == [0, 1]
    assert data["iter_ranges"] == {"iterations": [1, 4], "stats": [0, 3]}
    assert data["events_by_kind"] == {"event_loop_error": 2}
    assert data["formats"] == {"V5": 8}
    assert data["rows"]["iterations"] == 8 and data["rows"]["unparsed"] == 0


def test_summary_of_a_non_dataset(runner: CliRunner, tmp_path: Path):
    result = runner.invoke(cli, ["summary", str(tmp_path)])
    assert result.exit_code == 2
    assert f"Error: {tmp_path}: not a dataset (no _meta.json)" in result.output


@pytest.mark.parametrize("cmd", sorted(cli.commands))
def test_help_teaches(runner: CliRunner, cmd: str):
    """Every command: a one-line summary that ``forensics --help`` shows whole (at 80 columns:
    about 60 characters beside the names), and a real example in its ``--help``."""
    result = runner.invoke(cli, [cmd, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output and f"forensics {cmd} " in result.output
    summary = cli.commands[cmd].get_short_help_str(limit=60)
    assert summary and not summary.endswith("...") and len(summary) <= 60, summary
