"""``forensics replay``: exit codes, the JSON shape, the readable output."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import cli

sys.path.insert(0, str(Path(__file__).parent / "replay"))
from replay_traces import nvbug_records

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "samples" / "nvbug-6438685"
POLICIES = ("mid-2025", "legacy-2025", "early-2026", "prefix-2026", "fix-16161", "fix-16279",
            "tolerant-17278", "sched-aware-16921", "postpad-17379", "newest")


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "nvbug.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in nvbug_records()))
    return p


def invoke(*args):
    return CliRunner().invoke(cli, ["replay", *map(str, args)], catch_exceptions=False)


def test_json_is_one_object_in_the_issue_shape_and_exit_1_on_a_crash(trace):
    res = invoke(trace, "--json", "--policy", "prefix-2026", "--policy", "fix-16161")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert list(doc) == ["policies"] and list(doc["policies"]) == ["prefix-2026", "fix-16161"]
    pre = doc["policies"]["prefix-2026"]
    assert pre == {"leaks": [{"rank": 0, "iter_created": 41, "iter_skipped": 41, "cause_ranks": [2]},
                             {"rank": 1, "iter_created": 41, "iter_skipped": 41, "cause_ranks": [2]}],
                   "crash": {"iter": 42, "rank": 1, "expected": 8, "active": 9},
                   "skipped_iters": [41], "first_divergence": None,
                   "verdict": "crash", "verdict_text": "crash", "model_unknown": None}
    assert doc["policies"]["fix-16161"]["first_divergence"] == {
        "iter": 41, "rank": 0, "field": "can_queue", "recorded": False, "replayed": True}


def test_json_says_how_a_gated_verdict_depends_on_the_unnamed_model(trace):
    """The trace names no model: the merged fix-16279 is replayed per model. Outside its gate it
    is prefix-2026 (crash at 42), for DeepSeek-V4 it pads rank 2 at 41 (clean)."""
    res = invoke(trace, "--json", "--policy", "fix-16279")
    assert res.exit_code == 1
    pol = json.loads(res.stdout)["policies"]["fix-16279"]
    assert pol["verdict"] == "crash" and pol["crash"]["iter"] == 42
    assert pol["verdict_text"] == "crash unless the model is DeepSeek-V4"
    assert pol["model_unknown"] == {"models": ["deepseek_v4"], "shown": None,
                                    "summary": "crash unless the model is DeepSeek-V4",
                                    "verdicts": {"deepseek_v4": "clean", "other": "crash"}}


def test_table_says_how_a_gated_verdict_depends_on_the_unnamed_model(trace):
    res = invoke(trace, "--policy", "fix-16279")
    assert "fix-16279: crash (crash unless the model is DeepSeek-V4)" in res.stdout


def test_exit_0_when_no_chosen_policy_leaks(trace):
    res = invoke(trace, "--json", "--policy", "fix-16161", "--policy", "newest")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert all(p["leaks"] == [] and p["crash"] is None for p in doc["policies"].values())


def test_the_merged_number_of_the_kv_connector_entry_replays_as_the_entry(trace):
    """``--policy kv-connector-19250`` (the number #19164's port merged as) replays the entry
    catalogued as kv-connector-19164, with newest's verdict on this trace (no leak, no crash)."""
    by_alias = json.loads(invoke(trace, "--json", "--policy", "kv-connector-19250").stdout)
    by_name = json.loads(invoke(trace, "--json", "--policy", "kv-connector-19164").stdout)
    newest = json.loads(invoke(trace, "--json", "--policy", "newest").stdout)
    assert list(by_alias["policies"]) == ["kv-connector-19164"]  # results name the entry
    got = by_alias["policies"]["kv-connector-19164"]
    assert got == by_name["policies"]["kv-connector-19164"] == newest["policies"]["newest"]
    assert got["verdict"] == "clean" and got["leaks"] == [] and got["crash"] is None


def test_default_is_every_policy_with_mechanisms_and_a_verdict_table(trace):
    res = invoke(trace)
    assert res.exit_code == 1
    for name in POLICIES:
        assert name in res.stdout
    text = " ".join(res.stdout.split())  # rich wraps long lines
    assert "prefix-2026: crash at iter 42 on rank 1 - 2 leaked dummies, 1 fleet-wide skip " in text
    assert ("- 2 leaks (the fatal one first): prefix-2026's pad predicate" in text)
    assert ("The fatal one: rank 1: generation dummy padded at iter 41, survived the skip of iter "
            "41 (zero batch on rank 2); then at iter 42 rank 1 counted 9 > expected 8: "
            "AssertionError.") in text
    assert "rank 2 held only GENERATION_TO_COMPLETE requests (ids 17, 23)" not in text
    verbose = " ".join(invoke(trace, "--verbose").stdout.split())
    assert "rank 2 held only GENERATION_TO_COMPLETE requests (ids 17, 23)" in verbose


def test_the_sample_fits_a_screen_one_paragraph_per_mechanism():
    """The bundled sample leaks 22 dummies under each of four policies, every one the same way:
    one paragraph each (254 lines when every leak had its own), the fatal one named, then the
    table of the ten verdicts."""
    res = invoke(SAMPLE)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert len(lines) < 60
    rows = {ln.split(":")[0]: ln for ln in lines if ln.split(":")[0] in POLICIES}
    assert list(rows) == list(POLICIES)
    assert rows["prefix-2026"].startswith("prefix-2026: crash at iter 76 on rank 2 - 22 leaked dummies")
    mechanisms = [ln for ln in lines if ln.startswith("  - ")]
    assert len(mechanisms) == 4   # mid-2025, legacy-2025, early-2026, prefix-2026
    assert all(m.startswith("  - 22 leaks") for m in mechanisms)
    assert sum("The fatal one: rank 2: generation dummy padded at iter 75" in m
               for m in mechanisms) == 1
    table = lines[lines.index("Verdicts"):]
    assert [name for name in POLICIES if any(f" {name} " in row for row in table)] == list(POLICIES)
    assert any("prefix-2026" in row and "iter 76, rank 2: active 5 > expected 4" in row
               for row in table)


def test_verbose_adds_every_leaks_chain():
    res = invoke(SAMPLE, "--verbose", "--policy", "prefix-2026")
    chains = [ln for ln in res.stdout.splitlines() if ln.startswith("    - iter ")]
    assert len(chains) == 22 + 1                                 # every leak, then the crash
    assert chains[0].startswith("    - iter 75: rank 0 held")    # the fatal leak first
    assert chains[-1].startswith("    - iter 76: rank 2 held")


@pytest.mark.parametrize("args, status", [([], 1), (["--json"], 1), (["--policy", "newest"], 0)])
def test_a_closed_pipe_ends_quietly_with_the_status_of_the_work(args, status):
    """As ``git log | head``: the reader went away before the output was written; no message,
    no traceback, and the exit status is the verdict (a crash under prefix-2026: 1; newest
    alone is clean: 0)."""
    cmd = [sys.executable, "-m", "forensics", "replay", str(SAMPLE / "trace.jsonl"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()            # the reader is gone before the command prints
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == status
    assert err == ""


def test_bad_input_and_bad_policy_exit_2(tmp_path, trace):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "frame", "iter": 0, "rank": 0, "requests": []}\n')
    res = CliRunner().invoke(cli, ["replay", str(bad), "--json"])
    assert res.exit_code == 2
    assert "missing run record" in res.output
    res = CliRunner().invoke(cli, ["replay", str(trace), "--policy", "nope"])
    assert res.exit_code == 2 and "unknown policy 'nope'" in res.output


def test_several_runs_need_run(tmp_path):
    recs = nvbug_records()
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps(dict(r, run_id=name) if r["kind"] == "run" else r) + "\n" for r in recs))
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    res = CliRunner().invoke(cli, ["replay", *map(str, files), "--json"])
    assert res.exit_code == 2 and "holds 2 runs" in res.output
    res = invoke(*files, "--json", "--run", "b", "--policy", "newest")
    assert res.exit_code == 0 and json.loads(res.stdout)["policies"]["newest"]["leaks"] == []
