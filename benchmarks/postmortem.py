"""End-to-end ``forensics postmortem`` on simulated fleet-hour runs: wall, CPU and peak RSS.

For each size (``RANKSxITERS``, default 32x20000, 32x100000 and 64x100000) the script simulates
``fleet-1h`` (rank 0 logging, zstd-compressed as the scenario's docs say) into the work
directory, then times whole processes, each a fresh interpreter with no cached dataset (ingest
included) and its bytecode compiled beforehand as an installed package has it (:func:`compiled`),
in paired interleaved rounds:

- ``streamed``: ``forensics postmortem DIR -o REPORT -q`` as a user runs it: the replay reads
  the run in iteration windows (``replay.frame_windows.FrameWindows``) and keeps decisions and ledgers
  in Parquet files, so memory should stay flat in the number of iterations;
- ``one window`` (the baseline): the same post-mortem with one window holding the whole run
  (``postmortem(..., window=10**9)``), which is what the straightforward in-memory code does:
  every frame of the run as arrays, every policy's decisions as a DataFrame. Skipped above
  ``--baseline-up-to`` frames (its memory grows with the run: 64x100000 would need ~8 GB);
- with ``--one-reader``, also the streamed post-mortem with ``--jobs 1`` (the input files read
  one after the other; the default reads a large run's files on two threads of one process);
- with ``--two-readers``, also the streamed post-mortem with ``--jobs 2`` (one process per input
  file, two at once: a second interpreter's memory);
- with ``--baseline-tree PATH``, also ``forensics postmortem`` of another checkout (for
  example the code before streaming), run with ``PYTHONPATH=PATH``.

- ``zstd -dc | wc -l`` (the floor): decompressing the run's compressed files and counting
  their lines, one pipeline (``zstd -dc FILES | wc -l``), what any reader of the inputs pays;
  the streamed post-mortem's wall and CPU are printed as multiples of it (the goal: wall within
  4x on 2 cores). With ``--floor-parts``, also ``zstd -dc FILES > /dev/null`` (on this machine
  most of the floor is the pipe, system time copying gigabytes into ``wc``, not ``zstd``) and
  the floor pinned to one CPU (``taskset -c 0``: the pipe is fastest with both ends on one CPU,
  and the unpinned floor swings between that and the slower placement, :func:`one_core_floor_command`).

The streamed post-mortem writes where its time went (``forensics postmortem --timings FILE``,
:mod:`replay.stage_clock`): the medians over the rounds are printed as a stage breakdown, the
pipeline's phases (ingest, replay, verdicts, figures, timeline, report: wall and the process's
CPU seconds) and the stages inside them on whatever thread ran them (JSON stats and trace
reading, log reading, dataset writing, frames, replay decisions, replay writing, ledger: busy
and CPU seconds summed over threads).

Medians over ``--rounds`` are printed per size, with the ratio of the baseline's to the
streamed run's peak RSS and CPU time, and the RSS of each size against the first size's (the
goal: flat in iterations). CPU seconds are more robust than wall seconds on a shared machine.
Each measured process is printed as it ends with the machine's steal time and the CPU time of
everything else meanwhile (``wholeprocess.host_times``); after the medians, the streamed run's
wall as a multiple of the floor's round by round, the floor's spread, and the multiple of the
fastest floor (the floor moves most with the host: see :func:`per_round`), and the ratios of
the quiet rounds alone (no more than ``wholeprocess.QUIET_STEAL`` seconds of steal during either
process of the round): the reading "on a quiet machine".

CPU is ``resource.getrusage(RUSAGE_CHILDREN)`` read by a small proxy process whose only child
is the measured worker (with the processes it starts: the ingest reads large inputs one file per
process), so the simulator never counts. Peak RSS is the largest sum of the RSS of that process
tree, sampled every 50 ms with psutil (never below the largest single process's
``ru_maxrss``); the largest single process is printed beside it. The generated files are
deleted after each size (a 64x100000 run is ~100 MB compressed, its dataset a few hundred MB),
unless ``--keep-inputs``: then each size is simulated once into ``--workdir`` (written to a
``.part`` directory renamed when complete) and reused by later runs of the script, so that
figures taken later on a quiet machine time the same inputs (``--rounds 0`` only simulates).

``--stats-reader`` also times the IterationStats reader against the per-object ``json.loads``
loop on the first size's ``stats.jsonl.zst`` (MB/s of decompressed JSON, and the ratio).

Usage (from the repo root or from ``benchmarks/``):
    python benchmarks/postmortem.py                                   # ~10 minutes on 2 cores
    python benchmarks/postmortem.py --sizes 8x2000 --rounds 3         # a quick look
    python benchmarks/postmortem.py --baseline-tree /path/to/old/checkout --workdir /tmp/pm
    nice python benchmarks/postmortem.py --keep-inputs --rounds 0 --workdir /work/bench/pm  # inputs only
    nice python benchmarks/postmortem.py --keep-inputs --workdir /work/bench/pm             # reuses them
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
# the helpers beside this script
from wholeprocess import (QUIET_STEAL, HostTimes, host_times, quiet_ratios,  # noqa: E402
                          ready_scanners, warm_bytecode)

# This script lives next to modules named like the package (benchmarks/replay.py); keep its
# directory off the path from here on.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

_PROXY = """
import resource, subprocess, sys, threading, time
import psutil
t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
peak, stop = [0], threading.Event()
def sample():   # RSS of the whole tree: the ingest's reader processes count together
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        return
    while not stop.is_set():
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            break
        peak[0] = max(peak[0], total)
        stop.wait(0.05)
th = threading.Thread(target=sample, daemon=True)
th.start()
out, err = proc.communicate()
stop.set()
th.join()
wall = time.perf_counter() - t
if proc.returncode not in (0, 1):   # postmortem: 0 clean, 1 leak or crash explained
    sys.stderr.write(out[-2000:] + err[-4000:])
    sys.exit(proc.returncode)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, ru.ru_utime + ru.ru_stime, max(peak[0] / 1024, ru.ru_maxrss), ru.ru_maxrss)
"""

_ONE_WINDOW = """
import sys
from forensics.pipeline import postmortem
postmortem([sys.argv[1]], sys.argv[2], window=10 ** 9)
"""


_OURS = """
import sys, time
from forensics.readers.stats_json import read_stats
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
from forensics.dataset.schema import STATS_READ as STATS
from forensics.readers.stats_json import stats_row
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


def floor_command(sim: str) -> list[str]:
    """``zstd -dc FILES | wc -l`` of the run's compressed files, as one shell pipeline."""
    return ["sh", "-c", 'zstd -qdc "$@" | wc -l', "sh", *_compressed(sim)]


def decompress_command(sim: str) -> list[str]:
    """The floor's decompression alone: ``zstd -dc FILES > /dev/null`` (no pipe, no count)."""
    return ["sh", "-c", 'zstd -qdc "$@" > /dev/null', "sh", *_compressed(sim)]


def one_core_floor_command(sim: str) -> list[str] | None:
    """The floor with both ends of its pipe on one CPU (``taskset -c 0``), or None without
    ``taskset``: measured here, the pipeline is fastest so (2.6-3.1 s at 32x100k against
    4.7-8.9 s with ``zstd`` and ``wc`` on different CPUs), and an unpinned floor is fast in the
    rounds where the scheduler happens to place it so."""
    if shutil.which("taskset") is None:
        return None
    return ["taskset", "-c", "0", *floor_command(sim)]


def _compressed(sim: str) -> list[str]:
    return sorted(os.path.join(sim, n) for n in os.listdir(sim) if n.endswith(".zst"))


def print_breakdown(timings: list[dict]) -> None:
    """The medians of ``--timings`` files: phases (wall, CPU) and stages (busy, CPU)."""
    if not timings:
        return
    for kind, cols in (("phases", ("wall", "cpu")), ("stages", ("busy", "cpu"))):
        names = list(dict.fromkeys(k for t in timings for k in t.get(kind, {})))
        med = {k: [statistics.median(t[kind].get(k, {}).get(c, 0.0) for t in timings)
                   for c in cols] for k in names}
        total = [sum(v[i] for v in med.values()) for i in range(len(cols))]
        head = "  ".join(f"{c:>7s}" for c in cols)
        print(f"  {kind} (median of {len(timings)}): {'':14s}{head}", flush=True)
        for k, v in med.items():
            share = f"{100 * v[1] / total[1]:5.1f} % of CPU" if total[1] else ""
            print(f"    {k:30s}" + "  ".join(f"{x:7.1f}" for x in v) + f"   {share}",
                  flush=True)
        print(f"    {'(sum)':30s}" + "  ".join(f"{x:7.1f}" for x in total), flush=True)


#: Fields of one measurement (:func:`measure`), in this order.
FIELDS = ("wall", "cpu", "rss", "largest", "steal", "others")
#: The variants that are the floor or a part of it (no findings.json, no timings).
FLOORS = FLOOR, DECOMPRESS, ONE_CPU = "zstd -dc | wc -l", "zstd -dc > null", "floor, one CPU"


def measure(cmd: list[str], cwd: str, env: dict | None = None) -> tuple[float, ...]:
    """One fresh worker process: (wall seconds, CPU seconds, peak RSS of the process tree, of
    its largest process (MiB), the machine's steal seconds meanwhile, and the CPU seconds of
    everything else on the machine meanwhile: the timing proxy's own, ~0.1 s, and any
    neighbour's). The last two are 0 where ``/proc/stat`` cannot be read."""
    before = host_times()
    # cwd: the work dir, so that benchmarks/replay.py never shadows the package in a worker
    proc = subprocess.run([sys.executable, "-c", _PROXY, *cmd], capture_output=True, text=True,
                          cwd=cwd, env=env)
    after = host_times()
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    wall, cpu, rss, largest = (float(x) for x in proc.stdout.split())
    host = after - before if after is not None and before is not None else HostTimes(0.0, 0.0)
    return (wall, cpu, rss / 1024, largest / 1024,   # KiB on Linux
            max(host.steal, 0.0), max(host.busy - cpu, 0.0))


def compiled(env: dict, cwd: str) -> dict:
    """``env`` with the bytecode of the ``forensics`` and ``replay`` packages it imports
    compiled into a cache (``wholeprocess.warm_bytecode``; one cache for every checkout, kept
    apart by their paths), as an installed package has it: this machine sets
    ``PYTHONDONTWRITEBYTECODE``, and a checkout would be compiled anew in every timed process
    (~0.1 s CPU a user never pays, measured)."""
    env = warm_bytecode(env, os.path.join(cwd, "pycache"))
    subprocess.run([sys.executable, "-c", "import compileall, os, forensics, replay\n"
                    "for m in (forensics, replay):\n"
                    "    compileall.compile_dir(os.path.dirname(m.__file__), quiet=1)"],
                   env=env, cwd=cwd, check=True)
    # the cache stands in for every package's __pycache__ (pandas', pyarrow's, ...): one
    # untimed post-mortem of a tiny run fills it with what a post-mortem imports
    tiny, out = os.path.join(cwd, "warm-up"), os.path.join(cwd, "warm-up-report")
    if not os.path.isdir(tiny):
        subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                        "--ranks", "4", "--iters", "50", "--log-ranks", "0", "--compress", "zst",
                        "-o", tiny], env=env, cwd=cwd, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "forensics", "postmortem", tiny, "-o", out, "-q"],
                   env=env, cwd=cwd, capture_output=True)
    shutil.rmtree(out, ignore_errors=True)
    return env


def round_ratios(ours: list[tuple[float, ...]], floor: list[tuple[float, ...]]) -> list[float]:
    """Our wall over the floor's, round by round (measurements as :func:`measure` gives them)."""
    return [o[0] / f[0] for o, f in zip(ours, floor)]


def per_round(runs: dict[str, list[tuple[float, ...]]], floor: str) -> None:
    """The streamed post-mortem's wall as a multiple of the floor's in the same round, the
    floor's spread, and the rounds of a quiet machine: the floor (a pipe moving gigabytes)
    swings with the host far more than the post-mortem does, so a ratio is only as good as the
    floor beside it."""
    ratios = round_ratios(runs["streamed"], runs[floor])
    walls = sorted(f[0] for f in runs[floor])
    print(f"  per round, streamed / floor wall: {' '.join(f'{r:.2f}x' for r in ratios)} "
          f"(median {statistics.median(ratios):.2f}x); floor wall {walls[0]:.1f}-{walls[-1]:.1f} s,"
          f" streamed / fastest floor {statistics.median(s[0] for s in runs['streamed']) / walls[0]:.2f}x",
          flush=True)
    steal = FIELDS.index("steal")
    quiet = quiet_ratios([(s[0], s[steal]) for s in runs["streamed"]],
                         [(f[0], f[steal]) for f in runs[floor]])
    print(f"  quiet rounds (steal <= {QUIET_STEAL} s in both): {len(quiet)} of {len(ratios)}"
          + (f", streamed / floor wall {' '.join(f'{r:.2f}x' for r in quiet)} "
             f"(median {statistics.median(quiet):.2f}x)" if quiet else ""), flush=True)


def decompressed_mb(path: str) -> float:
    import zstandard
    n = 0
    with open(path, "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        while chunk := reader.read(1 << 24):
            n += len(chunk)
    return n / 1e6


def parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        ranks, iters = part.lower().split("x")
        out.append((int(ranks), int(iters)))
    return out


def stats_reader(stats: str, work: str) -> None:
    """The IterationStats reader (``forensics.readers.stats_json.read_stats``) against the
    straightforward per-object loop, MB/s of decompressed JSON, in fresh processes."""
    mb = decompressed_mb(stats)
    speeds = {}
    for name, code in (("ours", _OURS), ("per-object json.loads", _NAIVE)):
        proc = subprocess.run([sys.executable, "-c", code, stats], capture_output=True, text=True,
                              cwd=work, check=True)
        secs, rows = proc.stdout.split()
        speeds[name] = mb / float(secs)
        print(f"  stats reader, {name:22s}: {mb:8.1f} MB ({rows} rows) in {float(secs):6.1f} s "
              f"= {speeds[name]:6.1f} MB/s", flush=True)
    print(f"  stats reader speed-up: {speeds['ours'] / speeds['per-object json.loads']:.1f}x "
          "the per-object loop", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32x20000,32x100000,64x100000",
                    help="comma-separated RANKSxITERS (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="paired rounds per size (0: only simulate, with --keep-inputs)")
    ap.add_argument("--baseline-up-to", type=int, default=3_200_000,
                    help="run the one-window baseline only up to this many frames (ranks x iters)")
    ap.add_argument("--one-reader", action="store_true",
                    help="also time the streamed post-mortem reading its files one after the "
                         "other (--jobs 1)")
    ap.add_argument("--two-readers", action="store_true",
                    help="also time the streamed post-mortem reading two input files at once "
                         "(--jobs 2: more memory, less wall time)")
    ap.add_argument("--baseline-tree", help="also time `forensics postmortem` of this checkout")
    ap.add_argument("--floor-parts", action="store_true",
                    help="also time the floor's decompression alone (zstd -dc FILES > /dev/null: "
                         "what of the floor is zstd and what is the pipe into wc) and the floor "
                         "pinned to one CPU (taskset -c 0: its fastest placement)")
    ap.add_argument("--stats-reader", action="store_true",
                    help="also time the IterationStats reader against the per-object json.loads loop "
                         "on the first size's stats.jsonl.zst")
    ap.add_argument("--workdir", help="generate files here (default: a temp dir); removed after")
    ap.add_argument("--keep-inputs", action="store_true",
                    help="keep the simulated runs in --workdir and reuse those already there")
    args = ap.parse_args()
    if args.keep_inputs and not args.workdir:
        ap.error("--keep-inputs needs --workdir")
    work = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="postmortem-bench-"))
    os.makedirs(work, exist_ok=True)
    sizes = parse_sizes(args.sizes)
    first_rss: float | None = None
    try:
        # bytecode compiled once for every size (the cache holds whatever both trees import)
        ours = theirs = None
        if args.rounds >= 1:
            ours = compiled(dict(os.environ), work)
            # the compiled scanners loaded once, compiled here on a cold cache (else the first
            # rounds would read with the reference reader while they build in the background)
            ready_scanners(ours)
            if args.baseline_tree:
                theirs = compiled(dict(os.environ, PYTHONPATH=os.path.abspath(args.baseline_tree)),
                                  work)
        for ranks, iters in sizes:
            sim, report = os.path.join(work, f"fleet-{ranks}x{iters}"), os.path.join(work, "report")
            t0 = time.perf_counter()
            reused = args.keep_inputs and os.path.isdir(sim)
            if not reused:
                part = sim + ".part"   # renamed when complete: an interrupted size is simulated again
                shutil.rmtree(part, ignore_errors=True)
                subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                                "--ranks", str(ranks), "--iters", str(iters), "--log-ranks", "0",
                                "--compress", "zst", "-o", part], check=True, capture_output=True,
                               cwd=work)
                os.replace(part, sim)
            mb = sum(os.path.getsize(os.path.join(sim, n)) for n in os.listdir(sim)) / 1e6
            how = "reused" if reused else f"simulated in {time.perf_counter() - t0:.0f} s"
            print(f"--- fleet-1h, {ranks} ranks x {iters} iterations ({mb:.0f} MB compressed, "
                  f"{how}), load {os.getloadavg()[0]:.1f}", flush=True)
            if args.rounds < 1:
                continue
            timings_file = os.path.join(work, "timings.json")
            variants = {FLOOR: (floor_command(sim), None),
                        "streamed": ([sys.executable, "-m", "forensics", "postmortem", sim, "-o",
                                      report, "-q", "--timings", timings_file], ours)}
            if args.floor_parts:
                variants[DECOMPRESS] = (decompress_command(sim), None)
                pinned = one_core_floor_command(sim)
                if pinned is not None:
                    variants[ONE_CPU] = (pinned, None)
            if args.one_reader:
                variants["one reader"] = (variants["streamed"][0][:-2] + ["--jobs", "1"], ours)
            if args.two_readers:
                variants["two readers"] = (variants["streamed"][0][:-2] + ["--jobs", "2"], ours)
            if ranks * iters <= args.baseline_up_to:
                variants["one window"] = ([sys.executable, "-c", _ONE_WINDOW, sim, report], ours)
            if args.baseline_tree:
                variants["baseline tree"] = ([sys.executable, "-m", "forensics", "postmortem", sim,
                                              "-o", report, "-q"], theirs)
            runs: dict[str, list[tuple[float, ...]]] = {k: [] for k in variants}
            timings: list[dict] = []
            for r in range(args.rounds):            # interleaved: each round runs every variant
                for name, (cmd, env) in variants.items():
                    shutil.rmtree(report, ignore_errors=True)   # no cached dataset
                    runs[name].append(measure(cmd, work, env))
                    wall, cpu, _, _, steal, others = runs[name][-1]
                    print(f"    round {r + 1}: {name:16s} wall {wall:6.1f} s  CPU {cpu:6.1f} s  "
                          f"steal {steal:5.2f} s  others {others:5.2f} s", flush=True)
                    if name in FLOORS:
                        continue
                    if name == "streamed":
                        with open(timings_file) as f:
                            timings.append(json.load(f))
                        os.remove(timings_file)
                    # exit 1 also means "python: No module named forensics": a real run leaves
                    # its findings behind
                    if not os.path.exists(os.path.join(report, "findings.json")):
                        raise SystemExit(f"failed: {' '.join(cmd)} wrote no {report}/findings.json")
            med = {k: tuple(statistics.median(x[i] for x in v) for i in range(len(FIELDS)))
                   for k, v in runs.items()}
            for name, (wall, cpu, rss, largest, steal, others) in med.items():
                print(f"  {name:14s} wall {wall:7.1f} s   CPU {cpu:7.1f} s   peak RSS {rss:7.0f} MiB "
                      f"(largest process {largest:5.0f} MiB)   steal {steal:5.2f} s   others "
                      f"{others:5.2f} s   load {os.getloadavg()[0]:.1f}", flush=True)
            s_wall, s_cpu, s_rss = med["streamed"][:3]
            f_wall, f_cpu = med[FLOOR][:2]
            print(f"  streamed / zstd -dc | wc -l: wall {s_wall / f_wall:.2f}x (goal: 4x), "
                  f"CPU {s_cpu / f_cpu:.2f}x", flush=True)
            per_round(runs, FLOOR)
            print_breakdown(timings)
            for name in med:
                if name == DECOMPRESS:
                    print(f"  zstd -dc > null / zstd -dc | wc -l: wall {med[name][0] / f_wall:.2f}x, "
                          f"CPU {med[name][1] / f_cpu:.2f}x", flush=True)
                elif name == ONE_CPU:
                    each = " ".join(f"{r:.2f}x" for r in round_ratios(runs["streamed"], runs[name]))
                    print(f"  streamed / floor on one CPU: wall {s_wall / med[name][0]:.2f}x "
                          f"(per round {each})", flush=True)
                elif name not in ("streamed", FLOOR):
                    print(f"  {name} / streamed: peak RSS {med[name][2] / s_rss:.2f}x, "
                          f"CPU {med[name][1] / s_cpu:.2f}x", flush=True)
            if args.stats_reader and first_rss is None:
                stats_reader(os.path.join(sim, "stats.jsonl.zst"), work)
            if first_rss is None:
                first_rss = s_rss
            else:
                print(f"  streamed peak RSS vs {sizes[0][0]}x{sizes[0][1]}: "
                      f"{s_rss / first_rss:.2f}x", flush=True)
            if not args.keep_inputs:
                shutil.rmtree(sim, ignore_errors=True)
            shutil.rmtree(report, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
