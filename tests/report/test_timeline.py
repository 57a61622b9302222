"""timeline.json: the Chrome trace-event format's documented fields, every dummy of the ledger
once, flows that pair up, the thinning of a long run, and the post-mortem writing it.

The format (the "Trace Event Format" document that chrome://tracing and Perfetto follow): the
JSON object form holds ``traceEvents``; every event has ``name``, ``ph``, ``pid``, ``tid``, ``ts``
(microseconds); ``X`` (complete) has ``dur``; ``C`` (counter) has numeric ``args``; ``i``
(instant) has scope ``s`` in g/p/t; ``s``/``f`` (flow start / finish) share an ``id`` (and
``name``/``cat``), the finish with ``bp: "e"`` binds to the slice enclosing its ``ts`` on its
thread, the start to the slice enclosing its ``ts``; ``M`` (metadata) names processes and
threads through ``args.name``.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import forensics
from forensics.readers.dataset_cache import as_dataset
from forensics.report.timeline import (DETAIL_RADIUS, MAX_BLOCKS, US_PER_ITER,
                                       story_timeline_json, timeline, timeline_json,
                                       write_timeline)
from replay.config import RunConfig
from replay.walk import run_all
from replay.frames import RunFrames
from replay.resolve import resolve_policies
from replay.results import Crash, Leak, ReplayResult

REPO = Path(__file__).resolve().parents[2]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"

METADATA_NAMES = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def check_trace_format(doc: dict) -> None:
    """Assert ``doc`` follows the trace-event format's documented fields (module docstring)."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    json.dumps(doc, allow_nan=False)     # strict JSON: no NaN / Infinity
    named_pids = set()
    slices: dict[tuple, list[tuple[int, int]]] = collections.defaultdict(list)
    flows: dict[object, dict[str, dict]] = collections.defaultdict(dict)
    for e in doc["traceEvents"]:
        for key in ("name", "ph", "pid", "tid", "ts"):
            assert key in e, (key, e)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["ts"], int)
        ph = e["ph"]
        assert ph in {"X", "C", "i", "s", "f", "M"}, e
        if ph == "M":
            assert e["name"] in METADATA_NAMES and "args" in e, e
            if e["name"] == "process_name":
                named_pids.add(e["pid"])
        elif ph == "X":
            assert isinstance(e["dur"], int) and e["dur"] > 0, e
            slices[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        elif ph == "i":
            assert e["s"] in ("g", "p", "t"), e
        else:
            assert "id" in e and ph not in flows[e["id"]], e
            if ph == "f":
                assert e["bp"] == "e", e
            flows[e["id"]][ph] = e
    used_pids = {e["pid"] for e in doc["traceEvents"]}
    assert used_pids == named_pids
    for key, spans in slices.items():   # slices on one thread nest or follow each other
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[int] = []
        for a, b in spans:
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or b <= stack[-1], (key, a, b)
            stack.append(b)

    def enclosed(e):
        return any(a <= e["ts"] < b for a, b in slices[e["pid"], e["tid"]])

    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, fid
        s, f = pair["s"], pair["f"]
        assert (s["name"], s.get("cat")) == (f["name"], f.get("cat")) and s["ts"] < f["ts"]
        assert enclosed(s) and enclosed(f), fid


@pytest.fixture(scope="module")
def nvbug_results():
    ds = as_dataset([NVBUG])
    run = ds.traced_runs()[0]
    return run_all(RunFrames.from_dataset(ds, run=run),
                   resolve_policies(["prefix-2026", "fix-16279"]))


def test_the_recording_build_crash_and_its_leaked_dummies(nvbug_results):
    """trace.expect.toml of the sample: under prefix-2026 a dummy leaks at iteration 19 and
    rank 2 crashes at iteration 76. 8 ranks: 8 rank processes and the fleet."""
    result = nvbug_results["prefix-2026"]
    doc = timeline(result)
    check_trace_format(doc)
    events = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {**{r + 1: f"rank {r}" for r in range(8)}, 9: "fleet"}
    crash = [e for e in events if e["ph"] == "i" and e.get("cat") == "crash"]
    assert len(crash) == 1 and crash[0]["s"] == "g" and crash[0]["ts"] == 76 * US_PER_ITER
    assert crash[0]["args"]["ranks"][0] == 2
    # every dummy of the ledger exactly once, as a slice on its rank
    dummies = collections.Counter(e["args"]["dummy"] for e in events
                                  if e["ph"] == "X" and e.get("cat") == "dummy")
    ledger = result.ledger
    assert len(ledger) > 0 and dummies == collections.Counter(int(d) for d in ledger["dummy"])
    for e in events:
        if e["ph"] == "X" and e.get("cat") == "dummy":
            row = ledger[ledger["dummy"] == e["args"]["dummy"]].iloc[0]
            assert e["pid"] == int(row["rank"]) + 1 and e["ts"] == int(row["iter_created"]) * 1000
    # the first leak: a flow from its dummy across the skip at iteration 19 into iteration 20
    starts = [e for e in events if e["ph"] == "s"]
    assert len(starts) == len(result.leak_records) > 0
    first = min(starts, key=lambda e: e["ts"])
    assert first["ts"] // US_PER_ITER == 19
    finish = next(e for e in events if e["ph"] == "f" and e["id"] == first["id"])
    assert finish["ts"] // US_PER_ITER == 20 and finish["tid"] == 1
    # a skip is a global instant; iteration slices carry batch size and state counts
    skips = {e["args"]["iter"] for e in events if e["ph"] == "i" and e.get("cat") == "skip"}
    assert 19 in skips and skips == set(result.skipped_iters)
    it = [e for e in events if e["ph"] == "X" and e.get("cat") == "iteration"]
    assert len(it) == 8 * 77           # iterations 0..76 on 8 ranks: a short run, all in detail
    assert all("batch" in e["args"] for e in it)
    assert any(sum(e["args"].get("states", {}).values()) > 0 for e in it)
    assert doc["otherData"]["thinning"]["thinned"] is False


def test_a_fixed_build_has_no_crash_and_no_flows(nvbug_results):
    doc = timeline(nvbug_results["fix-16279"])
    check_trace_format(doc)
    assert not [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "crash"]


def _long_run(ranks: int, iters: int) -> ReplayResult:
    """A synthetic replay: 2 active requests a rank (5 on rank 3 at 50,000, the peak), a fleet
    skip at 30,000 and at 70,000 where
    a dummy created on rank 1 at 29,990 survives and rank 1 crashes at iteration ``iters - 1``;
    a pad dummy for one iteration on rank 0 every 1,000 iterations."""
    it = np.repeat(np.arange(iters, dtype=np.int64), ranks)
    rk = np.tile(np.arange(ranks, dtype=np.int64), iters)
    can = ~np.isin(it, [30_000, 70_000])
    active = np.where((it == 50_000) & (rk == 3), 5, 2)      # the fleet's peak load
    d = pd.DataFrame({"iter": it, "rank": rk, "active": active, "expected": 2, "batch": 2, "real": 2,
                      "padded": False, "can_queue": can, "crash": (it == iters - 1) & (rk == 1)})
    pads = np.arange(0, iters, 1000)
    ledger = pd.DataFrame({"dummy": np.arange(pads.size + 1), "rank": [0] * pads.size + [1],
                           "iter_created": list(pads) + [29_990], "origin": "pad",
                           "role": "generation",
                           "iter_removed": pd.array(list(pads) + [None], "Int64"),
                           "removal_path": ["update_states_tp"] * pads.size + [None],
                           "skips_survived": [0] * pads.size + [2],
                           "leaked": [False] * pads.size + [True]})
    leak = Leak(rank=1, iter_created=29_990, iter_skipped=30_000, cause_ranks=(0,),
                cause_states={}, dummy=int(pads.size))
    crash = Crash(iter=iters - 1, rank=1, ranks=(1,), kind="assert", expected=2, active=3,
                  message="expected_num_active_requests")
    return ReplayResult(resolve_policies(["prefix-2026"])[0], RunConfig(tp_size=ranks), "long",
                        d, ledger, leak_records=(leak,), crash=crash,
                        skipped_iters=(30_000, 70_000), frames=None)


def test_a_long_run_is_thinned_and_stays_small(tmp_path):
    """8 ranks x 100k iterations: detail windows of +-DETAIL_RADIUS around the crash, the
    skips and the peak load, blocks of 100 iterations elsewhere; under 3 MB a rank, so 64 ranks x 100k
    stay under 200 MB (every event is per rank, dummies aside)."""
    result = _long_run(8, 100_000)
    doc = timeline(result)
    check_trace_format(doc)
    thin = doc["otherData"]["thinning"]
    assert thin["thinned"] is True and thin["block_iterations"] == 100_000 // MAX_BLOCKS
    r = DETAIL_RADIUS
    # the leak's creation (29,990) lies inside the skip's window: no window of its own
    assert thin["detail_iterations"] == [[30_000 - r, 30_000 + r], [50_000 - r, 50_000 + r],
                                         [70_000 - r, 70_000 + r], [99_999 - r, 99_999]]
    detail = [e for e in doc["traceEvents"] if e.get("cat") == "iteration"]
    assert len(detail) == 8 * (3 * (2 * r + 1) + r + 1)
    blocks = [e for e in doc["traceEvents"] if e.get("cat") == "thinned"]
    assert 8 * MAX_BLOCKS <= len(blocks) <= 8 * (MAX_BLOCKS + 6)
    covered = sum(e["dur"] for e in blocks + detail if e["pid"] == 1) // US_PER_ITER
    assert covered == 100_000                          # every iteration drawn once on rank 0
    dummies = [e for e in doc["traceEvents"] if e.get("cat") == "dummy"]
    assert len(dummies) == len(result.ledger) == 101
    leaked = next(e for e in dummies if e["args"]["leaked"])
    assert leaked["args"]["end"] == "crash" and leaked["dur"] == (100_000 - 29_990) * 1000
    path = tmp_path / "timeline.json"
    write_timeline(path, doc)
    assert json.loads(path.read_text()) == doc
    size = path.stat().st_size
    assert size == len(timeline_json(doc)) and size / 8 < 3e6, size
    # the post-mortem's file, its thinned events written as text, is the same bytes
    assert story_timeline_json({"other": _long_run(2, 50), "long": result}, "long") \
        == timeline_json(doc)


@pytest.mark.parametrize("order", ["iteration", "rank"])
def test_thinned_blocks_hold_their_rows_maxima(order):
    """Each thinned slice holds its rows' first and last iteration, their number, the largest
    active, expected and batch (a missing batch left out; none: null) and the fleet skips in
    it, as read from the decisions row by row; a block cut by a detail window is two slices.
    Rows in iteration order (a replay's: whole iterations, reduced iteration by iteration) and
    rank by rank (reduced row by row) give the same slices."""
    rng = np.random.default_rng(5)
    R, iters = 3, 9_000
    result = _long_run(R, iters)
    d = result.decisions.copy()
    d["active"] = rng.integers(0, 50, len(d))
    expected = pd.array(rng.integers(0, 9, len(d)), dtype="Int64")
    expected[(d["iter"] >= 6_000) & (d["iter"] < 6_018)] = pd.NA  # a block's counter: active only
    d["expected"] = expected
    batch = pd.array(rng.integers(0, 7, len(d)), dtype="Int64")
    batch[rng.random(len(d)) < 0.3] = pd.NA
    batch[(d["iter"] >= 2_000) & (d["iter"] < 2_018)] = pd.NA     # a block with none at all
    d["batch"] = batch
    if order == "rank":
        d = d.sort_values(["rank", "iter"], kind="stable").reset_index(drop=True)
    result = ReplayResult(result.policy, result.config, result.run, d, result.ledger,
                          leak_records=result.leak_records, crash=result.crash,
                          skipped_iters=(300, 4_321), frames=None)
    doc = timeline(result)
    thin = doc["otherData"]["thinning"]
    windows = thin["detail_iterations"]
    assert any(a % thin["block_iterations"] for a, _ in windows)   # a window cuts a block
    blocks = [e for e in doc["traceEvents"] if e.get("cat") == "thinned"]
    assert blocks and any(e["args"]["max_batch"] is None for e in blocks)
    for e in blocks:
        a, b = e["args"]["iterations"]
        rows = d[(d["iter"] >= a) & (d["iter"] <= b) & (d["rank"] == e["pid"] - 1)]
        assert not any(lo <= x <= hi for x in rows["iter"] for lo, hi in windows)
        assert e["args"]["frames"] == len(rows) and rows["iter"].min() == a
        assert e["args"]["max_active"] == rows["active"].max()
        want = rows["expected"].dropna()
        assert e["args"]["max_expected"] == (int(want.max()) if len(want) else None)
        want = rows["batch"].dropna()
        assert e["args"]["max_batch"] == (int(want.max()) if len(want) else None)
        assert e["args"]["fleet_skips"] == sum(a <= s <= b for s in (300, 4_321))
    counters = {(e["pid"], e["ts"]): e["args"] for e in doc["traceEvents"]
                if e["ph"] == "C" and e["ts"] // US_PER_ITER not in
                {x for lo, hi in windows for x in range(lo, hi + 1)}}
    assert len(counters) == len(blocks)
    for e in blocks:   # a block's counter sample: its maxima, a missing one left out
        want = {k: e["args"][f"max_{k}"] for k in ("active", "expected")
                if e["args"][f"max_{k}"] is not None}
        assert counters[e["pid"], e["ts"]] == want
    assert any(set(c) == {"active"} for c in counters.values())
    per_rank = collections.Counter(e["pid"] for e in blocks)
    for r in range(R):
        covered = sum(e["args"]["frames"] for e in blocks if e["pid"] == r + 1)
        assert covered + sum(hi - lo + 1 for lo, hi in windows) == iters, per_rank
    # missing maxima as null in the post-mortem's bytes too
    assert story_timeline_json({"r": result}, "r") == timeline_json(doc)


def test_postmortem_writes_the_timeline_of_the_story(tmp_path):
    """The sample's story is told by the recording build, prefix-2026 (its crash)."""
    res = forensics.postmortem([NVBUG], tmp_path / "report")
    doc = json.loads((tmp_path / "report" / "timeline.json").read_text())
    check_trace_format(doc)
    assert doc["otherData"]["policy"] == res.chain_policy == "prefix-2026"
    assert any(e.get("cat") == "crash" for e in doc["traceEvents"])


def test_postmortem_timeline_follows_the_story_when_it_is_not_the_recording_builds(tmp_path):
    """The timeline is started on the recording build's replay before the verdicts are known;
    when the story is another policy's it is that one's timeline that is written. Here the
    recording build (prefix-2026) is not replayed, the first policy replayed (fix-16161, the
    fix) is clean, and mid-2025 leaks: its replay tells the story."""
    res = forensics.postmortem([NVBUG], tmp_path / "report", policies=["fix-16161", "mid-2025"])
    assert {v.policy: v.verdict for v in res.verdicts} == {"fix-16161": "clean",
                                                            "mid-2025": "leak"}
    doc = json.loads((tmp_path / "report" / "timeline.json").read_text())
    check_trace_format(doc)
    assert doc["otherData"]["policy"] == res.chain_policy == "mid-2025"
    # the guess and the story: two timelines built, one written
    assert res.timings["stages"]["timeline"]["blocks"] == 2
