"""Log, stats and trace of a simulated run agree with each other, with the replay engine and
with ingest; the same seed gives the same bytes."""
import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pytest

from forensics.simulate import SCENARIOS, simulate
from replay import walk
from replay.frames import RunFrames

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nvbug(tmp_path_factory):
    """The committed-sample scenario, every rank logging."""
    return simulate("nvbug-6438685", out_dir=tmp_path_factory.mktemp("nvbug"))


def _records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _log_iterations(path):
    from forensics.readers.executor_log import parse_executor_log
    batches = list(parse_executor_log(path, "sim"))
    it = pa.concat_tables([b.iterations for b in batches])
    ev = pa.concat_tables([b.events for b in batches])
    un = pa.concat_tables([b.unparsed for b in batches])
    return it.to_pandas(), ev.to_pandas(), un.num_rows


def test_the_default_nvbug_run_crashes_within_a_few_hundred_iterations(nvbug):
    s = nvbug.summary
    assert nvbug.policy == "prefix-2026" and s.crash_kind == "assert"
    assert s.crash_iter is not None and s.crash_iter < 300 and s.leaked_dummies > 0


def test_log_stats_and_trace_agree(nvbug):
    """Same iterations, ranks and batch sizes in the three files.

    The trace has a frame per rank for bodies 0..crash; stats rows for 0..crash-1 (written at
    the end of a body); the log's iteration lines say iter = body + 1 (printed at the top of the
    next body), so 1..crash.
    """
    crash, R = nvbug.summary.crash_iter, nvbug.workload.ranks
    frames = {(r["iter"], r["rank"]): r for r in _records(nvbug.files["trace"])[1:]}
    stats = {(r["iter"], r["attentionDpRank"]): r for r in _records(nvbug.files["stats"])}
    lines, events, unparsed = _log_iterations(nvbug.files["log"])
    assert unparsed == 0
    assert set(frames) == {(i, r) for i in range(crash + 1) for r in range(R)}
    assert set(stats) == {(i, r) for i in range(crash) for r in range(R)}
    logged = {(int(row.iter) - 1, int(row.rank)): row for row in lines.itertuples()}
    assert set(logged) == set(stats)
    for key, st in stats.items():
        fr = frames[key]
        batch = st["inflightBatchingStats"]["numScheduledRequests"]
        assert batch == fr["scheduled"] == logged[key].num_scheduled_requests, key
        # numActiveRequests is rank 0's len(active_requests) before padding, on every row.
        assert st["numActiveRequests"] == len(frames[(key[0], 0)]["requests"])
        ctx_gen = (st["inflightBatchingStats"]["numContextRequests"]
                   + st["inflightBatchingStats"]["numGenRequests"])
        assert ctx_gen == batch - (fr["padded"] or any(q.get("dummy") for q in fr["requests"]))
    # The crash: the ranks whose frame at the crash body holds more requests than expected.
    over = sorted(r for r in range(R) if len(frames[(crash, r)]["requests"]) > frames[(crash, r)]["expected"])
    assert tuple(over) == nvbug.summary.crash_ranks
    asserts = events[events.kind == "adp_assert"]
    assert sorted(set(asserts["rank"].astype(int))) == over


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = simulate("surplus-17278", out_dir=tmp_path / "a", iters=80)
    b = simulate("surplus-17278", out_dir=tmp_path / "b", iters=80)
    c = simulate("surplus-17278", out_dir=tmp_path / "c", iters=80, seed=99)
    for role in ("log", "stats", "trace"):
        assert a.files[role].read_bytes() == b.files[role].read_bytes(), role
        assert a.files[role].read_bytes() != c.files[role].read_bytes(), role


def test_compressed_output_is_deterministic_and_readable(tmp_path):
    a = simulate("healthy", out_dir=tmp_path / "a", iters=30, compression="gz")
    b = simulate("healthy", out_dir=tmp_path / "b", iters=30, compression="gz")
    assert a.files["trace"].name == "trace.jsonl.gz"
    assert a.files["trace"].read_bytes() == b.files["trace"].read_bytes()
    from forensics.readers.trace_v1 import read_trace
    assert read_trace(a.files["trace"]).frames.num_rows == 30 * 4


CASES = [(name, pol) for name in SCENARIOS if name != "fleet-1h"
         for pol in (SCENARIOS[name].verdicts if name in ("nvbug-6438685", "surplus-17278")
                     else (SCENARIOS[name].policy, "prefix-2026", "newest"))]


@pytest.mark.parametrize("name, policy", CASES)
def test_replaying_the_trace_under_its_policy_reproduces_every_decision(tmp_path, name, policy):
    """The simulator and the replay engine must agree on every recorded decision, the crash and
    the leaks; and the scenario's documented verdict must hold."""
    res = simulate(name, policy=policy, out_dir=tmp_path, write=("trace",))
    rf = RunFrames.from_records(_records(res.files["trace"]), source=str(res.files["trace"]))
    rep = walk.run(rf, policy=policy)
    assert rep.first_divergence is None
    s = res.summary
    if s.crash_iter is None:
        assert rep.crash is None
    else:
        assert (rep.crash.iter, rep.crash.ranks) == (s.crash_iter, s.crash_ranks)
    assert len(rep.leaks) == s.leaked_dummies
    assert res.verdict == SCENARIOS[name].verdicts[policy]


def test_the_crash_is_found_by_ingest_and_replay(tmp_path, nvbug):
    from forensics.dataset.store import load
    from forensics.readers import ingest
    ingest([nvbug.files["log"].parent], tmp_path / "ds")
    ds = load(tmp_path / "ds")
    rep = walk.run(RunFrames.from_dataset(ds), policy="prefix-2026")
    assert rep.crash is not None
    assert (rep.crash.iter, rep.crash.rank) == (nvbug.summary.crash_iter, nvbug.summary.crash_ranks[0])
    assert walk.run(RunFrames.from_dataset(ds), policy="fix-16161").crash is None


@pytest.mark.parametrize("fmt", ["V1", "V2", "V3", "V4", "V5"])
def test_every_iteration_line_variant_parses_as_itself(tmp_path, fmt):
    res = simulate("healthy", out_dir=tmp_path, iters=12, log_format=fmt, log_ranks="0", write=("log",))
    lines, _, unparsed = _log_iterations(res.files["log"])
    assert unparsed == 0 and len(lines) == 11
    assert set(lines["format"]) == {fmt}
    assert set(lines["rank"]) == {0} and list(lines["iter"]) == list(range(1, 12))


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_launcher_prefixes_carry_the_rank(tmp_path, launcher):
    res = simulate("nvbug-6438685", out_dir=tmp_path, launcher=launcher, write=("log",))
    text = res.files["log"].read_text().splitlines()
    r = res.summary.crash_ranks[0]
    wrap = f"{r}: " if launcher == "srun" else f"[1,{r}]<stderr>:"
    assert any(line == wrap + "AssertionError" for line in text)
    _, events, unparsed = _log_iterations(res.files["log"])
    assert unparsed == 0
    assert sorted(set(events[events.kind == "adp_assert"]["rank"].astype(int))) == list(res.summary.crash_ranks)


def test_surplus_warnings_are_logged_by_the_tolerant_build(tmp_path):
    res = simulate("surplus-17278", out_dir=tmp_path, write=("log",))
    text = res.files["log"].read_text()
    n = text.count("exceeds expected_num_active_requests")
    assert n == res.summary.surplus_warnings > 0 and "AssertionError" not in text


def test_committed_samples_are_up_to_date():
    """traces/samples/ must be what traces/regenerate.py writes today (byte for byte)."""
    spec = importlib.util.spec_from_file_location("regenerate", REPO / "traces" / "regenerate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0


@pytest.mark.parametrize("style, rank_known", [("rank", True), ("mpi_rank", True), ("torch", True),
                                               ("single", False)])
def test_logger_prefix_styles_parse(tmp_path, style, rank_known):
    res = simulate("healthy", out_dir=tmp_path, iters=6, prefix_style=style, write=("log",))
    lines, _, unparsed = _log_iterations(res.files["log"])
    assert unparsed == 0 and len(lines) == 5 * 4
    if rank_known:
        assert sorted(set(lines["rank"].astype(int))) == [0, 1, 2, 3]


def test_a_post_pad_dummy_of_a_skipped_iteration_is_rolled_back_and_replays(tmp_path):
    """Two aggregated ranks, cap 2, overlap, one-token requests; three arrive at iteration 0:
    rank 0 gets ids 1 and 3, rank 1 gets id 2; all finish their only token in iteration 0.
    iter 1: rank 0 holds two GENERATION_TO_COMPLETE (active 2 = cap: no post-pad), batch 0;
    rank 1 holds one (active 1 < cap) and gets a post-pad dummy, batch 1; can_queue False, so
    the pending post-pad dummy is rolled back, even without a transceiver (#17379's rollback
    test runs with the fixes flag off): nothing leaks."""
    from forensics.simulate import LengthDist, Workload
    w = Workload(ranks=2, max_batch_size=2, mode="aggregated", overlap=True, arrival_rate=0,
                 arrivals=((0, 3),), output_len=LengthDist(1, 0))
    res = simulate(w, policy="newest", iters=6, seed=0, out_dir=tmp_path, write=("trace",))
    assert res.summary.leaked_dummies == 0 and res.summary.skipped_iters == 1
    rf = RunFrames.from_records(_records(res.files["trace"]), source=str(res.files["trace"]))
    rep = walk.run(rf, policy="newest")
    assert rep.first_divergence is None and rep.leaks.empty
    assert rep.ledger[["rank", "iter_created", "origin", "removal_path"]].values.tolist()[0] == \
        [1, 1, "postpad", "rollback"]
