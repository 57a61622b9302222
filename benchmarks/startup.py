"""Start-up: ``forensics --help``, an ingest's and the bundled-sample post-mortem's, as a user
runs them.

Whole processes in paired, interleaved rounds (``wholeprocess``: wall, CPU, peak RSS; medians):

- ``help``: ``python -m forensics --help`` (goal: under 0.3 s);
- ``ingest``: ``python -m forensics ingest`` of the sample's executor log (350 KB) with the
  compiled scanner (``FORENSICS_INGEST_PATH=native``: loaded as for a big log, which is what
  the ingest of a big log pays before its first byte). Besides the whole process, the CPU
  the process had used when the reader opened the log to read its first block (goal: at most
  0.5 s): an audit hook (``sys.addaudithook``) records ``time.process_time()`` at every open of
  the input, and the last one is the reader's (the earlier ones check it and sniff its kind
  from its first bytes; nothing opens it after). The hook and ``runpy`` cost the ingest ~1 ms;
- ``postmortem``: ``python -m forensics postmortem traces/samples/nvbug-6438685 -o DIR`` after
  one untimed warm-up run (goal: under 1 s warm); it exits 1 ("a crash was found and
  explained"), which is its success here;
- floors measured in the same rounds: ``python -c pass`` (the interpreter),
  ``python -c "import click"`` (the CLI framework every command needs) and
  ``python -c "import pyarrow"`` (the Arrow library every ingest writes with; it imports numpy);
- ``before-help`` / ``before-ingest`` / ``before-postmortem`` (with ``--before PATH``): the same
  commands from another checkout (e.g. ``git archive REV | tar -x -C PATH``);
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
    python benchmarks/startup.py --cases ingest --rounds 9 --before /tmp/base
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
CASES = ("help", "ingest", "postmortem")
GOALS = {"help": 0.3, "ingest": 0.5, "postmortem": 1.0}
FIRST_BYTE = "first byte cpu"

#: ``python -c FIRST_BYTE_PROBE INPUT ARGS...``: ``python -m forensics ARGS...``, and at exit the
#: CPU time at the last open of INPUT on stdout (``first byte cpu SECONDS``; -1: never opened).
FIRST_BYTE_PROBE = f"""
import os, runpy, sys, time
target, opened = os.path.realpath(sys.argv[1]), []
name = os.path.basename(target)
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.fsdecode(args[0])
        if path.endswith(name) and os.path.realpath(path) == target:
            opened.append(time.process_time())
sys.addaudithook(hook)
sys.argv = [sys.argv[0], *sys.argv[2:]]
try:
    runpy.run_module("forensics", run_name="__main__", alter_sys=True)
finally:
    print("\\n{FIRST_BYTE}", opened[-1] if opened else -1.0)
"""


def first_byte_cpu(sample: wp.Sample) -> float:
    """The CPU seconds a ``FIRST_BYTE_PROBE`` run printed."""
    line = [ln for ln in sample.stdout.splitlines() if ln.startswith(FIRST_BYTE)][-1]
    return float(line.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", help="another checkout to time beside this one")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"commands to time, of {','.join(CASES)} (default: all)")
    ap.add_argument("--no-postmortem", action="store_true", help="leave out the post-mortem")
    ap.add_argument("--first-ingest", action="store_true",
                    help="time the cold-cache first ingest of a 64 MB log against the warm one")
    args = ap.parse_args()
    if args.first_ingest:
        first_ingest(args.rounds)
        return
    cases = [c for c in args.cases.split(",") if c]
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; known: {', '.join(CASES)}")
    if args.no_postmortem and "postmortem" in cases:
        cases.remove("postmortem")
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    py = sys.executable

    def env_for(tree: Path) -> dict[str, str]:
        return wp.warm_bytecode(dict(os.environ, PYTHONPATH=str(tree), MPLBACKEND="Agg"),
                                work / "pycache")

    trees = {"": REPO}
    if args.before:
        trees["before-"] = Path(args.before).resolve()
    log = SAMPLE / "executor.log"
    argvs = {
        "help": lambda out: [py, "-m", "forensics", "--help"],
        "ingest": lambda out: [py, "-c", FIRST_BYTE_PROBE, str(log), "ingest", str(log),
                               "-o", str(out), "-q"],
        # exit status 1 means "crash found and explained": wrap to make it success
        "postmortem": lambda out: ["sh", "-c",
                                   '"$0" -m forensics postmortem "$1" -o "$2" -q; test $? -eq 1',
                                   py, str(SAMPLE), str(out)],
    }
    try:
        methods = [wp.Method("python -c pass", [py, "-c", "pass"]),
                   wp.Method("import click", [py, "-c", "import click"]),
                   wp.Method("import pyarrow", [py, "-c", "import pyarrow"])]
        for case in cases:
            for label, tree in trees.items():
                out = work / f"{label}{case}-out"
                env = env_for(tree)
                if case == "ingest":
                    env["FORENSICS_INGEST_PATH"] = "native"
                    wp.ready_scanners(env)
                m = wp.Method(f"{label}{case}", argvs[case](out), env=env,
                              prepare=lambda d=out: shutil.rmtree(d, ignore_errors=True))
                methods.append(m)
                m.prepare()
                wp.measure(m.argv, m.env, str(work))   # warm-up: bytecode, page cache
        wp.run_rounds(methods, args.rounds, cwd=str(work))
        print(f"load average {os.getloadavg()[0]:.1f} (1 min) after the rounds")
        print(wp.table(methods, None, ours="help" if "help" in cases else methods[0].name))
        by_name = {m.name: m for m in methods}
        for m in methods:
            case = m.name.removeprefix("before-")
            if case in GOALS:
                print(f"{m.name}: median {m.median('cpu'):.3f} s cpu, {m.median('wall'):.3f} s "
                      f"wall" + ("" if case == "ingest" else f" (goal {GOALS[case]} s)"))
            if case == "ingest":
                first = statistics.median(first_byte_cpu(s) for s in m.samples)
                floor = by_name["import pyarrow"].median("cpu")
                print(f"{m.name}: median {first:.3f} s cpu before the reader's first byte "
                      f"(goal {GOALS[case]} s); floor `import pyarrow` {floor:.3f} s, "
                      f"`pass` {by_name['python -c pass'].median('cpu'):.3f} s")
        if "help" in by_name and "postmortem" in by_name:
            print(f"postmortem vs help: "
                  f"{by_name['postmortem'].median('cpu') / by_name['help'].median('cpu'):.1f}x cpu")
        for case in cases:   # this checkout against --before, round by round
            if f"before-{case}" not in by_name:
                continue
            pairs = list(zip(by_name[case].samples, by_name[f"before-{case}"].samples))
            cpu = statistics.median(b.cpu / a.cpu for a, b in pairs)
            wall = statistics.median(b.wall / a.wall for a, b in pairs)
            extra = ""
            if case == "ingest":
                first = statistics.median(first_byte_cpu(b) / first_byte_cpu(a) for a, b in pairs)
                extra = f", cpu before the first byte {first:.2f}x"
            print(f"before-{case} / {case}, median of the paired rounds' ratios: cpu {cpu:.2f}x, "
                  f"wall {wall:.2f}x{extra} (> 1: this checkout is cheaper)")
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
