"""Tests of the pytest plugin (forensics.pytest_plugin), driven through ``pytester``.

The trace is the hand-worked NVBug 6438685 chain on two ranks (disaggregated, overlap loop,
max_batch_size 2, cap 2):

    iter 1  rank 0: ids 4, 5 in DISAGG_GENERATION_TRANS_IN_PROGRESS   rank 1: id 2 GENERATION_TO_COMPLETE
    iter 2  rank 0: ids 4, 5 in GENERATION_IN_PROGRESS                rank 1: nothing

prefix-2026: rank 0 is padded at iter 1, rank 1 counts its TO_COMPLETE request as schedulable,
gets no dummy and schedules 0, the fleet skips and rank 0's dummy leaks (first leak iter 1); at
iter 2 rank 0 holds 2 + 1 = 3 > expected min(max(ceil(3/2), 3), cap 2) = 2: assert on rank 0.
fix-16161: rank 1 counts 0 in the window and is padded too, nothing skips, nothing leaks.
"""
from __future__ import annotations

import json

import pytest

# Imported here so pytester's in-process runs reuse them: pytester drops modules first imported
# by an inner run, and numpy's C extension cannot be imported twice in one process.
import forensics.expectations  # noqa: F401
import forensics.readers  # noqa: F401
import forensics.trace_records  # noqa: F401
import replay  # noqa: F401
import replay.explain  # noqa: F401

pytest_plugins = ["pytester"]

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026"}


def frame(it, rank, reqs):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs]}


FRAMES = [frame(1, 0, [(4, "DISAGG_GENERATION_TRANS_IN_PROGRESS"), (5, 9)]),
          frame(1, 1, [(2, "GENERATION_TO_COMPLETE")]),
          frame(2, 0, [(4, 13), (5, 13)]), frame(2, 1, [])]

GOOD = """
[prefix-2026]
leak = true
first_leak_iter = 1
crash_iter = 2
crash_rank = 0

[fix-16161]
leak = false
crash = false
"""


def write_trace(directory, name="trace", run=RUN, expect_toml=GOOD):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [run] + FRAMES))
    if expect_toml is not None:
        (directory / f"{name}.expect.toml").write_text(expect_toml)
    return path


def test_each_trace_policy_pair_is_an_item(pytester: pytest.Pytester):
    write_trace(pytester.path / "traces")
    result = pytester.runpytest("--adp-traces", "traces", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["traces/trace.jsonl::prefix-2026", "traces/trace.jsonl::fix-16161"])
    result = pytester.runpytest("--adp-traces", "traces")
    result.assert_outcomes(passed=2)


def test_a_failure_prints_the_causal_chain(pytester: pytest.Pytester):
    write_trace(pytester.path / "traces", expect_toml="[prefix-2026]\nleak = false\n")
    result = pytester.runpytest("--adp-traces", "traces")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "leak: expected false, replay gives true" in out
    assert "causal chain:" in out
    # the chain names the rank that held only GENERATION_TO_COMPLETE and the assert
    assert "GENERATION_TO_COMPLETE" in out and "AssertionError" in out
    assert "{'leak'" not in out and "assert False" not in out  # no dict diff


def test_wrong_crash_point_is_reported(pytester: pytest.Pytester):
    write_trace(pytester.path / "traces", expect_toml="[prefix-2026]\nleak = true\ncrash_iter = 7\n")
    result = pytester.runpytest("--adp-traces", "traces")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*crash_iter: expected 7, replay gives 2*"])


def test_expectations_in_the_run_record(pytester: pytest.Pytester):
    run = dict(RUN, expect={"prefix-2026": {"leak": True, "crash_iter": 2},
                            "newest": {"leak": False}})
    write_trace(pytester.path / "traces", run=run, expect_toml=None)
    write_trace(pytester.path / "traces", name="no_expectations", expect_toml=None)
    result = pytester.runpytest("--adp-traces", "traces", "-v")
    result.assert_outcomes(passed=2)
    assert "no_expectations" not in result.stdout.str()


def test_bad_expectations_fail_one_item_only(pytester: pytest.Pytester):
    write_trace(pytester.path / "traces")
    write_trace(pytester.path / "traces", name="typo", expect_toml="[prefix-2026]\nleek = true\n")
    result = pytester.runpytest("--adp-traces", "traces")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*typo.expect.toml*unknown key(s) leek*"])


def test_ini_option_runs_in_the_default_selection_only(pytester: pytest.Pytester):
    write_trace(pytester.path / "samples")
    pytester.makeini("[pytest]\nadp_traces = samples\n")
    pytester.makepyfile(test_other="def test_ok():\n    pass\n")
    pytester.runpytest().assert_outcomes(passed=3)
    pytester.runpytest("test_other.py").assert_outcomes(passed=1)
    pytester.runpytest("samples/trace.jsonl").assert_outcomes(passed=2)


def test_missing_directories(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nadp_traces = nowhere\n")
    pytester.makepyfile(test_other="def test_ok():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)  # a missing ini directory is only a warning
    result.stdout.fnmatch_lines(["*adp_traces*nowhere*does not exist*"])
    result = pytester.runpytest("--adp-traces", "absent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--adp-traces absent: no such file or directory*"])


def test_per_rank_directory_input(pytester: pytest.Pytester):
    """A directory of per-rank files is one input, with ``DIR.expect.toml`` beside it."""
    d = pytester.path / "traces" / "run"
    d.mkdir(parents=True)
    run = dict(RUN, run_id="r1")
    for rank in (0, 1):
        rows = [dict(run, rank=rank)] + [f for f in FRAMES if f["rank"] == rank]
        (d / f"rank-{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (pytester.path / "traces" / "run.expect.toml").write_text(GOOD)
    result = pytester.runpytest("--adp-traces", "traces", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*traces/run::prefix-2026 PASSED*"])


def test_plugin_module_imports_no_pandas():
    import subprocess
    import sys
    code = ("import sys, forensics.pytest_plugin; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_committed_sample_has_expectations():
    """The project's suite replays traces/samples (``adp_traces`` in pyproject.toml)."""
    import sys
    from pathlib import Path

    from forensics.expectations import expect_file_for, load_expect_file
    repo = Path(__file__).resolve().parents[1]
    traces = sorted((repo / "traces" / "samples").glob("*/trace.jsonl"))
    if not traces:
        pytest.skip("no committed samples")
    for trace in traces:
        assert load_expect_file(expect_file_for(trace)), trace
    if sys.version_info >= (3, 11):
        import tomllib
        ini = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
        assert ini["adp_traces"] == ["traces/samples"]


def test_a_dataset_with_two_runs_replays_each(pytester: pytest.Pytester):
    """A dataset directory is one input; its expectations apply to every run it holds."""
    from forensics.readers import ingest
    src = pytester.path / "src"
    write_trace(src, name="a", run=dict(RUN, run_id="a"), expect_toml=None)
    write_trace(src, name="b", run=dict(RUN, run_id="b"), expect_toml=None)
    ingest([src], pytester.path / "traces" / "both.ds", quiet=True)
    (pytester.path / "traces" / "both.ds.expect.toml").write_text(GOOD)
    result = pytester.runpytest("--adp-traces", "traces", "-v")
    result.assert_outcomes(passed=2)
    (pytester.path / "traces" / "both.ds.expect.toml").write_text("[fix-16161]\nleak = true\n")
    result = pytester.runpytest("--adp-traces", "traces")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["both.ds (run a) under fix-16161*"])


def test_xfail_marks_a_known_disagreement_strictly(pytester: pytest.Pytester):
    write_trace(pytester.path / "traces", expect_toml=(
        '[fix-16161]\nleak = true\nxfail = "known gap"\n'      # wrong, known: xfailed
        '[prefix-2026]\nleak = true\nxfail = "fixed since"\n'))  # right: strict XPASS fails
    result = pytester.runpytest("--adp-traces", "traces", "-rxX")
    result.assert_outcomes(xfailed=1, failed=1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*fixed since*"])


def test_verbose_node_ids_paste_back_and_select_one_item(pytester: pytest.Pytester):
    """`pytest -v` prints `traces/trace.jsonl::prefix-2026` (not `trace::jsonl::...`); pasting
    it back, alone or after `--adp-traces traces`, runs exactly that item."""
    write_trace(pytester.path / "traces")
    result = pytester.runpytest("--adp-traces", "traces", "-v")
    result.assert_outcomes(passed=2)
    lines = [ln for ln in result.stdout.lines if "PASSED" in ln]
    ids = sorted(ln.split(" PASSED")[0].strip() for ln in lines)
    assert ids == ["traces/trace.jsonl::fix-16161", "traces/trace.jsonl::prefix-2026"]
    assert "trace::jsonl" not in result.stdout.str()
    for args in (["--adp-traces", "traces", ids[1]], ["--adp-traces", "traces/trace.jsonl", ids[1]]):
        again = pytester.runpytest(*args, "-v")
        again.assert_outcomes(passed=1)
        again.stdout.fnmatch_lines(["traces/trace.jsonl::prefix-2026 PASSED*"])


def test_failure_message_tells_the_fatal_leak_first(pytester: pytest.Pytester):
    """Under prefix-2026 the leak on rank 0 is the fatal one: its chain (ending in the assert)
    is the first line of the causal chain in the failure report, as in the report and API."""
    write_trace(pytester.path / "traces", expect_toml="[prefix-2026]\nleak = false\n")
    result = pytester.runpytest("--adp-traces", "traces")
    out = result.stdout.lines
    i = next(k for k, ln in enumerate(out) if ln.strip() == "causal chain:")
    first = out[i + 1]
    assert "dummy padded on rank 0 at iter 1" in first
    assert "AssertionError" in first
