"""The streamed replay (windows of iterations, results in Parquet files) equals the whole-run
replay held in memory: every decision, ledger row, leak, crash, skip, divergence and chain.

Tiny windows put edges everywhere: between a dummy's creation and its removal (mid-leak), inside
chains of fleet-wide skips, right before and right after the crash row.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forensics.readers.dataset_cache import as_dataset
from replay.frame_windows import FrameWindows
from replay.frames import RunFrames
from replay.streaming import replay_windows
from replay.walk import run_all

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"
SAMPLE_DIRS = sorted(p for p in SAMPLES.iterdir() if (p / "trace.jsonl").is_file()) \
    if SAMPLES.is_dir() else []


def _policies():
    from replay.catalogue import CATALOGUE
    return list(CATALOGUE)


def assert_same(whole: dict, streamed: dict) -> None:
    assert list(whole) == list(streamed)
    for name, a in whole.items():
        b = streamed[name]
        assert b.stored
        pd.testing.assert_frame_equal(a.decisions, b.decisions, check_exact=True, obj=f"{name} decisions")
        pd.testing.assert_frame_equal(a.ledger, b.ledger, check_exact=True, obj=f"{name} ledger")
        assert a.leak_records == b.leak_records, name
        pd.testing.assert_frame_equal(a.leaks, b.leaks, obj=f"{name} leaks")
        assert a.crash == b.crash, name
        assert a.skipped_iters == b.skipped_iters, name
        assert a.first_divergence == b.first_divergence, name
        assert a.notes == b.notes and a.dropped_iters == b.dropped_iters, name
        assert a.explain() == b.explain(), name
        assert a.story() == b.story(), name
        assert a.warnings() == b.warnings(), name


def _edges(whole: dict) -> list[int]:
    """Window starts right at and right after every crash and at and after the creation of
    each policy's first leaked dummy (edges mid-leak, at the crash)."""
    its = {int(r.crash.iter) for r in whole.values() if r.crash}
    its |= {int(r.first_leak.iter_created) for r in whole.values() if r.leak_records}
    return sorted(its | {i + 1 for i in its})


def _layouts(ds, whole: dict, size: int) -> list[FrameWindows]:
    out = [FrameWindows(ds, size=size)]
    if _edges(whole):
        out.append(FrameWindows(ds, starts=_edges(whole)))
    return out


@pytest.mark.skipif(not SAMPLE_DIRS, reason="no samples")
@pytest.mark.parametrize("sample", SAMPLE_DIRS, ids=lambda p: p.name)
def test_streamed_equals_whole_on_samples(sample, tmp_path):
    ds = as_dataset([sample / "trace.jsonl"], cache_dir=tmp_path / "ds")
    pols = _policies()
    whole = run_all(RunFrames.from_dataset(ds), pols)
    assert any(not r.ok for r in whole.values()) or sample.name == "healthy"
    for k, windows in enumerate(_layouts(ds, whole, 9)):
        assert len(windows) > 1
        assert_same(whole, replay_windows(windows, pols, tmp_path / f"w{k}"))


@pytest.mark.parametrize("scenario,policy", [("nvbug-6438685", "legacy-2025"),
                                             ("nvbug-6438685", "prefix-2026"),
                                             ("surplus-17278", "tolerant-17278")])
def test_streamed_equals_whole_on_simulated_runs(scenario, policy, tmp_path):
    """Longer simulated runs (leaks that live across many windows, a crash late in the run)."""
    from forensics.simulate import simulate
    simulate(scenario, out_dir=tmp_path / "sim", policy=policy, iters=300, write=("trace",))
    ds = as_dataset([tmp_path / "sim"], cache_dir=tmp_path / "ds")
    pols = _policies()
    whole = run_all(RunFrames.from_dataset(ds), pols)
    assert sum(len(r.leaks) for r in whole.values()) > 0
    long_lived = [lk for r in whole.values() for lk in r.leak_records]
    assert long_lived
    layouts = _layouts(ds, whole, 23)
    assert len(layouts) == 2
    # policies decided one after the other (even windows), or on threads (windows at the edges)
    for k, (windows, threads) in enumerate(zip(layouts, (1, 3))):
        assert_same(whole, replay_windows(windows, pols, tmp_path / f"w{k}-{threads}",
                                          threads=threads))


def test_hooked_policy_streams_like_whole(tmp_path):
    """A policy whose pad step is Python code (walked row by row) carries its dummies over edges."""
    import dataclasses

    from replay.catalogue import CATALOGUE
    from replay.policy import PadOutcome

    def pad_when_empty(view):
        schedulable = sum(1 for _, s, d in view.requests if not d and s >= 0)
        return PadOutcome(padded=schedulable == 0 and view.expected > 0)

    pol = dataclasses.replace(CATALOGUE["legacy-2025"], name="legacy+hook", pad_hook=pad_when_empty)
    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    ds = as_dataset([sample], cache_dir=tmp_path / "ds")
    whole = run_all(RunFrames.from_dataset(ds), [pol])
    for size in (1,):
        assert_same(whole, replay_windows(FrameWindows(ds, size=size), [pol], tmp_path / f"w{size}"))


def test_hooked_policies_are_never_decided_at_once(tmp_path):
    """Hooks are Python and may share state (one stand-in executor for a policy's model
    variants): asked for threads, the windowed replay still calls one hook at a time."""
    import dataclasses
    import threading
    import time

    from replay.catalogue import CATALOGUE
    from replay.policy import PadOutcome

    inside, overlaps, lock = [0], [0], threading.Lock()

    def shared_hook(view):
        with lock:
            inside[0] += 1
            overlaps[0] += inside[0] > 1
        time.sleep(0.0005)   # long enough for a second thread to arrive if one could
        schedulable = sum(1 for _, s, d in view.requests if not d and s >= 0)
        with lock:
            inside[0] -= 1
        return PadOutcome(padded=schedulable == 0 and view.expected > 0)

    pols = [dataclasses.replace(CATALOGUE[n], name=n + "+hook", pad_hook=shared_hook)
            for n in ("legacy-2025", "prefix-2026")]
    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    ds = as_dataset([sample], cache_dir=tmp_path / "ds")
    whole = run_all(RunFrames.from_dataset(ds), pols)
    streamed = replay_windows(FrameWindows(ds, size=8), pols, tmp_path / "w", threads=2)
    assert overlaps[0] == 0
    assert_same(whole, streamed)


def test_windows_cover_the_run_once(tmp_path):
    """Every frame lands in exactly one window; dropped iterations are the whole run's."""
    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    ds = as_dataset([sample], cache_dir=tmp_path / "ds")
    whole = RunFrames.from_dataset(ds)
    windows = FrameWindows(ds, size=4)
    parts = list(windows)
    assert len(parts) == len(windows) > 1
    assert [int(x) for p in parts for x in p.iters] == [int(x) for x in whole.iters]
    assert sum(int(p.n_real.sum()) for p in parts) == int(whole.n_real.sum())
    # first-seen is the run's, not the window's: new requests agree row for row
    assert (pd.Series([v for p in parts for v in p.new_real.ravel()]).to_numpy()
            == whole.new_real.ravel()).all()
    assert windows.dropped_iters == whole.dropped_iters


@pytest.mark.parametrize("source", ["nvbug-6438685", "healthy", "sim:nvbug-6438685:legacy-2025",
                                    "sim:healthy:fix-16161"])
def test_figures_from_files_equal_figures_from_memory(source, tmp_path):
    """The post-mortem draws its figures from a few iterations read back from the files; the
    SVGs are byte for byte those drawn from every decision in memory (simulated runs are long
    enough to be drawn in windows)."""
    from forensics.logs_only import logs_only_findings
    from forensics.report.narrative import figure_blocks, figure_policies
    from forensics.report.figure_views import figure_views
    from forensics.verdicts import policy_verdict, story_policy
    if source.startswith("sim:"):
        from forensics.simulate import simulate
        _, scenario, policy = source.split(":")
        simulate(scenario, out_dir=tmp_path / "sim", policy=policy, iters=1200, write=("trace",))
        inp = tmp_path / "sim"
    else:
        inp = SAMPLES / source
        if not inp.is_dir():
            pytest.skip("no samples")
    ds = as_dataset([inp], cache_dir=tmp_path / "ds")
    pols = _policies()
    whole = run_all(RunFrames.from_dataset(ds), pols)
    windows = FrameWindows(ds, size=64)
    streamed = replay_windows(windows, pols, tmp_path / "w")
    cfg = windows.config
    verdicts = tuple(policy_verdict(n, r, None, cfg.build) for n, r in whole.items())
    assert verdicts == tuple(policy_verdict(n, r, None, cfg.build) for n, r in streamed.items())
    lo = logs_only_findings(ds.iterations, ds.events, tp_size=cfg.tp_size, has_traces=True)
    chain = story_policy(verdicts)
    a = figure_blocks(ds, windows.run, whole, chain, verdicts, lo, cfg)
    views = figure_views(streamed, figure_policies(streamed, chain, verdicts))   # as postmortem
    if source.startswith("sim:"):   # drawn from a part of the decisions only
        assert any(len(v.decisions) < len(whole[n].decisions) / 2 for n, v in views.items())
    b = figure_blocks(ds, windows.run, views, chain, verdicts, lo, cfg)
    assert [f.name for f in a] == [f.name for f in b] and len(a) >= 2
    for fa, fb in zip(a, b):
        assert fa.data == fb.data, fa.name


# --- replay_input, forensics replay and forensics fleet stream long runs ------------------------

def test_replay_input_streams_like_in_memory(tmp_path):
    """``replay_input`` with windows smaller than the run streams (results read from files)
    and equals the in-memory replay of the same input; the files live with the results (one
    sample: the streamed replay of every sample is compared in
    test_streamed_equals_whole_on_samples)."""
    import gc

    from replay.streaming import replay_input
    sample = SAMPLES / "nvbug-6438685"
    if not sample.is_dir():
        pytest.skip("no samples")
    whole = replay_input([sample / "trace.jsonl"], cache_dir=tmp_path / "ds")
    assert not any(r.stored for r in whole.values())
    streamed = replay_input([tmp_path / "ds"], window=7)
    assert all(r.stored for r in streamed.values())
    assert_same(whole, streamed)
    kept = next(iter(streamed.values())).with_changes(notes=("a view",))
    where = kept._files["decisions"].path
    del streamed
    gc.collect()
    assert where.is_file()       # a view still reads the files
    pd.testing.assert_frame_equal(kept.decisions, next(iter(whole.values())).decisions)
    del kept
    gc.collect()
    assert not where.exists()    # the temporary directory went with the last result
    given = replay_input([tmp_path / "ds"], ["prefix-2026"], directory=tmp_path / "out")
    assert list((tmp_path / "out").glob("*/decisions.parquet")) and given["prefix-2026"].stored


def test_fleet_and_replay_cli_stream_like_in_memory(tmp_path):
    """``forensics fleet`` rows and ``forensics replay`` output are the same when the runs are
    replayed in windows (a long run) as in memory."""
    from click.testing import CliRunner

    from forensics.cli import cli
    from forensics.fleet_table import fleet_table
    from forensics.simulate import simulate
    import replay.streaming as streaming

    simulate("nvbug-6438685", out_dir=tmp_path / "sim", policy="legacy-2025", iters=300)
    # a long run and a sample (each sample's streamed replay: test_streamed_equals_whole_on_samples)
    inputs = [str(tmp_path / "sim"), *(str(p) for p in SAMPLE_DIRS if p.name == "nvbug-6438685")]
    whole = fleet_table(inputs, cache_dir=tmp_path / "c")
    pd.testing.assert_frame_equal(fleet_table(inputs, cache_dir=tmp_path / "c", window=37), whole)
    assert whole["legacy-2025.leaks"].sum() > 0
    runner = CliRunner()
    args = ["replay", str(tmp_path / "sim")]
    before = [runner.invoke(cli, args + extra) for extra in ([], ["--json"])]
    old = streaming.STREAM_MIN_FRAMES
    streaming.STREAM_MIN_FRAMES = 1     # every run is long: forensics replay streams
    try:
        after = [runner.invoke(cli, args + extra) for extra in ([], ["--json"])]
    finally:
        streaming.STREAM_MIN_FRAMES = old
    for b, a in zip(before, after):
        assert b.exit_code == a.exit_code == 1
        assert a.output == b.output
    assert "iterations" in after[0].output


@pytest.mark.parametrize("rewrite", ["shared-across-ranks", "negative"])
def test_windows_first_seen_like_whole_whatever_the_ids(rewrite, tmp_path):
    """First-seen iterations carried across window edges equal the whole run's when one id is
    used on several ranks (then a request is its (rank, id)) and when ids are negative (keyed
    without the id * ranks shortcut)."""
    import json

    import numpy as np

    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    new_id = {"shared-across-ranks": lambda i: i % 5, "negative": lambda i: -1 - 7 * i}[rewrite]
    lines = []
    for line in sample.read_text().splitlines():
        rec = json.loads(line)
        for q in rec.get("requests", ()):
            q["id"] = new_id(int(q["id"]))
        lines.append(json.dumps(rec))
    (tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n")
    ds = as_dataset([tmp_path / "trace.jsonl"], cache_dir=tmp_path / "ds")
    whole = RunFrames.from_dataset(ds)
    assert whole.req_id.size and (whole.req_id < 0).any() == (rewrite == "negative")
    parts = list(FrameWindows(ds, size=4))
    assert len(parts) > 1
    for name in ("new_real", "max_first_seen", "window_real", "intent"):
        got = np.concatenate([getattr(p, name).ravel() for p in parts])
        assert (got == getattr(whole, name).ravel()).all(), name
    assert (np.concatenate([p.req_first for p in parts]) == whole.req_first).all()
    assert sum(int(p.new_real.sum()) for p in parts) > 0


def test_policies_deciding_alike_share_their_rows(tmp_path):
    """A window two policies decide alike is written once, and one they decide alike but for a
    few columns has those columns written alone: the other policy's result reads those rows
    (every read: whole, filtered by iteration or value, some columns, a row group at a time)
    and gets what the in-memory replay holds."""
    import pyarrow.parquet as pq

    from replay.table_storage import filter_frame

    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    ds = as_dataset([sample], cache_dir=tmp_path / "ds")
    pols = _policies()
    whole = run_all(RunFrames.from_dataset(ds), pols)
    streamed = replay_windows(FrameWindows(ds, size=9), pols, tmp_path / "w")
    stored = {n: r._files["decisions"] for n, r in streamed.items()}
    written = sum(pq.ParquetFile(t.path).metadata.num_rows for t in stored.values())
    total = sum(len(r.decisions) for r in whole.values())
    assert 0 < written < total            # some windows were written once for several policies
    assert any(t.pieces for t in stored.values())
    patched = {c for t in stored.values() for p in t.pieces or () for q in p.patches
               for c in q.columns}
    assert patched                            # some windows differ in a few columns only
    longest = max(whole.values(), key=lambda r: len(r.decisions))
    its = [int(x) for x in longest.decisions["iter"].unique()]
    reads = [([("iter", "in", its[3:5] + its[-2:])], None),
             ([("iter", "<", its[12])], ["active", "expected"]),
             ([("iter", ">=", its[20]), ("rank", "==", 1)], ["batch", "can_queue"]),
             ([("surplus", "==", True)], ["rank", "active", "expected"]),
             ([("schedulable", ">", 1)], ["iter", "schedulable", "expected_source"]),
             ([("expected_source", "==", "computed")], ["rank"]),
             ([("iter", "==", its[-1] + 100)], ["iter"])]
    for name, r in whole.items():
        t = stored[name]
        assert t.num_rows == len(r.decisions), name
        for filters, columns in reads:
            want = filter_frame(r.decisions, filters)
            want = want[columns] if columns is not None else want
            pd.testing.assert_frame_equal(t.read(filters, columns), want, check_exact=True,
                                          obj=f"{name} {filters}")
        scan = pd.concat(list(t.frames(["iter", "rank", "active"])), ignore_index=True)
        assert scan["active"].tolist() == r.decisions["active"].tolist(), name
        assert scan["iter"].tolist() == r.decisions["iter"].tolist(), name


@pytest.mark.parametrize("order", ["by-iteration", "by-rank"])
def test_windows_read_by_row_group_like_filtered_reads(order, tmp_path, monkeypatch):
    """Windows read by row group (iteration statistics, a row group shared by two windows read
    once) hold what windows read through filtered dataset reads hold, whether the file is in
    iteration order (sliced) or not (filtered)."""
    import json

    import numpy as np

    import forensics.dataset.writer as writer

    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    records = [json.loads(line) for line in sample.read_text().splitlines()]
    if order == "by-rank":
        head = [r for r in records if r["kind"] != "frame"]
        frames = sorted((r for r in records if r["kind"] == "frame"),
                        key=lambda r: (r["rank"], r["iter"]))
        records = head + frames
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(writer, "ROW_GROUP_ROWS", 50)    # many row groups, windows across them
    ds = as_dataset([tmp_path / "trace.jsonl"], cache_dir=tmp_path / "ds")
    import pyarrow.parquet as pq
    assert pq.ParquetFile(ds.files("requests")[0]).metadata.num_row_groups > 3
    windows = FrameWindows(ds, size=5)
    assert windows._range_readers() is not None
    by_group = list(windows)
    monkeypatch.setattr(FrameWindows, "_range_readers", lambda self: None)
    filtered = list(windows)
    assert len(by_group) == len(filtered) > 3
    for a, b in zip(by_group, filtered):
        for name in ("iters", "n_real", "window_real", "new_real", "max_first_seen", "real_batch",
                     "rec_padded", "line", "req_frame", "req_id", "req_state", "req_first"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_frames_at_some_iterations_read_by_range_like_a_filtered_read(tmp_path, monkeypatch):
    """``FrameWindows.at`` reads a few stretches of iterations by row group (what a timeline's
    detail windows ask) and holds what one filtered read holds: whole stretches, single and
    scattered iterations, iterations the run lacks, the first and the last."""
    import dataclasses

    import numpy as np

    import forensics.dataset.writer as writer

    sample = SAMPLES / "nvbug-6438685" / "trace.jsonl"
    if not sample.is_file():
        pytest.skip("no samples")
    monkeypatch.setattr(writer, "ROW_GROUP_ROWS", 50)    # many row groups
    ds = as_dataset([sample], cache_dir=tmp_path / "ds")
    windows = FrameWindows(ds, size=5)
    its = [int(x) for x in windows.iters]
    asks = [its[:7], its[3:9] + its[20:24], its[-4:] + [its[-1] + 50], [its[0] - 3],
            its[::5], [its[10]], its]
    filtered = FrameWindows(ds, size=5)
    monkeypatch.setattr(filtered, "_range_readers", lambda: None)
    for ask in asks:
        a, b = windows.at(ask), filtered.at(ask)
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y), (f.name, ask)
            elif f.name != "_sched_cache":
                assert x == y, (f.name, ask)


def test_mechanisms_of_a_streamed_replay_read_a_few_iterations(tmp_path):
    """The chain grouped by mechanism is the in-memory one, read from the iterations it names:
    the file of a streamed replay is not read whole (a fleet hour holds millions of rows)."""
    from forensics.causal_chain import mechanisms
    from forensics.simulate import simulate
    from replay.table_storage import StoredTable

    simulate("nvbug-6438685", out_dir=tmp_path / "sim", policy="legacy-2025", iters=300,
             write=("trace",))
    ds = as_dataset([tmp_path / "sim"], cache_dir=tmp_path / "ds")
    whole = run_all(RunFrames.from_dataset(ds), ["legacy-2025"])["legacy-2025"]
    streamed = replay_windows(FrameWindows(ds, size=23), ["legacy-2025"], tmp_path / "w")["legacy-2025"]
    assert whole.leak_records and mechanisms(whole)
    assert [m.to_json() for m in mechanisms(streamed)] == [m.to_json() for m in mechanisms(whole)]
    assert isinstance(streamed._tables["decisions"], StoredTable)   # never read whole
