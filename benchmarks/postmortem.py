"""End-to-end ``forensics postmortem`` on a simulated fleet-hour run, and the stats reader's speed.

Simulates ``fleet-1h`` (32 ranks by default, rank 0 logging, zstd-compressed as the scenario's
docs say) at ``--iters`` iterations, then, each in a fresh subprocess:

1. ``forensics postmortem DIR -o REPORT -q`` as a user runs it (interpreter start-up included):
   wall seconds and peak RSS;
2. the IterationStats reader (``forensics.ingest.stats_json.read_stats``) over ``stats.jsonl.zst``;
3. the baseline: the straightforward per-object loop (``json.loads`` per line, ``stats_row``,
   a ``pyarrow`` table per 8192 rows) over the same file.

2 and 3 print MB/s of decompressed JSON and their ratio, measured in the same run.

Peak RSS is ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` read by a small proxy process
whose only child is the measured worker, so the simulator and earlier steps never count.

Usage (from the repo root or from ``benchmarks/``):
    python benchmarks/postmortem.py                    # 32 ranks x 20,000 iterations, a few minutes
    python benchmarks/postmortem.py --iters 100000     # the full fleet hour: ~3 GB trace, ~4 GB RSS
    python benchmarks/postmortem.py --iters 2000 --ranks 8 --workdir /tmp/pm-bench   # keep files
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

# This script lives next to modules named like the package (benchmarks/replay.py); keep its
# directory off the path.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

_PROXY = """
import resource, subprocess, sys, time
t = time.perf_counter()
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
if out.returncode not in (0, 1):   # postmortem: 0 clean, 1 leak or crash explained
    sys.stderr.write(out.stdout[-2000:] + out.stderr[-4000:])
    sys.exit(out.returncode)
last = (out.stdout.strip().splitlines() or [""])[-1]
print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, last)
"""

_OURS = """
import sys, time
from forensics.ingest.stats_json import read_stats
t = time.perf_counter()
rows = 0
for b in read_stats(sys.argv[1], "stats.jsonl.zst"):
    rows += b.stats.num_rows
print(time.perf_counter() - t, rows)
"""

_NAIVE = """
import io, json, sys, time
import pyarrow as pa
import zstandard
from forensics.dataset.schema import STATS
from forensics.ingest.stats_json import stats_row
t = time.perf_counter()
rows, tables, n = [], [], 0
with open(sys.argv[1], "rb") as raw:
    text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), encoding="utf-8")
    for lineno, line in enumerate(text, start=1):
        row = stats_row(json.loads(line))
        row.update(source="stats.jsonl.zst", line=lineno, line_end=lineno)
        rows.append(row)
        if len(rows) == 8192:
            tables.append(pa.Table.from_pylist(rows, schema=STATS))
            n += len(rows)
            rows = []
if rows:
    tables.append(pa.Table.from_pylist(rows, schema=STATS))
    n += len(rows)
print(time.perf_counter() - t, n)
"""


def measure(cmd: list[str], cwd: str) -> tuple[float, float, str]:
    """(wall seconds of the worker, its peak RSS in MiB, its last stdout line), fresh processes."""
    # cwd: the work dir, so that benchmarks/replay.py never shadows the package in a worker
    proc = subprocess.run([sys.executable, "-c", _PROXY, *cmd], capture_output=True, text=True,
                          cwd=cwd)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    # `postmortem -q` prints nothing on stdout: the last line may be empty.
    wall, rss, *last = proc.stdout.strip().split(" ", 2)
    return float(wall), int(rss) / 1024, (last or [""])[0]   # ru_maxrss is KiB on Linux


def decompressed_mb(path: str) -> float:
    import zstandard
    n = 0
    with open(path, "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        while chunk := reader.read(1 << 24):
            n += len(chunk)
    return n / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000,
                    help="iterations to simulate (100000 is the scenario's full hour)")
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--workdir", help="keep the generated files here (default: a temp dir, removed)")
    args = ap.parse_args()
    work = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="postmortem-bench-"))
    os.makedirs(work, exist_ok=True)
    sim, report = os.path.join(work, "fleet-1h"), os.path.join(work, "report")
    try:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                        "--ranks", str(args.ranks), "--iters", str(args.iters), "--log-ranks", "0",
                        "--compress", "zst", "-o", sim], check=True, capture_output=True, cwd=work)
        sizes = {n: os.path.getsize(os.path.join(sim, n)) / 1e6 for n in sorted(os.listdir(sim))}
        print(f"--- fleet-1h, {args.ranks} ranks x {args.iters} iterations (simulated in "
              f"{time.perf_counter() - t0:.1f} s): "
              + ", ".join(f"{n} {mb:.1f} MB" for n, mb in sizes.items()))

        shutil.rmtree(report, ignore_errors=True)   # no cached dataset: a first post-mortem
        wall, rss, _ = measure([sys.executable, "-m", "forensics", "postmortem", sim, "-o", report,
                                "-q"], work)
        print(f"forensics postmortem: {wall:7.1f} s wall, peak RSS {rss:7.0f} MiB")

        stats = os.path.join(sim, "stats.jsonl.zst")
        mb = decompressed_mb(stats)
        speeds = {}
        for name, code in (("ours", _OURS), ("per-object json.loads", _NAIVE)):
            _, rss, last = measure([sys.executable, "-c", code, stats], work)
            secs, rows = last.split()
            speeds[name] = mb / float(secs)
            print(f"stats reader, {name:22s}: {mb:8.1f} MB ({rows} rows) in {float(secs):6.1f} s "
                  f"= {speeds[name]:6.1f} MB/s, peak RSS {rss:6.0f} MiB")
        print(f"stats reader speed-up: {speeds['ours'] / speeds['per-object json.loads']:.1f}x "
              "the per-object loop")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
