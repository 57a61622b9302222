"""``forensics explore``: exit codes, ``--json``, ``-o`` traces ``forensics replay`` reads,
``--export-tests`` files that pass."""
from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from forensics.cli import cli

#: The NVBug configuration only (disaggregated, pp 1, no overlap, llama, max_batch_size 1).
NARROW = ["--mode", "disagg", "--pp", "1", "--overlap", "off", "--model", "llama",
          "--max-batch-size", "1", "--dkv", "off"]


def test_json_is_one_object_and_a_failure_exits_1():
    out = CliRunner().invoke(cli, ["explore", "--policy", "prefix-2026", *NARROW, "--json"])
    assert out.exit_code == 1, out.output
    doc = json.loads(out.stdout)
    (res,) = doc["results"]
    assert doc["failed"] is True and res["policy"] == "prefix-2026"
    assert res["bound"] == {"ranks": 2, "requests": 2, "iterations": 3, "min_ranks": 1}
    kinds = {(w["kind"], w["cause"]): (w["ranks"], w["iterations"], w["requests"])
             for w in res["witnesses"]}
    assert kinds[("crash", "GENERATION_TO_COMPLETE")] == (2, 3, 2)
    assert all(w["confirmed"] for w in res["witnesses"])


def test_no_counterexample_exits_0():
    out = CliRunner().invoke(cli, ["explore", "--policy", "newest", *NARROW, "--requests", "1"])
    assert out.exit_code == 0, out.output
    assert "no counterexample in " in out.output and "schedules up to the bound" in out.output


def test_witness_traces_replay_and_exported_tests_pass(tmp_path):
    traces, tests = tmp_path / "w", tmp_path / "t"
    out = CliRunner().invoke(cli, ["explore", "--policy", "prefix-2026", *NARROW, "-o", str(traces),
                                   "--export-tests", str(tests)])
    assert out.exit_code == 1, out.output
    crash = traces / "prefix-2026--crash-generation-to-complete.jsonl"
    assert crash.is_file()
    replayed = CliRunner().invoke(cli, ["replay", str(crash), "--policy", "prefix-2026", "--json"])
    assert replayed.exit_code == 1, replayed.output  # replay exits 1 on a crash
    verdict = json.loads(replayed.stdout)["policies"]["prefix-2026"]
    assert verdict["verdict"] == "crash"
    assert (verdict["crash"]["iter"], verdict["crash"]["active"], verdict["crash"]["expected"]) == (2, 2, 1)
    files = sorted(tests.glob("test_explore_*.py"))
    assert len(files) == len(list(traces.glob("*.jsonl")))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tests)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_existing_files_are_refused_without_force(tmp_path):
    args = ["explore", "--policy", "prefix-2026", *NARROW, "--iterations", "1", "-o", str(tmp_path)]
    assert CliRunner().invoke(cli, args).exit_code == 1
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 2 and "exist" in again.output
    assert CliRunner().invoke(cli, args + ["--force"]).exit_code == 1
