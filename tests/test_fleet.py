"""``forensics.fleet`` and ``forensics fleet``: per-run verdicts, near misses, JSON/CSV output.

The hand-worked runs (two ranks, ``max_batch_size`` 2, cap 2, disaggregated, overlap, recorded
under ``prefix-2026``) are small enough to follow by hand; see each test's docstring.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from forensics.cli import cli
from forensics.fleet_table import (
    CONFIG_COLUMNS,
    METRIC_DTYPES,
    fleet_failed,
    fleet_json,
    fleet_policies,
    fleet_table,
    prevalence,
    simulate_grid,
)

REPO = Path(__file__).resolve().parents[1]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026", "run_id": "hand"}


def _frame(it, rank, reqs, expected, padded=None, scheduled=None, can_queue=None):
    """A frame; decisions left None were not recorded (the crash iteration never reaches them)."""
    f = {"kind": "frame", "iter": it, "rank": rank,
         "requests": [{"id": i, "state": s, **({"dummy": True} if i == 0 else {})} for i, s in reqs],
         "expected": expected, "padded": padded, "scheduled": scheduled, "can_queue": can_queue}
    return {k: v for k, v in f.items() if v is not None}


def _write(path: Path, frames) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in [RUN, *frames]) + "\n")
    return path


@pytest.fixture
def near_miss_run(tmp_path) -> Path:
    """A leak that does not crash, with a rank at the cap while carrying the leaked dummy.

    iter 0: rank 0 holds request 1 in GENERATION_TO_COMPLETE (14), rank 1 holds request 2 in
    DISAGG_GENERATION_INIT (8); counts [1, 1], expected = max(ceil(2/2), 1) = 1.
      prefix-2026: rank 0's predicate counts 14, so no dummy, but the scheduler refuses it: batch 0.
      Rank 1's predicate skips 8: a dummy, batch 1. can_queue False: rank 1's dummy leaks
      (created 0, skipped 0, cause rank 0).
      fix-16161: the window predicate counts neither: both ranks padded, batches 1 and 1,
      can_queue True, both dummies removed: no leak; it departs from the recording at iter 0.
    iter 1: rank 0 holds nothing, rank 1 holds request 2 now DISAGG_GENERATION_TRANS_COMPLETE
    (12) and the leaked dummy (recorded): counts [0, 2], expected 2 (recorded, the cap).
      prefix-2026: rank 1 active 2 = cap, carrying the leaked dummy, no crash (2 <= 2): one
      near-miss row (active >= cap - 1). Rank 0 padded; batches 1 and 2; can_queue True; the
      leaked dummy (last element) is removed: it survived its skip without a crash, one
      near_miss_skips. Time to first leak: 0 - 0 = 0.
      legacy-2025 (no cap): expected computed = max(ceil(2/2), 2) = 2, the same story.
    """
    return _write(tmp_path / "near" / "trace.jsonl", [
        _frame(0, 0, [(1, 14)], 1, False, 0, False),
        _frame(0, 1, [(2, 8)], 1, True, 1, False),
        _frame(1, 0, [], 2, True, 1, True),
        _frame(1, 1, [(2, 12), (0, 13)], 2, False, 2, True),
    ])


@pytest.fixture
def crash_run(tmp_path) -> Path:
    """The same start, but rank 1 holds two requests awaiting KV, so the leak is fatal.

    iter 0: rank 0 holds request 1 (14); rank 1 holds requests 2 and 3 (8); counts [1, 2],
    expected = max(ceil(3/2), 2) = 2. prefix-2026: rank 0 batch 0, rank 1 padded, can_queue
    False: rank 1's dummy leaks.
    iter 1: rank 1 holds 2 and 3 (12) and the dummy: active 3 > expected 2 (the cap):
    AssertionError on rank 1 at iter 1. The leaked dummy is the fatal one: near_miss_skips 0;
    the crash row is not a near miss: near_miss_cap 0.
    fix-16161 pads both ranks at iter 0 and never leaks; at iter 1 rank 1 has 2 <= 2: clean.
    """
    return _write(tmp_path / "crash" / "trace.jsonl", [
        _frame(0, 0, [(1, 14)], 2, False, 0, False),
        _frame(0, 1, [(2, 8), (3, 8)], 2, True, 1, False),
        _frame(1, 0, [], 2),
        _frame(1, 1, [(2, 12), (3, 12), (0, 13)], 2),
    ])


POLS = ["legacy-2025", "prefix-2026", "fix-16161"]


def test_near_miss_hand_worked(near_miss_run):
    t = fleet_table([near_miss_run.parent], POLS, layout="long").set_index("policy")
    for p in ("prefix-2026", "legacy-2025"):
        row = t.loc[p]
        assert (row["leak"], row["leaks"], row["crash"]) == (True, 1, False)
        assert (row["first_leak_iter"], row["time_to_first_leak"]) == (0, 0)
        assert (row["near_miss_skips"], row["near_miss_cap"], row["near_miss"]) == (1, 1, True)
    assert pd.isna(t.loc["prefix-2026", "diverged_iter"])  # the recording build reproduces it
    fix = t.loc["fix-16161"]
    assert (fix["leak"], fix["crash"], fix["near_miss"]) == (False, False, False)
    assert (fix["near_miss_skips"], fix["near_miss_cap"]) == (0, 0)
    assert fix["diverged_iter"] == 0
    assert pd.isna(fix["first_leak_iter"]) and pd.isna(fix["time_to_first_leak"])
    cfg = t.iloc[0]
    assert (cfg["ranks"], cfg["max_batch_size"], cfg["cap"], cfg["overlap"], cfg["iters"]) == (2, 2, 2, True, 2)


def test_crash_hand_worked(crash_run):
    t = fleet_table([crash_run], POLS, layout="long").set_index("policy")
    pre = t.loc["prefix-2026"]
    assert (pre["crash"], pre["crash_iter"], pre["crash_rank"], pre["leaks"]) == (True, 1, 1, 1)
    assert (pre["near_miss_skips"], pre["near_miss_cap"], pre["near_miss"]) == (0, 0, False)
    assert (t.loc["fix-16161", "crash"], t.loc["fix-16161", "leak"]) == (False, False)


def test_nvbug_sample_wide_columns_and_types():
    t = fleet_table([NVBUG], ["prefix-2026", "fix-16161"])
    assert len(t) == 1
    row = t.iloc[0]
    # traces/samples/nvbug-6438685/trace.expect.toml: rank 2 asserts at iteration 76.
    assert (row["prefix-2026.crash"], row["prefix-2026.crash_iter"], row["prefix-2026.crash_rank"]) == (True, 76, 2)
    assert row["prefix-2026.leak"] and row["prefix-2026.first_leak_iter"] == 19
    assert (row["fix-16161.crash"], row["fix-16161.leak"]) == (False, False)
    assert (row["ranks"], row["max_batch_size"], row["scenario"]) == (8, 4, "nvbug-6438685")
    # The simulator's workload parameters travel in the run record (traces/README.md: bursts of
    # ~32 requests every ~60 iterations), so a fleet of simulated runs can group by them.
    assert (row["burst_size"], row["burst_every"], row["mode"]) == (32, 60, "generation-server")
    assert list(t.columns[:len(CONFIG_COLUMNS)]) == list(CONFIG_COLUMNS)
    for p in ("prefix-2026", "fix-16161"):
        for k, dt in METRIC_DTYPES.items():
            assert str(t[f"{p}.{k}"].dtype) == dt, (p, k)
    assert str(t["ranks"].dtype) == "Int64" and str(t["overlap"].dtype) == "boolean"


def test_logs_only_input_gets_a_note(tmp_path):
    t = fleet_table([NVBUG / "executor.log"], ["fix-16161"])
    assert t.loc[0, "note"].startswith("no request-state trace")
    assert pd.isna(t.loc[0, "fix-16161.leak"])


def test_bad_layout_and_policy(near_miss_run):
    with pytest.raises(ValueError):
        fleet_table([near_miss_run], layout="diagonal")
    from forensics.errors import ForensicsError
    with pytest.raises(ForensicsError):
        fleet_table([near_miss_run], ["no-such-build"])


def test_simulate_grid_and_prevalence(tmp_path):
    grid = simulate_grid(tmp_path, grid={"ranks": (4,), "overlap": (True, False)}, iters=60,
                         replicates=2)
    assert len(grid) == 4 and list(grid["seed"]) == [0, 1, 0, 1]
    assert all((Path(p) / "trace.jsonl").is_file() for p in grid["path"])
    t = fleet_table(grid, ["prefix-2026"], layout="long")
    assert list(t["ranks"]) == [4] * 4 and list(t["overlap"]) == [True, True, False, False]
    # The simulator ran prefix-2026 forward: its replay must agree with what it saw.
    assert list(t["crash"]) == [v == "crash" for v in grid["sim_verdict"]]
    assert list(t["leak"]) == [v in ("crash", "leak") for v in grid["sim_verdict"]]
    prev = prevalence(t, ["overlap"])
    assert prev["runs"].tolist() == [2, 2]
    assert prev.loc[(False, "prefix-2026"), "leak"] == t[~t["overlap"]]["leak"].mean()


def test_simulate_grid_rejects_unknown_field(tmp_path):
    from forensics.errors import ConfigError
    with pytest.raises(ConfigError, match="colour"):
        simulate_grid(tmp_path, grid={"colour": ("red",)})


def test_cli_json_csv_and_exit_codes(near_miss_run):
    runner = CliRunner()
    r = runner.invoke(cli, ["fleet", str(near_miss_run), str(NVBUG / "trace.jsonl"),
                            "--policy", "prefix-2026", "--policy", "fix-16161", "--json"])
    assert r.exit_code == 1, r.output  # prefix-2026 leaks
    doc = json.loads(r.output)
    assert [x["ranks"] for x in doc["runs"]] == [2, 8]
    assert doc["runs"][0]["policies"]["prefix-2026"]["near_miss_cap"] == 1
    assert doc["runs"][1]["policies"]["prefix-2026"]["crash_iter"] == 76
    assert doc["runs"][1]["policies"]["fix-16161"]["crash_iter"] is None

    r = runner.invoke(cli, ["fleet", str(near_miss_run), "--policy", "fix-16161", "--csv"])
    assert r.exit_code == 0, r.output  # fix-16161 neither leaks nor crashes
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert len(rows) == 1 and rows[0]["fix-16161.leak"] == "False" and rows[0]["ranks"] == "2"

    r = runner.invoke(cli, ["fleet", str(near_miss_run), "--policy", "prefix-2026"])
    assert r.exit_code == 1 and "leak x1 @0" in r.output  # one leak, first at iteration 0

    r = runner.invoke(cli, ["fleet", str(near_miss_run / "missing.jsonl")])
    assert r.exit_code == 2
    r = runner.invoke(cli, ["fleet", str(near_miss_run), "--json", "--csv"])
    assert r.exit_code == 2


def test_fleet_json_is_plain(near_miss_run):
    doc = fleet_json(fleet_table([near_miss_run], ["prefix-2026"]))
    json.dumps(doc)  # no numpy or pandas scalars left
    assert doc["runs"][0]["policies"]["prefix-2026"]["first_leak_iter"] == 0


def test_fleet_policies_and_failed_read_a_wide_table():
    """Policy names may hold dots (``trtllm:PATH@v1.2``): only the last one starts the metric.
    One run leaks under the second policy only, so the table has failed; an NA (no trace) row
    is not a failure."""
    t = pd.DataFrame({"run": ["a", "b"], "prefix-2026.leak": [False, None],
                      "prefix-2026.crash": [False, None], "trtllm:/src@v1.2.leak": [True, None],
                      "trtllm:/src@v1.2.crash": [False, None]})
    assert fleet_policies(t) == ["prefix-2026", "trtllm:/src@v1.2"]
    assert fleet_failed(t)
    assert not fleet_failed(t.drop(columns=["trtllm:/src@v1.2.leak", "trtllm:/src@v1.2.crash"]))
