"""Logs-only post-mortems: the run's facts from logs and stats, signatures matched only against
versions those facts allow, the chain seen in the iteration lines, a next step that uses them."""
from __future__ import annotations

import json

from report_scenarios import _ASSERT, _ITER, SAMPLES

from forensics.crash_signatures import crash_in_logs, find_signatures
from forensics.logs_only import logs_only_findings
from forensics.logs_verdict import judge_logs_only
from forensics.pipeline import postmortem
from forensics.readers.dataset_cache import as_dataset
from forensics.run_facts import infer_run_facts
from replay.catalogue import CATALOGUE

NVBUG_LOG = SAMPLES / "nvbug-6438685" / "executor.log"


def _facts(tmp_path, text: str, stats: list[dict] | None = None, crash: str = ""):
    log = tmp_path / "x.log"
    log.write_text(text)
    inputs = [log]
    if stats is not None:
        s = tmp_path / "stats.jsonl"
        s.write_text("\n".join(json.dumps(r) for r in stats) + "\n")
        inputs.append(s)
    ds = as_dataset(inputs)
    return infer_run_facts(ds.iterations, ds.events, ds.stats, crash_text=crash), ds


def _stat(it, rank, scheduled, cap, micro=0):
    return {"iter": it, "timestamp": "07-09-2026 16:18:39", "iterLatencyMS": 10.0,
            "numActiveRequests": scheduled, "numQueuedRequests": 0, "numCompletedRequests": 0,
            "maxNumActiveRequests": cap, "kvCacheStats": {"maxNumBlocks": 10},
            "inflightBatchingStats": {"numScheduledRequests": scheduled, "numContextRequests": 0,
                                      "numGenRequests": scheduled, "numPausedRequests": 0,
                                      "numCtxTokens": 0, "microBatchId": micro},
            "attentionDpRank": rank}


def test_overlap_from_the_traceback_frames(tmp_path):
    lines = _ITER.format(t=1, rank=0, it=1) + "\n"
    f, _ = _facts(tmp_path, lines, crash='File "py_executor.py", line 1690, in _executor_loop\n')
    assert f.overlap is False
    f, _ = _facts(tmp_path, lines, crash="in _executor_loop_overlap\n")
    assert f.overlap is True
    assert any(x.name == "overlap" and "_executor_loop_overlap" in x.evidence for x in f.facts)
    f, _ = _facts(tmp_path, lines, crash="in _executor_loop_pp\n")
    assert f.pp_above_one is True and f.overlap is None


def test_serving_mode_from_kv_transfer_lines(tmp_path):
    text = (_ITER.format(t=1, rank=0, it=1) + "\n"
            "[11/30/2026-10:00:02] [TRT-LLM] [RANK 1] [W] Request 7 timed out due to KV cache "
            "transfer timeout\n")
    f, _ = _facts(tmp_path, text)
    assert f.disaggregated is True
    fact = next(x for x in f.facts if x.name == "serving mode")
    assert fact.value == "disaggregated" and "x.log:2" in fact.evidence
    f, _ = _facts(tmp_path, _ITER.format(t=1, rank=0, it=1) + "\n")
    assert f.disaggregated is None
    assert "no KV-cache transfer line" in next(x for x in f.facts if x.name == "serving mode").evidence


def test_pp_size_from_the_stats(tmp_path):
    """cap = pp_size * max_batch_size and a batch is at most max_batch_size: a batch of 3 against
    a cap of 4 leaves room for one stage only; a micro-batch id of 1 means at least 2 stages."""
    text = _ITER.format(t=1, rank=0, it=1) + "\n"
    f, _ = _facts(tmp_path, text, stats=[_stat(0, 0, 3, 4), _stat(0, 1, 1, 4)])
    assert (f.pp_above_one, f.pp_size) == (False, 1)
    f, _ = _facts(tmp_path, text, stats=[_stat(0, 0, 2, 4), _stat(0, 1, 1, 4)])
    assert f.pp_above_one is None
    f, _ = _facts(tmp_path, text, stats=[_stat(0, 0, 1, 4, micro=1)])
    assert f.pp_above_one is True


def test_build_era_from_line_format_and_banner(tmp_path):
    text = ("[TensorRT-LLM] TensorRT-LLM version: 1.3.0rc2\n" + _ITER.format(t=1, rank=0, it=1) + "\n")
    f, _ = _facts(tmp_path, text)
    assert f.version == "1.3.0rc2"
    assert f.line_formats == ("V3",)   # host_step_time, no num_scheduled_requests = (V4)
    # A V3-only build predates PR #14206: only the versions older than that remain.
    assert [p for p in CATALOGUE if f.era_allows(CATALOGUE[p])] == ["mid-2025", "legacy-2025",
                                                                   "early-2026", "prefix-2026"]


def test_signature_matched_only_against_possible_versions(tmp_path):
    """Disaggregated (a KV transfer line) and pp_size 1 (a batch of 3 against a cap of 4): the entry
    assert can come only from prefix-2026, and every later build closes the leak there."""
    text = (_ITER.format(t=1, rank=0, it=1) + "\n" + _ITER.format(t=2, rank=0, it=2) + "\n"
            "[11/30/2026-10:00:02] [TRT-LLM] [RANK 1] [W] Request 7 timed out due to KV cache "
            "transfer timeout\n" + _ASSERT.format(rank=0))
    f, ds = _facts(tmp_path, text, stats=[_stat(0, 0, 3, 4)])
    pols = list(CATALOGUE.values())
    sig = crash_in_logs(find_signatures(ds.events, pols, iterations=ds.iterations))
    # any path; fix-16279 outside its model gate keeps the crashing count (sched-aware-16921
    # shipped after #17278: it warns, never asserts)
    assert set(sig.policies) == {"prefix-2026", "fix-16161", "fix-16279"}
    v = judge_logs_only(sig, logs_only_findings(ds.iterations, ds.events), f, pols)
    assert v.policies == ("prefix-2026",)
    # fix-16161 never shipped; the logs name no model, so the DeepSeek-V4-gated builds are
    # named with their condition
    assert v.survivors == (("disaggregated, pp_size 1",
                            ("fix-16279 (only if the model is DeepSeek-V4)",
                             "tolerant-17278 (only if the model is DeepSeek-V4)",
                             "sched-aware-16921", "postpad-17379", "newest",
                             "kv-connector-19164", "dkv")),)
    assert v.chain is None and not v.explained     # rank 0 alone logs: no skip is known


def test_nvbug_executor_log_alone_is_explained(tmp_path):
    """The bundled NVBug log: every rank logs, the skip at 75 has rank 0 at batch 0 and rank 2
    busy, the assert fires on rank 2 at 76: the chain, explained from the logs (exit 1)."""
    r = postmortem([NVBUG_LOG], tmp_path / "r")
    assert r.exit_status == 1
    assert r.opening.startswith("The logs show an entry-assert on rank 2 at iteration 76")
    assert "at iteration 75 rank 0 offered batch 0 while rank 2 was busy" in r.opening
    v = r.logs_verdict
    assert v.chain.skip_iter == 75 and v.chain.zero_ranks == (0,) and v.chain.crash_rank == 2
    assert v.facts.overlap is True and v.facts.line_formats == ("V4",)
    assert ("disaggregated, pp_size 1: fix-16279 (only if the model is DeepSeek-V4), "
            "tolerant-17278 (only if the model is DeepSeek-V4), sched-aware-16921") in r.next_step
    assert "record the next run" in r.next_step
    md = r.report_md.read_text()
    assert "### The run as the logs show it" in md
    assert "| 75 | 0 | 1, 2, 3, 4, 5, 6, 7 |" in md
    assert "rank 0 (3x)" in md
    f = json.loads(r.findings_json.read_text())
    assert f["logs_only_verdict"]["chain"]["skip_iter"] == 75


def test_v5_lines_reconstruct_forwarded_dummies(tmp_path):
    """Simulated NVBug run printing V5 lines: the dummies forwarded right after each skip are in
    the per-iteration table, and a V5 build can only be the newest version."""
    from forensics.simulate import simulate
    res = simulate("nvbug-6438685", out_dir=tmp_path / "sim", log_format="V5", write=("log",))
    r = postmortem([res.files["log"]], tmp_path / "r")
    v = r.logs_verdict
    assert v.facts.line_formats == ("V5",)
    # The newest version warns instead of asserting: nothing in the catalogue asserts in a V5 build.
    assert v.policies == () and r.exit_status == 3
    md = r.report_md.read_text()
    # The replay of this run under prefix-2026 leaks dummies on ranks 3..7 through the skip of
    # iteration 19 (test_report_text): the V5 tokens show those ranks forwarding them at 20.
    assert "| 19 | 0 | 1, 2, 3, 4, 5, 6, 7 | 3, 4, 5, 6, 7 |" in md
    assert "| 75 | 0 | 1, 2, 3, 4, 5, 6, 7 | none |" in md   # the crash stops the run at 76
