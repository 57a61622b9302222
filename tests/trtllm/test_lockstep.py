"""The real-code path replays the fleet in lockstep (issue 12 item 3).

Collectives are computed over the replayed ranks, the entry check has the vectorised engine's
semantics, the era's cap is read from the router, the model gates come from the run record, and
the pad is found where it lives (``PyExecutor`` or a fork's ``IngestionTask``).
"""
from __future__ import annotations

import dataclasses

import pytest
from trtllm_checkouts import ERA_FIXTURES, RECORDS, place, place_era

from replay.config import RunConfig
from replay.walk import run
from replay.frames import RunFrames
from replay.policy import FrameView
from replay.reference_loop import run_reference
from replay.resolve import resolve_policy
from replay.states import RequestState as S
from replay.trtllm_checkout import WATCHED_FILES
from replay.trtllm_source import era_of

DISAGG = RunConfig(tp_size=2, disaggregated=True)


@pytest.fixture(scope="module")
def eras(tmp_path_factory):
    """One resolved policy per era fixture tree."""
    return {era: resolve_policy(f"trtllm:{place_era(tmp_path_factory.mktemp(era), era)}")
            for era in ERA_FIXTURES}


def view(states, expected, config=DISAGG, rank=0, new=0, alloc_ok=True):
    reqs = tuple((10 * rank + i + 1, int(s), False) for i, s in enumerate(states))
    return FrameView(iter=0, rank=rank, requests=reqs, expected=expected, config=config,
                     new_requests=new, alloc_ok=alloc_ok)


def _frame(it, rank, reqs):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs]}


#: Two ranks, disaggregated, non-overlap, cap 1 (see the test's docstring).
TWO_RANKS = [
    {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
     "max_batch_size": 1, "max_num_active_requests": 1, "disaggregated": True,
     "overlap_scheduler": False, "build": "newest", "model_arch": "deepseek_v4"},
    _frame(0, 0, [(1, "DISAGG_GENERATION_INIT")]),
    _frame(0, 1, [(2, "DISAGG_GENERATION_TRANS_IN_PROGRESS")]),
    _frame(1, 0, [(1, "DISAGG_GENERATION_TRANS_COMPLETE")]),
    _frame(1, 1, [(2, "DISAGG_GENERATION_TRANS_IN_PROGRESS")]),
    _frame(2, 0, [(1, "GENERATION_IN_PROGRESS"), (4, "CONTEXT_INIT")]),
    _frame(2, 1, [(2, "DISAGG_GENERATION_TRANS_IN_PROGRESS")]),
]


@pytest.mark.parametrize("era", ["0004396", "fork-ingestion-task"])
def test_forward_intent_is_all_reduced_over_the_replayed_ranks(eras, era):
    """Newest non-overlap code, two ranks, worked by hand.

    iter 0: rank 0 holds a request awaiting KV (8), rank 1 one in transfer (9): neither is
    schedulable, both local intents are NONE, the all-reduced (MAX) intent is NONE, so nobody
    pads (upstream's ``..._not_added_when_all_ranks_only_await_kv_transfer``). Both batches are
    0: can_queue False, and no dummy exists to leak. (A stand-in assuming a busy peer would pad
    both ranks here.) The cap is 1 and each rank holds 1, so the post-schedule pad (PR #17379,
    below the cap only) stays out of it.
    iter 1: rank 0's KV arrived (12, schedulable): its intent is GENERATION; rank 1's is NONE;
    MAX is GENERATION. Rank 0 counts 1 and does not pad; rank 1 counts 0 and pads a generation
    dummy (role from the intent). Batches 1 and 1: can_queue True; the dummy, last in rank 1's
    list, is removed by update_states_tp.
    iter 2: rank 0 holds 13 and a new CONTEXT_INIT request: intent CONTEXT (context wins over
    generation); rank 1 NONE; MAX is CONTEXT, so rank 1 pads a *context* dummy. expected =
    min(max(ceil(3 / 2), max(2 - 1, 1)), cap 1) = 1; rank 0 holds 2, one of them new this
    iteration, so 2 - 1 = 1 is not a surplus. Batches 1 (max_batch_size) and 1: can_queue True.
    No leak, no crash.
    """
    frames = RunFrames.from_records(TWO_RANKS)
    policy = eras[era]
    for result in (run(frames, None, policy), run_reference(frames, None, policy)):
        d = result.decisions.set_index(["iter", "rank"])
        assert d["padded"].tolist() == [False, False, False, True, False, True]
        assert [str(x) for x in d["pad_role"].tolist()] == [
            "nan", "nan", "nan", "generation", "nan", "context"]
        assert [bool(x) for x in d["can_queue"].tolist()] == [False, False, True, True, True, True]
        assert d.loc[(2, 0), "expected"] == 1 and not d.loc[(2, 0), "surplus"]
        assert result.leaks.empty and result.crash is None
    # One frame alone cannot see the peers: the single-frame hook assumes a busy one and pads.
    alone = policy.pad_hook(FrameView(iter=0, rank=0, requests=((1, 8, False),), expected=1,
                                      config=frames.config))
    assert alone.padded


def test_all_gather_and_two_collectives_are_answered_over_the_fleet(tmp_path):
    """A pad step that all-gathers the counts, then all-reduces (SUM) the number of empty ranks,
    pads only when some rank holds work and exactly one rank is empty. Ranks hold [13], [] and
    [13, 13]: counts [1, 0, 2], one empty rank, so rank 1 pads; with a second empty rank nobody
    pads. A per-rank stand-in would see [0, 0, 0] on rank 1 and never pad."""
    text = (ERA_TREE_2026 := (place_era(tmp_path / "src", "prefix-2026") /
                              "tensorrt_llm/_torch/pyexecutor/py_executor.py")).read_text()
    text = text.replace(
        "        if self.expected_num_active_requests > 0 and \\\n"
        "                self._count_schedulable_active_requests() == 0:\n",
        "        counts = self.dist.tp_allgather(len(self.active_requests))\n"
        "        empty = self.dist.tp_allreduce(int(not self.active_requests))\n"
        "        if max(counts) > 0 and empty == 1 and not self.active_requests:\n")
    ERA_TREE_2026.write_text(text)
    policy = resolve_policy(f"trtllm:{tmp_path / 'src'}")
    cfg = RunConfig(tp_size=3, disaggregated=True, max_batch_size=4)
    gen = S.GENERATION_IN_PROGRESS
    out = policy.pad_hook.fleet([view([gen], 2, cfg, 0), view([], 2, cfg, 1),
                                 view([gen, gen], 2, cfg, 2)])
    assert [o.padded for o in out] == [False, True, False]
    out = policy.pad_hook.fleet([view([gen], 1, cfg, 0), view([], 1, cfg, 1), view([], 1, cfg, 2)])
    assert [o.padded for o in out] == [False, False, False]
    assert not policy.pad_hook(view([], 2, cfg, 1)).padded


def test_entry_check_leaves_out_requests_routed_where_the_replay_has_no_room(eras):
    """Two GENERATION_TO_COMPLETE requests, expected 1. When one of them was routed to the rank
    this iteration, the replayed router would have sent it elsewhere (the rank is at expected):
    the engine compares 2 - 1 = 1 with 1, no surplus, and so must the real code (no assert).
    When both were already there, 2 > 1 asserts in the 2026 build."""
    prefix = eras["prefix-2026"].pad_hook
    two = [S.GENERATION_TO_COMPLETE] * 2
    assert prefix(view(two, 1, new=1)).crash is None
    assert prefix(view(two, 1, new=0)).crash.startswith("AssertionError")
    newest = eras["0004396"].pad_hook
    assert not newest(view(two, 1, new=1)).surplus_warning
    assert newest(view(two, 1, new=0)).surplus_warning


def test_context_server_sample_real_16279_code_does_not_assert(eras):
    """The context-server sample routes new requests to ranks the replayed policy keeps full:
    the vectorised fix-16161 replay finds no crash there, and the real #16279 code must agree
    (it used to be reported to assert at iteration 2, an artefact of counting those requests)."""
    from pathlib import Path
    import json
    path = Path(__file__).resolve().parents[2] / "traces/samples/context-server/trace.jsonl"
    frames = RunFrames.from_records([json.loads(line) for line in path.open()])
    dsv4 = dataclasses.replace(frames.config, model_arch="deepseek_v4")  # inside the gate
    real = run(frames, dsv4, eras["16279"])
    assert real.crash is None and real.leaks.empty
    assert run(frames, dsv4, "fix-16161").crash is None


def test_cap_is_read_from_the_router_not_inferred_from_the_count_method(eras):
    """The early-2026 tree has ``_count_schedulable_active_requests`` but its router computes
    expected without ``min(.., hard_cap)``: no cap. On the bisect trace (docstring of
    test_bisect) the pre-fix 2026 build asserts at iter 1 (rank 0 at cap 1 plus its leaked
    dummy); early-2026 computes expected = max(ceil(3 / 2), 2) = 2 and only leaks."""
    early, prefix = eras["early-2026"], eras["prefix-2026"]
    assert "era: early-2026" in early.notes and not early.cap
    assert "cap on expected: none found" in early.notes
    assert prefix.cap and "adp_router.py:route_requests" in prefix.notes
    frames = RunFrames.from_records(RECORDS)
    e, p = run(frames, None, early), run(frames, None, prefix)
    assert [(l.rank, l.iter_created) for l in e.leak_records] == [(0, 0)] and e.crash is None
    assert (p.crash.iter, p.crash.rank) == (1, 0)


def _with_model(model_arch, **changes):
    return dataclasses.replace(DISAGG, model_arch=model_arch, **changes)


def test_16279_gate_follows_the_run_records_model(eras):
    """PR #16279's window count applies to DeepSeek-V4 only: one TO_COMPLETE request, expected
    2, pads under deepseek_v4 (the window sees 0) and not under llama (the legacy count sees 1).
    With the model unknown the result says what was assumed."""
    hook = eras["16279"].pad_hook
    to_complete = [S.GENERATION_TO_COMPLETE]
    assert hook(view(to_complete, 2, _with_model("deepseek_v4"))).padded
    assert hook(view(to_complete, 2, _with_model("DeepseekV4ForCausalLM"))).padded
    assert not hook(view(to_complete, 2, _with_model("llama"))).padded
    assert not hook(view(to_complete, 2, _with_model("deepseek_v4", pp_size=2))).padded
    frames = RunFrames.from_records(RECORDS)
    unknown = run(frames, None, eras["16279"])
    # The result says what it had to guess: the gate assumed open, or (where the engine replays
    # a model-gated policy once per model) that the run does not name its model.
    assert any("assumed a DeepSeek-V4 model" in n or "does not name its model" in n
               for n in unknown.notes)
    cfg = dataclasses.replace(frames.config, model_arch="deepseek_v4")
    assert not any("assumed" in n for n in run(frames, cfg, eras["16279"]).notes)
    assert eras["16279"].rolls_back(_with_model("deepseek_v4"))
    assert not eras["16279"].rolls_back(_with_model("llama"))


@pytest.mark.parametrize("model, overlap, pp, counts_window", [
    ("kimi_k2", False, 1, True), ("kimi_k2", True, 1, False), ("deepseek_v4", True, 1, True),
    ("qwen3_5_moe", True, 1, True), ("deepseek_v4", False, 2, False)])
def test_16921_gate_follows_model_overlap_and_pp(eras, model, overlap, pp, counts_window):
    """Upstream's gate test (model, pp_size, overlap): the scheduler-aware count refuses
    DISAGG_CONTEXT_WAIT_SCHEDULER (7), the legacy count counts it. One such request, expected 1:
    a dummy exactly when the scheduler-aware count is on (overlap loop, so no forward intent;
    without overlap, rank 1 holds a GENERATION_IN_PROGRESS request so the intent is not NONE)."""
    cfg = _with_model(model, overlap_scheduler=overlap, pp_size=pp)
    out = eras["002f3cc"].pad_hook.fleet(
        [view([S.DISAGG_CONTEXT_WAIT_SCHEDULER], 1, cfg, 0),
         view([S.GENERATION_IN_PROGRESS], 1, cfg, 1)])
    assert out[0].padded is counts_window


def test_pad_found_in_a_loop_task_through_ctx(eras):
    """The fork moves the pad into ``executor_loop_tasks.IngestionTask`` reading
    ``self._ctx.{service,config,state}``; it replays like the newest tree, frame by frame."""
    fork, newest = eras["fork-ingestion-task"], eras["0004396"]
    assert "IngestionTask.pad_attention_dp_dummy_request" in fork.notes
    assert era_of(fork) == era_of(newest)
    frames = [view([S.GENERATION_TO_COMPLETE], 2), view([S.DISAGG_GENERATION_INIT], 1),
              view([S.GENERATION_TO_COMPLETE] * 2, 1), view([], 1, alloc_ok=False),
              view([S.GENERATION_IN_PROGRESS], 1)]
    for frame in frames:
        a, b = fork.pad_hook(frame), newest.pad_hook(frame)
        assert (a.padded, a.role, a.crash, a.surplus_warning, a.alloc_failed) == \
            (b.padded, b.role, b.crash, b.surplus_warning, b.alloc_failed)
    assert fork.rolls_back(DISAGG) and not fork.rolls_back(_with_model(None, pp_size=2))


def test_bisect_watches_the_loop_task_and_router_files(git_repo):
    from replay.bisect import watched_commits
    assert "tensorrt_llm/_torch/pyexecutor/executor_loop_tasks.py" in WATCHED_FILES
    assert "tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py" in WATCHED_FILES
    good = git_repo.commit_era("2026", "pre-fix")
    task = git_repo.root / "tensorrt_llm/_torch/pyexecutor/executor_loop_tasks.py"
    task.write_text("class IngestionTask:\n    pass\n")
    moved = git_repo.commit("move the pad into loop tasks")
    git_repo.commit_unrelated("README.md", "docs\n")
    router = git_repo.root / "tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py"
    router.write_text("def route():\n    return 1\n")
    capped = git_repo.commit("cap in the router")
    assert watched_commits(git_repo.root, good, capped) == [moved, capped]
    place(git_repo.root, "2026")
