"""Hand-made inputs for the report tests: a two-rank NVBug 6438685 trace and its crash log.

The trace (run ``hand``): tp_size 2, pp_size 1, max_batch_size 2, cap 2, disaggregated,
non-overlap loop, recorded by ``prefix-2026``. Frames (requests at pad entry)::

    iter  rank 0                                    rank 1
    0     10 TRANS_IN_PROGRESS(9), 11 GEN_INIT(8)   20 GENERATION_IN_PROGRESS(13)
    1     10 TRANS_IN_PROGRESS(9), 11 (9)           20 GENERATION_TO_COMPLETE(14)
    2     10 TRANS_COMPLETE(12),   11 (12)          20 GENERATION_TO_COMPLETE(14)

Worked by hand under ``prefix-2026`` (predicate: all but states 8/9; cap 2; assert):

- iter 0: active [2, 1]; every request is new, so expected = max(ceil(3/2), 0) = 2. Rank 0
  counts 0 schedulable -> dummy, batch 0 + 1 = 1; rank 1 batch 1. can_queue True; the dummy is
  the last element, removed by ``_update_request_states_tp``.
- iter 1: active [2, 1]; expected = max(ceil(3/2), max(2, 1)) = 2. Rank 0 pads again (batch 1);
  rank 1 counts request 20 (state 14) as schedulable, gets no dummy, but the scheduler window
  [10, 14) refuses it: batch 0. can_queue False on both ranks: the step is skipped, rank 0's
  dummy survives. Leak: rank 0, created 1, skipped 1, cause rank 1.
- iter 2: rank 0 holds 2 real + the leaked dummy = 3; expected = min(max(ceil(4/2), 3), cap 2)
  = 2; 3 > 2 -> AssertionError on rank 0 at iteration 2 (expected 2, active 3).

``legacy-2025``, ``mid-2025``, ``early-2026`` (same predicate, no cap): same leak, expected at
iter 2 is 3, no crash. ``fix-16161`` (window): rank 1 gets a dummy at iter 1, batch 1, no skip,
nothing leaks, nothing crashes. The run names no model: ``fix-16279`` is ``prefix-2026`` outside
its DeepSeek-V4 gate (crash) and ``fix-16161`` inside; ``tolerant-17278`` leaks outside (warns
at iter 2). ``sched-aware-16921`` and later (non-overlap, pp 1: the forward intent, any model):
at iter 1 no rank has schedulable work (states 9, 9 and 14), the all-reduced intent is NONE and
nobody is padded: the fleet skips with no dummy to leak (post-pad versions pad rank 1 after
scheduling and roll that dummy back); at iter 2 rank 1 is padded for rank 0's generation work.

The log (``rank0.log``): rank 0 prints iteration lines ``iter = 1`` and ``iter = 2`` (bodies 0
and 1, domain doc §8), then ``Error in event loop`` and the full assert traceback
(py_executor.py line 2150): the crash happened in body 2, so the log says rank 0, iteration 2.
"""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: ``../shared`` beside the repository (or beside the directory of its work trees).
SHARED = next((p for p in (REPO.parent / "shared", REPO.parent.parent / "shared") if p.is_dir()),
              REPO.parent / "shared")
SAMPLES = REPO / "traces" / "samples"

RUN_RECORD = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
              "max_batch_size": 2, "max_num_active_requests": 2, "disaggregated": True,
              "overlap_scheduler": False, "build": "prefix-2026", "run_id": "hand"}


def _frame(it, rank, *reqs):
    return {"kind": "frame", "iter": it, "rank": rank,
            "requests": [{"id": i, "state": s} for i, s in reqs]}


CRASH_FRAMES = [
    _frame(0, 0, (10, "DISAGG_GENERATION_TRANS_IN_PROGRESS"), (11, "DISAGG_GENERATION_INIT")),
    _frame(0, 1, (20, "GENERATION_IN_PROGRESS")),
    _frame(1, 0, (10, "DISAGG_GENERATION_TRANS_IN_PROGRESS"), (11, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
    _frame(1, 1, (20, "GENERATION_TO_COMPLETE")),
    _frame(2, 0, (10, "DISAGG_GENERATION_TRANS_COMPLETE"), (11, "DISAGG_GENERATION_TRANS_COMPLETE")),
    _frame(2, 1, (20, "GENERATION_TO_COMPLETE")),
]

#: Same run, but rank 1's request is still in progress at iter 1: nobody leaks under any policy
#: (rank 1 schedules 1, rank 0 pads, can_queue True every iteration).
CLEAN_FRAMES = [
    _frame(0, 0, (10, "DISAGG_GENERATION_TRANS_IN_PROGRESS")),
    _frame(0, 1, (20, "GENERATION_IN_PROGRESS")),
    _frame(1, 0, (10, "DISAGG_GENERATION_TRANS_COMPLETE")),
    _frame(1, 1, (20, "GENERATION_IN_PROGRESS")),
]

_ITER = ("[11/30/2026-10:00:0{t}] [TRT-LLM] [RANK {rank}] [I] iter = {it}, global_rank = {rank}, "
         "rank = {rank}, currank_total_requests = 2/3, host_step_time = 12.0ms, "
         "prev_device_step_time = 10.5ms, timestamp = 2026-11-30 10:00:0{t}, "
         "num_scheduled_requests: 1, states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
         "'num_generation_tokens': 1}}")
_ASSERT = """[11/30/2026-10:00:03] [TRT-LLM] [RANK {rank}] [E] Error in event loop: 
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 1690, in _executor_loop
    self._pad_attention_dp_dummy_request()
  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 2150, in _pad_attention_dp_dummy_request
    assert self.expected_num_active_requests >= len(self.active_requests)
AssertionError
"""


def crash_log(rank: int = 0) -> str:
    """Rank ``rank`` logs bodies 0 and 1, then asserts in body 2 (line 4 is the traceback)."""
    lines = [_ITER.format(t=1, rank=rank, it=1), _ITER.format(t=2, rank=rank, it=2)]
    return "\n".join(lines) + "\n" + _ASSERT.format(rank=rank)


def write_trace(path: Path, frames) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in [RUN_RECORD, *frames]) + "\n")
    return path


