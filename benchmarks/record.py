"""Cost of the live recorder per rank-iteration, against the unwrapped executor in the same run.

Runs the stand-in executor's pad, schedule and can_queue steps (``tests/record/fixtures``) on one
rank holding ``--requests`` active requests, first unwrapped (baseline), then wrapped by the
recorder writing a real trace file, alternating rounds and keeping each side's best round. Time
is the thread's CPU time (user + system, so the trace writes count), which other jobs sharing the
machine do not inflate the way they inflate wall time.
The recorder's cost is the difference; the goal is under 20 µs with 64 requests. Two cases: the
worst case (one request id changes every iteration, so no frame can reuse the previous frame's
encoding) and the steady case (same requests and states, as in most decoding iterations).

    python benchmarks/record.py [--requests 64] [--iters 20000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/replay.py would shadow the replay package when a script here runs directly.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from forensics.record import bootstrap, capture, writer

STANDIN = (Path(__file__).resolve().parents[1] / "tests" / "record" / "fixtures" / "tensorrt_llm"
           / "_torch" / "pyexecutor" / "py_executor.py")
GOAL_US = 20.0


def _standin():
    spec = importlib.util.spec_from_file_location("adp_bench_standin", STANDIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _executor(mod, n_requests: int):
    ex = mod.PyExecutor(mod.Distributed(0, 1), {"tp_size": 1, "max_batch_size": n_requests,
                                                 "disaggregated": True})
    ex.active_requests = [mod.LlmRequest(1000 + i, mod.LlmRequestState.GENERATION_IN_PROGRESS)
                          for i in range(n_requests)]
    ex.expected_num_active_requests = n_requests
    return ex


def _round(ex, iters: int, churn: bool) -> float:
    pad, schedule, can_queue = (ex._pad_attention_dp_dummy_request, ex._schedule, ex._can_queue)
    reqs = ex.active_requests
    n = len(reqs)
    t0 = time.thread_time()
    for i in range(iters):
        if churn:  # a new request id every iteration: the encoder can never reuse a list
            reqs[i % n].py_request_id = 10_000 + i
        pad()
        batch, _, _ = schedule()
        can_queue(batch)
        ex.iter_counter += 1
    return (time.thread_time() - t0) / iters * 1e6


def _measure(mod, args, churn: bool) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        capture.configure(tmp)
        base_ex = _executor(mod, args.requests)
        base, rec = [], []
        for _ in range(args.rounds):
            base.append(_round(base_ex, args.iters, churn))
            bootstrap.patch_class(mod.PyExecutor)
            rec.append(_round(_executor(mod, args.requests), args.iters, churn))
            writer.flush_all()
            bootstrap.unpatch_class(mod.PyExecutor)
        files = sorted(Path(tmp).glob("rank-*.jsonl"))
        last = json.loads(files[-1].read_text().splitlines()[-1])
        assert len(last["requests"]) == args.requests
        size = sum(f.stat().st_size for f in files) // (args.rounds * args.iters)
    return min(base), min(rec), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64, help="active requests on the rank")
    ap.add_argument("--iters", type=int, default=20000, help="iterations per round")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    args = ap.parse_args()

    mod = _standin()
    print(f"{args.requests} active requests per rank; best of {args.rounds} rounds of "
          f"{args.iters} iterations (pad + schedule + can_queue)")
    print(f"{'case':<44}{'baseline µs':>12}{'recorded µs':>12}{'cost µs':>9}{'ratio':>7}")
    for churn, label in ((True, "worst case: request list changes every iter"),
                         (False, "steady: same requests and states")):
        b, r, size = _measure(mod, args, churn)
        print(f"{label:<44}{b:12.2f}{r:12.2f}{r - b:9.2f}{r / b:6.2f}x"
              f"   {'met' if r - b < GOAL_US else 'MISSED'} (goal < {GOAL_US:.0f} µs), "
              f"~{size} B/frame")


if __name__ == "__main__":
    main()
