"""Replay speed: the vectorised engine against the per-request reference loop, same run.

Builds a synthetic disaggregated run (default 32 ranks x 100,000 iterations, 4 requests per
frame: mostly GENERATION_IN_PROGRESS, some ranks waiting for KV, a few holding only
GENERATION_TO_COMPLETE so legacy builds skip and leak), replays it under every catalogue policy
with ``replay.run`` and, on a slice of the iterations, with ``replay.reference_loop`` (the
straightforward loop over per-request objects), and prints rank-iterations per second and the
ratio. The reference is measured on a slice and extrapolated (it scales linearly).

Usage:
    python benchmarks/replay.py                  # 32 ranks x 100k iterations
    python benchmarks/replay.py --iters 10000 --ref-iters 500
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# This script is named like the package it measures: keep its own directory off the path.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np
import pyarrow as pa

import replay
from forensics.dataset.names import state_names
from forensics.dataset.schema import FRAMES, REQUESTS, RUNS
from replay.reference_loop import run_reference

PER_FRAME = 4
LIFE = 16  # iterations a request lives: new_real jumps every LIFE iterations


def synthetic_tables(ranks: int, iters: int, seed: int = 0):
    """``runs``, ``frames`` and ``requests`` Arrow tables of one synthetic run."""
    rng = np.random.default_rng(seed)
    n = ranks * iters
    it = np.repeat(np.arange(iters, dtype=np.int64), ranks)
    rk = np.tile(np.arange(ranks, dtype=np.int32), iters)
    mode = rng.choice(4, size=n, p=[0.93, 0.04, 0.005, 0.025])  # normal, await KV, only TO_COMPLETE, mixed
    states = np.full((n, PER_FRAME), 13, np.int16)
    states[mode == 1] = 8
    states[mode == 2] = 14
    mixed = mode == 3
    states[mixed, :2] = 14
    states = states.ravel()
    rid = ((it // LIFE) * ranks * PER_FRAME + rk * PER_FRAME)[:, None] + np.arange(PER_FRAME)
    runs = pa.table({"run": ["bench"], "source": ["synthetic"], "line": [1], "tp_size": [ranks],
                     "pp_size": [1], "max_batch_size": [8], "max_num_active_requests": [8],
                     "disaggregated": [True], "overlap_scheduler": [True], "encoder_decoder": [False],
                     "build": ["synthetic"], "record_json": ["{}"]}, schema=RUNS)
    null_i = pa.nulls(n, pa.int64())
    null_b = pa.nulls(n, pa.bool_())
    frames = pa.table({"run": pa.array(np.full(n, "bench", object)), "source": pa.array(np.full(n, "synthetic", object)),
                       "line": np.arange(2, n + 2, dtype=np.int64), "iter": it, "rank": rk,
                       "num_requests": np.full(n, PER_FRAME, np.int32), "num_dummies": np.zeros(n, np.int32),
                       "expected": null_i, "padded": null_b, "scheduled": null_i, "can_queue": null_b,
                       "alloc_ok": null_b, "postpadded": null_b, "kv_precheck_ok": null_b},
                      schema=FRAMES)
    m = n * PER_FRAME
    requests = pa.table({"run": pa.DictionaryArray.from_arrays(np.zeros(m, np.int32), ["bench"]).cast(pa.string()),
                         "iter": np.repeat(it, PER_FRAME), "rank": np.repeat(rk, PER_FRAME),
                         "pos": np.tile(np.arange(PER_FRAME, dtype=np.int32), n),
                         "request_id": rid.ravel(), "state": state_names(states),
                         "state_value": states,
                         "dummy": np.zeros(m, bool)}, schema=REQUESTS)
    return runs, frames, requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--iters", type=int, default=100_000)
    ap.add_argument("--ref-iters", type=int, default=1_000,
                    help="iterations the reference loop replays (extrapolated)")
    ap.add_argument("--policy", action="append", help="policies (default: the whole catalogue)")
    args = ap.parse_args()
    names = args.policy or replay.policy_names()

    t0 = time.perf_counter()
    runs, frames_t, requests_t = synthetic_tables(args.ranks, args.iters)
    t1 = time.perf_counter()
    frames = replay.RunFrames.from_tables(runs, frames_t, requests_t)
    t2 = time.perf_counter()
    ref_n = min(args.ref_iters, args.iters)
    small = replay.RunFrames.from_tables(*synthetic_tables(args.ranks, ref_n))
    print(f"run: {args.ranks} ranks x {args.iters} iterations, {requests_t.num_rows} requests "
          f"(tables built in {t1 - t0:.1f} s, RunFrames precompute {t2 - t1:.1f} s, shared by all policies)")
    print(f"reference loop measured on the first {ref_n} iterations and extrapolated (linear)")
    print(f"{'policy':<20}{'engine ri/s':>14}{'reference ri/s':>16}{'ratio':>9}"
          f"{'engine+prep ratio':>19}{'leaks':>8}{'crash':>8}")
    total_e = total_r = 0.0
    for name in names:
        s = time.perf_counter()
        res = replay.run(frames, policy=name)
        e = time.perf_counter() - s
        rows = len(res.decisions)
        s = time.perf_counter()
        ref = run_reference(small, policy=name)
        r = time.perf_counter() - s
        ref_rows = len(ref.decisions)
        e_rate = rows / e
        r_rate = ref_rows / r
        prep_share = (t2 - t1) / len(names)
        total_e += e
        total_r += r * (rows / max(ref_rows, 1))
        print(f"{name:<20}{e_rate:>14,.0f}{r_rate:>16,.0f}{e_rate / r_rate:>8.0f}x"
              f"{(rows / (e + prep_share)) / r_rate:>18.0f}x{len(res.leaks):>8}"
              f"{'yes' if res.crash else 'no':>8}")
    print(f"all policies: engine {total_e:.2f} s (+{t2 - t1:.1f} s shared precompute), reference "
          f"(extrapolated) {total_r:.0f} s: {total_r / total_e:.0f}x, "
          f"{total_r / (total_e + t2 - t1):.0f}x with the precompute")


if __name__ == "__main__":
    main()
