"""Ingest memory and speed of request-state traces and stats JSONL, at two sizes.

Simulates a fleet (``forensics simulate --scenario fleet-1h``, 32 ranks) at two iteration
counts, then, for each size and each in a fresh subprocess: ingests the trace alone, ingests the
stats JSONL alone, and builds ``RunFrames.from_dataset`` from the trace dataset. Each prints
MB/s (or seconds) and peak RSS; the last lines give the peak-RSS ratio large/small (flat
memory: close to 1, while the input grows by the iteration ratio).

Peak RSS is ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` read by a small proxy process
whose only child is the measured worker, so the simulator and earlier steps never count.

Usage:
    python benchmarks/trace_ingest.py                      # 32 ranks x 5,000 and x 20,000 iterations
    python benchmarks/trace_ingest.py --iters 2000,8000 --ranks 16
    cd /tmp && PYTHONPATH=/path/to/other/checkout python /path/to/this/benchmarks/trace_ingest.py
        # measure another tree: run from outside any checkout, since ``python -c`` workers put
        # the working directory ahead of PYTHONPATH
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

# This script lives next to modules named like the package; keep its directory off the path.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

_PROXY = """
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if out.returncode:
    sys.stderr.write(out.stderr)
    sys.exit(out.returncode)
print(out.stdout.strip().splitlines()[-1], resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

_INGEST = """
import sys, time
import forensics.ingest as ingest
t = time.perf_counter()
ingest.ingest([sys.argv[1]], sys.argv[2])
print(time.perf_counter() - t)
"""

_FRAMES = """
import sys, time
import forensics
from replay.frames import RunFrames
t = time.perf_counter()
rf = RunFrames.from_dataset(forensics.load(sys.argv[1]))
print(time.perf_counter() - t)
"""


def measure(code: str, *args: str) -> tuple[float, float]:
    """(seconds reported by the worker, worker peak RSS in MiB), in a fresh process pair."""
    out = subprocess.run([sys.executable, "-c", _PROXY, sys.executable, "-c", code, *args],
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[-2]), int(out[-1]) / 1024  # ru_maxrss is KiB on Linux


def simulate(ranks: int, iters: int, out: str) -> None:
    subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                    "--ranks", str(ranks), "--iters", str(iters), "-o", out],
                   check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", default="5000,20000", help="two iteration counts, small,large")
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--workdir", help="keep the generated files here (default: a temp dir, removed)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.iters.split(",")]
    if len(sizes) != 2:
        ap.error("--iters takes two counts, e.g. 5000,20000")
    work = args.workdir or tempfile.mkdtemp(prefix="trace-ingest-bench-")
    peaks: dict[str, list[float]] = {"trace ingest": [], "stats ingest": [], "RunFrames.from_dataset": []}
    try:
        for iters in sizes:
            sim = os.path.join(work, f"sim-{iters}")
            t0 = time.perf_counter()
            simulate(args.ranks, iters, sim)
            print(f"--- {args.ranks} ranks x {iters} iterations (simulated in "
                  f"{time.perf_counter() - t0:.1f} s)")
            for kind, name in (("trace", "trace.jsonl"), ("stats", "stats.jsonl")):
                src = os.path.join(sim, name)
                mb = os.path.getsize(src) / 1e6
                secs, rss = measure(_INGEST, src, os.path.join(work, f"ds-{kind}-{iters}"))
                peaks[f"{kind} ingest"].append(rss)
                print(f"{kind} ingest: {mb:8.1f} MB in {secs:6.1f} s = {mb / secs:6.1f} MB/s, "
                      f"peak RSS {rss:7.0f} MiB")
            secs, rss = measure(_FRAMES, os.path.join(work, f"ds-trace-{iters}"))
            peaks["RunFrames.from_dataset"].append(rss)
            print(f"RunFrames.from_dataset: {secs:6.2f} s, peak RSS {rss:7.0f} MiB")
            shutil.rmtree(sim, ignore_errors=True)
        print(f"--- peak RSS ratio {sizes[1]} / {sizes[0]} iterations (input x{sizes[1] / sizes[0]:.1f}; "
              "flat = 1.0)")
        for name, (small, large) in peaks.items():
            print(f"{name}: {large / small:.2f}  ({small:.0f} -> {large:.0f} MiB)")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
