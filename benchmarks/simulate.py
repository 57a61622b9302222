"""Simulator speed: the vectorised loop against a per-request Python baseline in the same run.

Times ``forensics.simulate`` on the ``fleet-1h`` workload (32 ranks) for ``--iters`` iterations:

1. core: the loop alone (``write=()``), i.e. workload + ``replay.step.decide``;
2. full: the loop writing log (rank 0), stats and trace, zstd-compressed;
3. baseline: a simplified state progression written the obvious way, one Python dict per request
   and a Python loop over ranks and requests each iteration (no decide, no writers, no stats).

Prints iterations per second, the ratio core/baseline, and the projected time of the whole
100k-iteration ``fleet-1h`` run (goal: minutes, not hours).

Usage: ``python benchmarks/simulate.py --iters 5000``  (default 5000)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/replay.py would shadow the ``replay`` package: drop this script's directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np

from forensics.simulate import SCENARIOS, simulate


def _baseline(iters: int, seed: int) -> float:
    """Per-request objects: arrivals, routing, KV wait, one token per iteration, overlap retire."""
    w = SCENARIOS["fleet-1h"].workload
    rng = np.random.default_rng(seed)
    R, cap = w.ranks, w.effective_cap
    ranks: list[list[dict]] = [[] for _ in range(R)]
    queue: list[dict] = []
    t = time.perf_counter()
    for k in range(iters):
        for _ in range(int(rng.poisson(w.arrival_rate))):
            queue.append({"state": 8, "left": int(w.output_len.draw(rng, 1)[0]),
                          "lat": int(w.kv_latency.draw(rng, 1)[0])})
        counts = [len(r) for r in ranks]
        while queue and min(counts) < cap:
            r = counts.index(min(counts))
            ranks[r].append(queue.pop(0))
            counts[r] += 1
        batches = []
        for reqs in ranks:
            for q in reqs:
                if q["state"] == 9:
                    q["lat"] -= 1
                    if q["lat"] <= 0:
                        q["state"] = 12
            sched = [q for q in reqs if 10 <= q["state"] < 14][:w.max_batch_size]
            batches.append(sched or [None])
        for reqs, sched in zip(ranks, batches):
            reqs[:] = [q for q in reqs if q["state"] != 14]
            for q in sched:
                if q is not None:
                    q["left"] -= 1
                    q["state"] = 14 if q["left"] <= 0 else 13
            for q in reqs:
                if q["state"] == 8:
                    q["state"] = 9
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=5000)
    args = ap.parse_args()
    n = args.iters
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        simulate("fleet-1h", iters=n, out_dir=tmp, write=())
        core = time.perf_counter() - t
        t = time.perf_counter()
        simulate("fleet-1h", iters=n, out_dir=tmp, log_ranks="0", compression="zst")
        full = time.perf_counter() - t
    base = _baseline(n, 0)
    total = SCENARIOS["fleet-1h"].iters
    print(f"fleet-1h, 32 ranks, {n} iterations")
    print(f"  core (workload + decide): {core:7.2f} s  {n / core:9.0f} it/s")
    print(f"  full (+ log, stats, trace, zst): {full:7.2f} s  {n / full:9.0f} it/s")
    print(f"  baseline (per-request Python dicts, no decisions): {base:7.2f} s")
    print(f"  ratio baseline/core: {base / core:.1f}x")
    print(f"  projected full fleet-1h ({total} iterations): {full * total / n / 60:.1f} min")


if __name__ == "__main__":
    main()
