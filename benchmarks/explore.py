"""Exploration speed: schedules, rank-iterations per second, the reduced space against the
unreduced one, for catalogue policies and for real code (an era fixture through the lockstep
stand-in), in one run.

Each measurement is a whole ``forensics explore --json`` process started under ``nice`` (start-up,
searches in worker processes, witness traces and their replay included); the rank-iterations per
second are the searches' (from the JSON, wall time of the searches), the wall time is the
process's, and the CPU time is the process's and its workers' (user + system): rank-iterations
per CPU-second do not move with the machine's load the way wall-clock rates do. The in-process
figure runs the same exploration in this process (one worker), timed by its CPU time. The
unreduced space is the same configuration explored with neither symmetry nor memo (in this
process, on a bound small enough for it to finish), against the reduced one on the same bound.
The machine's load is printed before and after: on a shared machine the figures move with it.

Usage:
    python benchmarks/explore.py                          # default bound, prefix-2026 and newest
    python benchmarks/explore.py --policies prefix-2026 --iterations 2 --small-iterations 2
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
sys.path.insert(0, str(ROOT / "tests" / "trtllm"))  # the era fixtures' layout helper

from replay.catalogue import get_policy  # noqa: E402
from replay.config import RunConfig  # noqa: E402
from replay.explore import DEFAULT_BOUND, Bound, ConfigSpace, explore  # noqa: E402
from replay.explore.search import Search  # noqa: E402


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def explore_process(args: list[str]) -> tuple[dict, float, float]:
    """One ``forensics explore --json`` run under nice: its JSON, its wall time and its CPU time
    (the process and its workers)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    t = time.perf_counter()
    cpu = _children_cpu()
    proc = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "forensics", "explore", *args,
                           "--json"], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    cpu = _children_cpu() - cpu
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout), wall, cpu


def in_process(policy: str, iterations: int, requests: int) -> tuple[int, float]:
    """The default space under ``policy`` explored in this process (one worker, no witness
    replay): rank-iterations and the CPU seconds they took."""
    bound = Bound(ranks=DEFAULT_BOUND.ranks, requests=requests, iterations=iterations)
    cpu = time.process_time()
    res = explore(policy, ConfigSpace(), bound, workers=1, check=False)
    return res.rank_iterations, time.process_time() - cpu


def space_sizes(policy: str, iterations: int, requests: int) -> tuple[int, int, float, float]:
    """Transitions decided with and without the reductions (2 ranks, one configuration)."""
    config = RunConfig(tp_size=1, disaggregated=True, overlap_scheduler=False, max_batch_size=2,
                       model_arch="llama")
    out = []
    for reduced in (True, False):
        search = Search((get_policy(policy),), config, requests, canonical=reduced, memo=reduced)
        t = time.perf_counter()
        for ranks in (1, 2):
            search.run(ranks, iterations, {})
        out += [search.stats.transitions, time.perf_counter() - t]
    return out[0], out[2], out[1], out[3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", default="prefix-2026,newest")
    ap.add_argument("--iterations", type=int, default=3, help="the bound's iterations (default 3)")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--era", default="000515e", help="era fixture for real code ('' to skip)")
    ap.add_argument("--era-iterations", type=int, default=2)
    ap.add_argument("--small-iterations", type=int, default=3,
                    help="iterations of the reduced-against-unreduced comparison")
    ap.add_argument("--small-requests", type=int, default=1,
                    help="requests per rank of that comparison (the unreduced space grows as "
                         "(moves per rank ** ranks) ** iterations)")
    a = ap.parse_args()
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    for policy in a.policies.split(","):
        doc, wall, cpu = explore_process(["--policy", policy, "--iterations", str(a.iterations),
                                          "--requests", str(a.requests)])
        res = doc["results"][0]
        rate = res["rank_iterations"] / res["seconds"] if res["seconds"] else 0.0
        print(f"{policy}: {res['schedules']:,} schedules, {res['configs']} configurations "
              f"({res['searches']} searches), {res['rank_iterations']:,} rank-iterations in "
              f"{res['seconds']:.1f} s of search = {rate:,.0f} rank-iterations/s; whole process "
              f"{wall:.1f} s wall = {res['rank_iterations'] / wall:,.0f} rank-iterations/s, "
              f"{cpu:.1f} s CPU = {res['rank_iterations'] / max(cpu, 1e-9):,.0f} per CPU-second; "
              f"{len(res['witnesses'])} mechanisms")
        done, cpu = in_process(policy, a.iterations, a.requests)
        print(f"{policy} in process (one worker): {done:,} rank-iterations in {cpu:.2f} s CPU = "
              f"{done / max(cpu, 1e-9):,.0f} per CPU-second")
    if a.era:
        from trtllm_checkouts import place_era
        with tempfile.TemporaryDirectory() as tmp:
            root = place_era(Path(tmp) / a.era, a.era)
            doc, wall, cpu = explore_process(["--policy", f"trtllm:{root}", "--iterations",
                                              str(a.era_iterations), "--requests", str(a.requests),
                                              "--mode", "disagg", "--max-batch-size", "1"])
            res = doc["results"][0]
            rate = res["rank_iterations"] / res["seconds"] if res["seconds"] else 0.0
            print(f"real code (era {a.era}, lockstep stand-in): {res['schedules']:,} schedules, "
                  f"{res['configs']} configurations, {rate:,.0f} rank-iterations/s; whole process "
                  f"{wall:.1f} s, {cpu:.1f} s CPU = "
                  f"{res['rank_iterations'] / max(cpu, 1e-9):,.0f} per CPU-second")
    reduced, unreduced, t_red, t_unred = space_sizes("prefix-2026", a.small_iterations,
                                                     a.small_requests)
    print(f"space (prefix-2026, 2 ranks, {a.small_requests} requests, {a.small_iterations} iterations, "
          f"one configuration): reduced {reduced:,} transitions in {t_red:.2f} s, unreduced "
          f"{unreduced:,} in {t_unred:.2f} s: {unreduced / max(reduced, 1):.1f}x smaller")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
