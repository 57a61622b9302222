"""Start-up: ``forensics --help`` and the bundled-sample post-mortem, as a user runs them.

Whole processes in paired, interleaved rounds (``wholeprocess``: wall, CPU, peak RSS; medians):

- ``help``: ``python -m forensics --help`` (goal: under 0.3 s);
- ``postmortem``: ``python -m forensics postmortem traces/samples/nvbug-6438685 -o DIR`` after
  one untimed warm-up run (goal: under 1 s warm); it exits 1 ("a crash was found and
  explained"), which is its success here;
- floors measured in the same rounds: ``python -c pass`` (the interpreter) and
  ``python -c "import click"`` (the CLI framework every command needs);
- ``before-help`` / ``before-postmortem`` (with ``--before PATH``): the same commands from
  another checkout (e.g. ``git archive REV | tar -x -C PATH``);
- ``--first-ingest``: a user's first ``forensics ingest`` of a 64 MB log on a machine (an empty
  cache directory, ``FORENSICS_CACHE_DIR``: no compiled scanner yet) next to the second one
  (goal: cold at most 2x warm). The first starts the scanner's build in a background process
  and reads with the reference reader; the time until that build has saved the scanner is
  printed too (its CPU is not the ingest's: the builder is detached).

Warm means what a user's second run has: the page cache and compiled bytecode. An installed
package has its ``.pyc`` files; an environment with ``PYTHONDONTWRITEBYTECODE`` set would compile
every module of the checkout on every run (about 0.2 s CPU here), so the timed commands run
without it and with ``PYTHONPYCACHEPREFIX`` in the benchmark's work directory (the warm-up run
fills it; no ``__pycache__`` is written into the checkouts).

``python -m forensics`` is the console script minus any launcher shim the environment adds
(pyenv's adds a bash and a pyenv process). Every process runs from a directory outside any
checkout, so the working directory does not shadow ``PYTHONPATH``. The figures to quote are
CPU seconds (on a shared machine wall time also measures the neighbours).

Usage:
    python benchmarks/startup.py                 # 5 rounds
    python benchmarks/startup.py --rounds 9 --before /tmp/base
    nice python benchmarks/startup.py --first-ingest --rounds 2
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import wholeprocess as wp  # noqa: E402  (the helper beside this script)

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent
SAMPLE = REPO / "traces" / "samples" / "nvbug-6438685"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", help="another checkout to time beside this one")
    ap.add_argument("--no-postmortem", action="store_true", help="time --help and floors only")
    ap.add_argument("--first-ingest", action="store_true",
                    help="time the cold-cache first ingest of a 64 MB log against the warm one")
    args = ap.parse_args()
    if args.first_ingest:
        first_ingest(args.rounds)
        return
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    py = sys.executable

    def env_for(tree: Path) -> dict[str, str]:
        return wp.warm_bytecode(dict(os.environ, PYTHONPATH=str(tree), MPLBACKEND="Agg"),
                                work / "pycache")

    trees = {"": REPO}
    if args.before:
        trees["before-"] = Path(args.before).resolve()
    try:
        methods = [wp.Method("python -c pass", [py, "-c", "pass"]),
                   wp.Method("import click", [py, "-c", "import click"])]
        for label, tree in trees.items():
            methods.append(wp.Method(f"{label}help", [py, "-m", "forensics", "--help"],
                                     env=env_for(tree)))
            wp.measure(methods[-1].argv, methods[-1].env, str(work))   # warm-up: bytecode
        pm = []
        if not args.no_postmortem:
            for label, tree in trees.items():
                out = work / f"{label}report"
                # exit status 1 means "crash found and explained": wrap to make it success
                argv = ["sh", "-c", f'"$0" -m forensics postmortem "$1" -o "$2" -q; test $? -eq 1',
                        py, str(SAMPLE), str(out)]
                m = wp.Method(f"{label}postmortem", argv, env=env_for(tree),
                              prepare=lambda d=out: shutil.rmtree(d, ignore_errors=True))
                pm.append(m)
                m.prepare()
                wp.measure(argv, m.env, str(work))        # warm-up: page cache, .pyc files
        methods += pm
        wp.run_rounds(methods, args.rounds, cwd=str(work))
        print(wp.table(methods, None, ours="help"))
        for m in methods:
            if m.name.endswith(("help", "postmortem")):
                goal = 0.3 if m.name.endswith("help") else 1.0
                print(f"{m.name}: median {m.median('cpu'):.3f} s cpu, {m.median('wall'):.3f} s "
                      f"wall (goal {goal} s)")
        for p in pm:
            print(f"{p.name} vs help: {p.median('cpu') / methods[2].median('cpu'):.1f}x cpu")
        if len(pm) == 2:   # this checkout against --before, round by round
            cpu = statistics.median(b.cpu / a.cpu for a, b in zip(pm[0].samples, pm[1].samples))
            wall = statistics.median(b.wall / a.wall for a, b in zip(pm[0].samples, pm[1].samples))
            print(f"before-postmortem / postmortem, median of the paired rounds' ratios: "
                  f"cpu {cpu:.2f}x, wall {wall:.2f}x (> 1: this checkout is cheaper)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def first_ingest(rounds: int, size_mb: int = 64) -> None:
    """Cold-cache first ingest of a ``size_mb`` log against the warm second one, ``rounds``
    times, each with a fresh cache directory."""
    work = Path(tempfile.mkdtemp(prefix="first-ingest-bench-"))
    py = sys.executable
    try:
        log = work / "big.log"
        piece = (SAMPLE / "executor.log").read_bytes()
        with open(log, "wb") as f:
            while f.tell() < size_mb << 20:
                f.write(piece)
        mb = log.stat().st_size / 1e6
        env = wp.warm_bytecode(dict(os.environ, PYTHONPATH=str(REPO)), work / "pycache")
        env.pop("FORENSICS_INGEST_PATH", None)
        argv = [py, "-m", "forensics", "ingest", str(log), "-o", str(work / "ds"), "-q"]
        wp.measure([py, "-m", "forensics", "--help"], env, str(work))   # bytecode
        cold, warm, ready = [], [], []
        for r in range(rounds):
            cache = work / f"cache-{r}"
            run_env = dict(env, FORENSICS_CACHE_DIR=str(cache))
            shutil.rmtree(work / "ds", ignore_errors=True)
            t0 = time.perf_counter()
            cold.append(wp.measure(argv, run_env, str(work)))
            while list((cache / "native").glob("*.building")):   # the background build
                time.sleep(0.5)
            ready.append(time.perf_counter() - t0)
            shutil.rmtree(work / "ds", ignore_errors=True)
            warm.append(wp.measure(argv, run_env, str(work)))
            print(f"  round {r + 1}: cold {cold[-1].wall:.2f} s wall {cold[-1].cpu:.2f} s cpu; "
                  f"scanner saved after {ready[-1]:.1f} s; warm {warm[-1].wall:.2f} s wall "
                  f"{warm[-1].cpu:.2f} s cpu")
        med = statistics.median
        c_cpu, w_cpu = med(s.cpu for s in cold), med(s.cpu for s in warm)
        c_wall, w_wall = med(s.wall for s in cold), med(s.wall for s in warm)
        print(f"first ingest of a {mb:.1f} MB log, medians of {rounds} round(s), load "
              f"{os.getloadavg()[0]:.1f}:")
        print(f"  cold cache: {c_wall:.2f} s wall, {c_cpu:.2f} s cpu")
        print(f"  warm:       {w_wall:.2f} s wall, {w_cpu:.2f} s cpu")
        print(f"  cold / warm: {c_cpu / w_cpu:.2f}x cpu, {c_wall / w_wall:.2f}x wall (goal <= 2x); "
              f"the background build saved the scanner {med(ready):.1f} s after the cold "
              "ingest started")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
