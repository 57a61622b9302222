"""Tests of forensics.export_test: the exported file runs green, and red when a verdict is flipped.

The trace is the hand-worked NVBug 6438685 chain (disaggregated, overlap loop, max_batch_size 2,
cap 2) on three ranks, with rank 2 busy throughout:

    iter 0  rank 0: id 1 (13)                rank 1: id 2 (13)                       rank 2: id 3 (13)
    iter 1  rank 0: ids 4, 5 awaiting KV (9) rank 1: id 2 GENERATION_TO_COMPLETE    rank 2: id 3 (13)
    iter 2  rank 0: ids 4, 5 (13)            rank 1: nothing                         rank 2: id 3 (13)

prefix-2026: at iter 1 rank 0 is padded, rank 1 gets no dummy (14 counts) and schedules 0, the
fleet skips, rank 0's dummy leaks; at iter 2 rank 0 holds 2 + 1 = 3 > expected
min(max(ceil(4/3), 3), 2) = 2: assert on rank 0 at iter 2.
legacy-2025: same leak, but expected is not capped (3), so no assert; at iter 2 the carried dummy
is scheduled, rank 1 (empty, expected 3 > 0) is padded, can_queue is True: no crash.
fix-16161: rank 1 is padded at iter 1 as well (0 in the window): no skip, no leak, no crash.
"""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from forensics.cli import cli
from forensics.export_test import choose_target, export_test, outcomes
from forensics.trace_records import TraceSize, records_from_frames, write_records
from replay.frames import RunFrames

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 3, "pp_size": 1,
       "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026"}


def frame(it, rank, reqs, **kw):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs], **kw}


RECORDS = [RUN,
           frame(0, 0, [(1, 13)]), frame(0, 1, [(2, 13)]), frame(0, 2, [(3, 13)]),
           frame(1, 0, [(4, 9), (5, 9)]), frame(1, 1, [(2, 14)]), frame(1, 2, [(3, 13)]),
           frame(2, 0, [(4, 13), (5, 13)]), frame(2, 1, []), frame(2, 2, [(3, 13)])]
POLICIES = ["prefix-2026", "legacy-2025", "fix-16161"]


def run_pytest(*paths):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *map(str, paths)], capture_output=True, text=True,
                          cwd=paths[0].parent, timeout=300)


def test_exported_file_pins_the_hand_worked_verdicts(tmp_path):
    out = tmp_path / "test_nvbug.py"
    result = export_test(RECORDS, POLICIES, out, source="hand-worked")
    by_policy = {e.policy: e for e in result.expectations}
    p = by_policy["prefix-2026"]
    assert (p.leak, p.crash, p.crash_iter, p.crash_rank, p.first_leak_iter) == (True, True, 2, 0, 1)
    legacy = by_policy["legacy-2025"]
    assert (legacy.leak, legacy.crash, legacy.first_leak_iter) == (True, False, 1)
    fix = by_policy["fix-16161"]
    assert (fix.leak, fix.crash) == (False, False)

    text = out.read_text()
    flipped = (text.replace("'fix-16161': {'leak': False", "'fix-16161': {'leak': True")
               .replace("'crash_iter': 2,", "'crash_iter': 5,"))
    assert flipped.count("True") == text.count("True") + 1 and "'crash_iter': 5," in flipped
    red_file = tmp_path / "test_nvbug_flipped.py"
    red_file.write_text(flipped)
    # one pytest process for both files (its start-up is most of a run): the exported file
    # green, the flipped copy red
    red = run_pytest(out, red_file)
    assert red.returncode == 1
    assert "2 failed, 4 passed" in red.stdout
    failed = [ln for ln in red.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 2 and all(ln.startswith("FAILED test_nvbug_flipped.py") for ln in failed)
    assert "fix-16161: leak: expected True, replay gives False" in red.stdout
    assert "prefix-2026: crash_iter: expected 5, replay gives 2" in red.stdout
    assert "causal chain:" in red.stdout and "GENERATION_TO_COMPLETE" in red.stdout


def test_minimized_export_keeps_the_target_and_contrast(tmp_path):
    out = tmp_path / "test_small.py"
    result = export_test(RECORDS, POLICIES, out, minimize_first=True)
    # the run record's build (prefix-2026) fails and is the target; fix-16161 the contrast
    assert result.minimized_for == ("prefix-2026", "fix-16161")
    assert result.before == TraceSize(3, 3, 5, 9)
    assert result.after == TraceSize(2, 2, 3, 4)
    e = {x.policy: x for x in result.expectations}
    assert e["prefix-2026"].crash and not e["fix-16161"].leak
    namespace: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), namespace)  # the file is valid Python
    assert namespace["RECORDS"] == result.records
    assert namespace["EXPECTED"]["prefix-2026"]["crash_iter"] == e["prefix-2026"].crash_iter


def test_target_prefers_the_build_then_a_crash():
    res = outcomes(RECORDS, ["legacy-2025", "prefix-2026", "fix-16161"])
    assert choose_target(RECORDS, res) == ("prefix-2026", "fix-16161")
    other = [dict(RUN, build="unknown")] + RECORDS[1:]
    assert choose_target(other, res) == ("prefix-2026", "fix-16161")  # crashes beat leaks


def test_frames_round_trip_to_records():
    """``records_from_frames`` writes records that replay exactly like the frames."""
    recs = [RUN] + [dict(f, expected=2, scheduled=0, padded=f["iter"] == 1 and f["rank"] == 0)
                    for f in RECORDS[1:]]
    frames = RunFrames.from_records(recs)
    back = RunFrames.from_records(records_from_frames(frames))
    for name in ("n_real", "window_real", "new_real", "real_batch", "expected_recorded",
                 "recorded_counts", "rec_padded", "alloc_ok"):
        assert (getattr(back, name) == getattr(frames, name)).all(), name
    assert outcomes(records_from_frames(frames), POLICIES) == outcomes(recs, POLICIES)


def test_cli_export_test(tmp_path):
    src = write_records(RECORDS, tmp_path / "run.jsonl")
    out = tmp_path / "test_cli.py"
    res = CliRunner().invoke(cli, ["export-test", str(src), "-o", str(out), "--policy",
                                   "prefix-2026", "--policy", "fix-16161", "--no-minimize"])
    assert res.exit_code == 0, res.output
    assert "prefix-2026: crash at iteration 2 on rank 0" in res.output   # the common verdict words
    assert "fix-16161: clean" in res.output
    assert "RECORDS = [" in out.read_text()
    res = CliRunner().invoke(cli, ["export-test", str(tmp_path / "missing.jsonl"), "-o", str(out)])
    assert res.exit_code == 2
