"""A campaign of 42 simulated fleet runs through ``forensics fleet``: serial against a 2-worker
``LocalCluster`` (``--workers 2``), with identical results.

The 42 configurations are the ``fleet-1h`` workload (generation servers, overlap scheduler,
KV-transfer bursts, recorded under ``fix-16161``) at 8, 12, 16, 20, 24, 28 and 32 ranks x
5,000, 7,500, 10,000, 12,500, 15,000 and 20,000 iterations (``--scale`` multiplies the
iterations), the arrival rate scaled with the ranks so that every fleet is as busy per rank;
seed = configuration number. Each run directory holds what a fleet leaves behind: the executor
log (rank 0 printing iteration lines), the IterationStats JSON Lines and the request-state
trace, zstd-compressed (``--compress none`` for plain files). Generating them is not measured.

Measured, each as a whole process started as a user starts it (interpreter start-up included),
in paired interleaved rounds (serial, default, cluster, serial, ...):

- serial: ``forensics fleet RUN... --json`` pinned to one CPU (``sched_setaffinity`` before
  ``exec``, as ``taskset -c N`` would): one run after the other, one thing at a time (the
  baseline the goal names);
- default: ``forensics fleet RUN... --json`` unpinned: what the command does without the extra.
  It is no longer serial: a run's files of at least 64 MB of text are read on two threads
  (``forensics.readers.parallel.readers``), so it already uses part of the second core;
- cluster: ``forensics fleet RUN... --json --workers 2`` (cluster start-up and shut-down
  included).

Printed: medians of wall seconds and of CPU seconds (user + system of the process and every
descendant it waited for: the worker processes of the cluster count), the serial / cluster and
default / cluster ratios, peak RSS of the serial process and of each worker process (sampled every 50 ms with
psutil by the measuring process), and whether the ``--json`` outputs are identical.

On a shared machine wall time depends on what else runs: the CPU-seconds ratio (the work the
cluster adds, about 1.0 when it adds none) is the robust figure; the speed-up in wall time
needs a quiet machine with at least as many free cores as workers.

Usage (from the repo root; ``nice`` on a shared machine):
    nice python benchmarks/campaign.py                     # 42 runs, full size: ~15 min
    nice python benchmarks/campaign.py --scale 0.1         # iterations / 10: ~2 min
    python benchmarks/campaign.py --configs 4 --scale 0.01 # a smoke run
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

# This script lives next to modules named like the package (benchmarks/replay.py); keep its
# directory off the path.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

RANKS = (8, 12, 16, 20, 24, 28, 32)
ITERS = (5000, 7500, 10000, 12500, 15000, 20000)

# Runs a command, samples the RSS of it and of each of its descendants, and prints one JSON
# line: wall, CPU of the waited-for process tree, peak RSS per process (MiB).
_PROXY = r"""
import json, os, resource, subprocess, sys, threading, time
import psutil
out_path = sys.argv[1]
t = time.perf_counter()
with open(out_path, "w") as out:
    proc = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, text=True)
    peaks, stop = {}, threading.Event()
    def sample():
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    name = "main" if p.pid == proc.pid else " ".join(p.cmdline()[-2:])[-60:] + f" [{p.pid}]"
                    peaks[name] = max(peaks.get(name, 0), rss)
                except psutil.Error:
                    pass
            stop.wait(0.05)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    err = proc.stderr.read()
    rc = proc.wait()
    stop.set()
    th.join()
wall = time.perf_counter() - t
if rc not in (0, 1):   # fleet: 0 no run leaks or crashes, 1 one does
    sys.stderr.write(err[-4000:])
    sys.exit(rc)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                  "peaks": {k: v / 2**20 for k, v in peaks.items()}}))
"""


def configurations(n: int, scale: float) -> list[dict]:
    """The first ``n`` of the 42 (ranks x iterations) configurations."""
    grid = list(itertools.product(RANKS, ITERS))[:n]
    return [{"n": i, "ranks": r, "iters": max(10, int(round(it * scale)))} for i, (r, it) in enumerate(grid)]


def simulate_one(cfg: dict, out_dir: str, compress: str | None) -> str:
    from forensics.fleet_table import grid_workload
    from forensics.simulate import get_scenario, simulate

    sc = get_scenario("fleet-1h")
    workload = grid_workload(sc.workload, {"ranks": cfg["ranks"]},
                             sc.workload.arrival_rate / sc.workload.ranks)
    part = out_dir + ".part"   # renamed when complete: an interrupted run is simulated again
    shutil.rmtree(part, ignore_errors=True)
    simulate(workload, out_dir=part, policy=sc.policy, iters=cfg["iters"], seed=cfg["n"],
             log_ranks="0", compression=compress)
    os.replace(part, out_dir)
    return out_dir


def measure(cmd: list[str], cwd: str) -> tuple[dict, str]:
    """(the proxy's figures, the command's stdout) for one fresh process tree."""
    out = os.path.join(cwd, "stdout.json")
    proc = subprocess.run([sys.executable, "-c", _PROXY, out, *cmd], capture_output=True, text=True,
                          cwd=cwd)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd[:6])} ...\n{proc.stderr[-4000:]}")
    with open(out) as f:
        return json.loads(proc.stdout.strip().splitlines()[-1]), f.read()


def _pinned(cmd: list[str]) -> list[str]:
    """``cmd`` run on one CPU: the launcher pins itself, then becomes ``cmd`` (the affinity is
    inherited, so the fleet sees one usable core and reads and replays serially)."""
    cpu = min(os.sched_getaffinity(0))
    pin = f"import os, sys; os.sched_setaffinity(0, {{{cpu}}}); os.execvp(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", pin, *cmd]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every run's iterations (default 1)")
    ap.add_argument("--configs", type=int, default=42, help="use the first N configurations (default 42)")
    ap.add_argument("--workers", type=int, default=2, help="cluster workers (default 2)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="paired rounds (default 1; 0: only simulate the runs into --workdir)")
    ap.add_argument("--sim-jobs", type=int, default=2, help="processes simulating the runs (default 2)")
    ap.add_argument("--policy", action="append", default=None,
                    help="replay only this policy (repeatable; default the whole catalogue)")
    ap.add_argument("--compress", choices=("zst", "none"), default="zst",
                    help="compress the simulated files (default zst, as fleet-1h's docs advise)")
    ap.add_argument("--workdir", help="keep the simulated runs here (reused when present)")
    args = ap.parse_args()
    work = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="campaign-bench-"))
    os.makedirs(work, exist_ok=True)
    cfgs = configurations(args.configs, args.scale)
    try:
        runs = [os.path.join(work, f"run-{c['n']:02d}-r{c['ranks']}-i{c['iters']}") for c in cfgs]
        compress = None if args.compress == "none" else args.compress
        todo = [(c, r, compress) for c, r in zip(cfgs, runs) if not os.path.isdir(r)]
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=max(1, args.sim_jobs)) as pool:
            if todo:
                list(pool.map(simulate_one, *zip(*todo)))
        size = sum(os.path.getsize(os.path.join(r, f)) for r in runs for f in os.listdir(r)) / 1e6
        frames = sum(c["ranks"] * c["iters"] for c in cfgs)
        print(f"--- {len(cfgs)} runs ({min(c['ranks'] for c in cfgs)}-{max(c['ranks'] for c in cfgs)} "
              f"ranks x {min(c['iters'] for c in cfgs)}-{max(c['iters'] for c in cfgs)} iterations, "
              f"{frames / 1e6:.1f} M frames, {size:.0f} MB of logs, stats and traces ({args.compress}); "
              "simulated in "
              f"{time.perf_counter() - t0:.0f} s), {os.cpu_count()} CPU(s), "
              f"load {os.getloadavg()[0]:.1f}")
        if args.rounds < 1:
            return
        base = [sys.executable, "-m", "forensics", "fleet", *runs, "--json"]
        for p in args.policy or []:
            base += ["--policy", p]
        cluster = f"{args.workers} workers"
        variants = {"serial": _pinned(base), "default": base,
                    cluster: base + ["--workers", str(args.workers)]}
        figures: dict[str, list[dict]] = {k: [] for k in variants}
        outputs: dict[str, set[str]] = {k: set() for k in variants}
        for rnd in range(args.rounds):
            for name, cmd in variants.items():
                fig, out = measure(cmd, work)
                figures[name].append(fig)
                outputs[name].add(out)
                print(f"round {rnd + 1} {name:>10s}: {fig['wall']:7.1f} s wall, {fig['cpu']:7.1f} s CPU",
                      flush=True)
        med = {k: (statistics.median(f["wall"] for f in v), statistics.median(f["cpu"] for f in v))
               for k, v in figures.items()}
        for name, (wall, cpu) in med.items():
            peaks = figures[name][-1]["peaks"]
            workers = sorted(v for k, v in peaks.items() if k != "main" and v > 60)
            mem = f"main {peaks.get('main', 0):.0f} MiB"
            if name == cluster:
                mem += ", per worker " + ", ".join(f"{v:.0f}" for v in workers[-args.workers:]) + " MiB"
            print(f"{name:>10s}: median {wall:7.1f} s wall, {cpu:7.1f} s CPU; peak RSS {mem}")
        (cw, cc) = med[cluster]
        for name, goal in (("serial", " (goal >= 1.6x on 2 free cores)"), ("default", "")):
            w, c = med[name]
            print(f"ratio {name} / {cluster}: {w / cw:.2f}x wall{goal}, CPU {cc / c:.2f}x of {name}")
        same = len(set().union(*outputs.values())) == 1
        print("results identical: " + ("yes" if same else "NO"))
        if not same:
            raise SystemExit(1)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
