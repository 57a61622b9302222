"""Tests of forensics.expectations: parsing, checking and rendering replay expectations."""
from __future__ import annotations

import pytest

from forensics.expectations import (Expectation, ExpectationError, Mismatch, Outcome, check,
                                    expect_file_for, from_outcome, load_expect_file,
                                    parse_expectations, run_record_expectations, to_toml)

CRASHED = Outcome(leak=True, crash=True, crash_iter=4, crash_rank=2, first_leak_iter=3,
                  num_leaks=2, crash_kind="assert")


def test_parse_and_check():
    [e] = parse_expectations({"prefix-2026": {"leak": True, "crash_iter": 4, "crash_rank": 2,
                                              "first_leak_iter": 3}}, "x.toml")
    assert e.crash is True  # implied by where it crashes
    assert check(e, CRASHED) == []
    [clean] = parse_expectations({"fix-16161": {"leak": False, "crash": False}}, "x.toml")
    assert check(clean, CRASHED) == [Mismatch("leak", False, True), Mismatch("crash", False, True)]
    [only_leak] = parse_expectations({"p": {"leak": True}}, "x.toml")
    assert check(only_leak, CRASHED) == []  # crash not checked when not stated
    [late] = parse_expectations({"p": {"leak": True, "first_leak_iter": 9}}, "x.toml")
    assert [m.describe() for m in check(late, CRASHED)] == [
        "first_leak_iter: expected 9, replay gives 3"]


@pytest.mark.parametrize("table, message", [
    ({}, "non-empty"),
    ({"p": 1}, "must be a table"),
    ({"p": {"crash": True}}, "`leak = true|false` is required"),
    ({"p": {"leak": 1}}, "leak must be true/false"),
    ({"p": {"leak": True, "crash_iter": True}}, "crash_iter must be an integer"),
    ({"p": {"leak": True, "leek": True}}, "unknown key(s) leek"),
    ({"p": {"leak": True, "crash": False, "crash_iter": 3}}, "contradicts"),
    ({"p": {"leak": False, "first_leak_iter": 3}}, "contradicts"),
])
def test_malformed_expectations_name_the_file(table, message):
    with pytest.raises(ExpectationError, match="^x.toml: .*" + message.replace("|", r"\|")
                       .replace("(", r"\(").replace(")", r"\)")):
        parse_expectations(table, "x.toml")


def test_files_and_run_records(tmp_path):
    assert expect_file_for(tmp_path / "run.jsonl.zst") == tmp_path / "run.expect.toml"
    assert expect_file_for(tmp_path / "per-rank") == tmp_path / "per-rank.expect.toml"
    bad = tmp_path / "bad.expect.toml"
    bad.write_text("[p]\nleak = \n")
    with pytest.raises(ExpectationError, match="not valid TOML"):
        load_expect_file(bad)
    head = '{"kind": "run", "format": "adp-trace", "expect": {"newest": {"leak": false}}}\n'
    [e] = run_record_expectations(head, "t.jsonl")
    assert (e.policy, e.leak) == ("newest", False)
    assert run_record_expectations('{"kind": "run"}\n', "t.jsonl") is None


def test_rendered_toml_reads_back(tmp_path):
    pinned = [from_outcome("prefix-2026", CRASHED),
              Expectation("fix-16161", leak=False, crash=False, xfail='known "gap"')]
    path = tmp_path / "t.expect.toml"
    path.write_text(to_toml(pinned, header="pinned"))
    back = load_expect_file(path)
    assert [(e.policy, e.as_dict()) for e in back] == [(e.policy, e.as_dict()) for e in pinned]


def test_a_gated_verdict_is_checked_as_text_or_under_one_model():
    """The NVBug chain names no model: fix-16279 is prefix-2026 outside its gate (crash at 42)
    and clean for DeepSeek-V4. ``verdict`` checks the conditional text, ``model`` one replay."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent / "replay"))
    import replay
    from replay_traces import nvbug_records
    res = replay.run(replay.RunFrames.from_records(nvbug_records()), policy="fix-16279")
    worst, inside = parse_expectations({
        "fix-16279": {"leak": True, "crash_iter": 42, "verdict": "crash unless the model is DeepSeek-V4"},
        "x": {"leak": False, "crash": False, "model": "deepseek_v4"}}, "x.toml")
    assert check(worst, Outcome.of(res)) == []
    assert check(inside, Outcome.of(res, inside.model)) == []
    assert check(inside, Outcome.of(res)) == [Mismatch("leak", False, True),
                                              Mismatch("crash", False, True)]
    pinned = from_outcome("fix-16279", Outcome.of(res))
    assert pinned.verdict == "crash unless the model is DeepSeek-V4"
    assert 'verdict = "crash unless the model is DeepSeek-V4"' in to_toml([pinned])
