"""Executor-log ingest as a user runs it, against the baselines a user would write, same run.

Every method is a whole process (interpreter start-up, imports and output included), timed in
paired, interleaved rounds by ``wholeprocess`` (wall, CPU of the child and its threads, peak
RSS; medians). The log comes from one of three generators; the first two write the simulator's
line layout of one iteration-line variant (``--variant``, default V4), the third is built to
differ from it:

- ``bench``: iteration lines of 8 ranks with random values, plus warnings, C++ lines, an ADP
  error now and then and a closing traceback (a 16 MB chunk repeated, iteration numbers go on);
- ``simulate``: ``forensics simulate --scenario fleet-1h`` (32 ranks), the product's simulator;
- ``varied``: a writer of its own here, not the simulator (shapes from the public excerpts in
  ``../shared/samples/real-logs`` and docs/adp-executor.md section 8): 8 ranks' iteration lines
  whose fields come in a new random order on every line (``iter`` first, ``states`` last, as
  upstream prints them), ``num_scheduled_requests: N`` with a colon, ``kv_cache_util`` on half
  the lines, 17-digit ``repr`` decimals; and ~10 % other lines: bursts of C++
  ``[TensorRT-LLM][WARNING]``/``[INFO]`` lines, the Python logger's warnings and notes, Python
  ``warnings`` (file:line: Category: text, then the indented source line), multi-line Python
  tracebacks (often after an ``Error in event loop`` line) and numbered C++ backtraces (a
  32 MB chunk repeated).

The generators are ``benchmarks/log_generators.py`` (the ingest tests use them too).

Methods (the baselines are scripts this benchmark writes into its work directory from the
templates of ``benchmarks/ingest_baselines.py``; read them there, ``--workdir`` keeps them):

- ``ours``: ``python -m forensics ingest LOG -o DS -q`` (the console script minus any launcher
  shim of the environment): every table (iterations, events, unparsed), sha256, summary;
- ``naive``: the loop a user would write: ONE compiled regex capturing every field of the
  variant's iteration line (prefix included), ``match`` per line, ``groupdict`` rows, one pandas
  DataFrame, numbers typed with ``to_numeric``, ``to_parquet`` (iterations only);
- ``polars``: lazy ``scan_csv`` of whole lines, ``filter``, one ``str.extract_groups`` with the
  same regex, casts, ``sink_parquet`` (``POLARS_MAX_THREADS=2``);
- ``duckdb``: ``read_csv`` of one VARCHAR column, ``regexp_extract`` with the same regex into
  named groups, ``TRY_CAST``, ``COPY ... TO parquet`` (2 threads);

  on the ``varied`` log no single regex of the whole line can read fields in any order, so the
  same three are written as a user would for it: ``naive`` matches a head regex (prefix and
  ``iter``) and ``findall`` one regex of the ``name = value`` / ``name: value`` pairs into the
  row's dict, splits ``a/b``, strips ``ms``, then pandas as above; ``polars`` and ``duckdb``
  take the head's groups and one regex extract per field (``\\bname'?(?: =|:) (value)``),
  then the same casts and Parquet;
- floors: ``cat LOG > /dev/null`` and ``grep -c 'iter = ' LOG``.

Every process runs with its bytecode cached (``wholeprocess.warm_bytecode``: the warm-up run of
ours fills it), as an installed package's second run has it.

The baselines build the iterations table only; ours builds every table, so any ratio is, if
anything, unfair to ours. The figures to quote are CPU-time ratios from one run (on a shared
machine wall time also measures the neighbours); the last lines print ours' CPU ratio to the
loop and to polars per generator against the goals (>= 8x and >= 3x).

Logs are generated once per work directory and size (``{generator}-{variant}-{size}MB.log``)
and reused by later runs with the same ``--workdir``. ``ours`` runs once untimed first (its
first run on a fresh install compiles the numba scanner into numba's cache).

Usage:
    python benchmarks/ingest.py                        # 64 MB, three generators, 3 rounds
    python benchmarks/ingest.py --size-mb 512 --rounds 3 --generators bench,varied
    python benchmarks/ingest.py --methods ours,naive --size-mb 2 --rounds 1   # smoke test
    python benchmarks/ingest.py --before ../main --generators bench,varied   # a change's effect
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import wholeprocess as wp  # noqa: E402  (the helpers beside this script)
from ingest_baselines import write_baselines, write_varied_baselines  # noqa: E402
from log_generators import VARIANTS, generate  # noqa: E402

# benchmarks/replay.py would shadow the replay package for anything imported from here on.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent

#: The goals of ours against the baselines, CPU time (issue 28): ratio of the baseline's median
#: CPU to ours.
GOALS = {"naive": 8.0, "polars": 3.0}


def goals(summary: list[tuple[str, float, list]]) -> str:
    """One line per generator: ours' CPU ratio to each goal's baseline, and whether it holds."""
    out = ["goals (cpu, baseline / ours): " + ", ".join(f"{m} >= {g:g}x" for m, g in GOALS.items())]
    for gen, mb, methods in summary:
        by = {m.name: m for m in methods}
        for who in ("before", "ours"):
            if who not in by:
                continue
            ours = by[who].median("cpu")
            parts = []
            for name, goal in GOALS.items():
                if name in by:
                    r = by[name].median("cpu") / ours
                    parts.append(f"{name} {r:5.2f}x ({'met' if r >= goal else 'NOT met'})")
            out.append(f"  {gen:<9s} {mb:6.0f} MB  {who:<6s} {ours:6.2f} s cpu, "
                       f"{by[who].median('rss_mib'):5.0f} MiB; " + ", ".join(parts))
    return "\n".join(out)


def _rows_of_ours(ds: Path, env: dict) -> int:
    """Iteration rows of our dataset, read in a subprocess (this process stays small)."""
    code = ("import sys, forensics; print(len(forensics.load(sys.argv[1]).iterations))")
    return int(subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True,
                              text=True, check=True, env=env, cwd=ds.parent).stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=64, help="log size per generator (default 64)")
    ap.add_argument("--generators", default="bench,simulate,varied")
    ap.add_argument("--variant", default="V4", choices=sorted(VARIANTS))
    ap.add_argument("--methods", default="ours,naive,polars,duckdb,cat,grep")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (medians reported)")
    ap.add_argument("--workdir", help="keep the log, the baseline scripts and outputs here")
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="also run ours from this checkout (method 'before', e.g. a worktree of "
                         "main): a change's before and after in the same paired rounds")
    ap.add_argument("--flat-mb", type=int, default=0,
                    help="also run ours once on a log of this size (same generator, the native "
                         "path forced on both) and print the peak-RSS ratio (flat = 1.0)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    # every method with its bytecode warm (the warm-up run below fills the cache for ours)
    env = wp.warm_bytecode(dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), POLARS_MAX_THREADS="2"),
        work / "pycache")
    envs = {"ours": env}
    if args.before:
        envs["before"] = wp.warm_bytecode(dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(Path(args.before).resolve()), *filter(None, [os.environ.get("PYTHONPATH")])]),
            POLARS_MAX_THREADS="2"), work / "pycache")
    try:
        fixed = write_baselines(work, args.variant)
        varied = write_varied_baselines(work)
        summary = []
        for gen in args.generators.split(","):
            scripts = varied if gen == "varied" else fixed
            variant = "mixed" if gen == "varied" else args.variant
            log = work / f"{gen}-{variant}-{args.size_mb}MB.log"
            if log.exists():   # a work directory's logs are reused (delete one to regenerate)
                print(f"reusing {log}", flush=True)
            else:
                generate(gen, log, args.size_mb, args.variant)
            mb = log.stat().st_size / 1e6
            print(f"--- generator {gen}, variant {variant}: {mb:.0f} MB ({log})", flush=True)
            out = {m: work / f"out-{gen}-{m}" for m in ("ours", "before", "naive", "polars",
                                                         "duckdb")}

            def fresh(d: Path) -> None:
                shutil.rmtree(d, ignore_errors=True)
                if d.name.split("-")[-1] not in envs:
                    d.mkdir()

            argv = {
                **{m: [sys.executable, "-m", "forensics", "ingest", str(log), "-o",
                       str(out[m]), "-q"] for m in envs},
                **{m: [sys.executable, str(scripts[m]), str(log), str(out[m])]
                   for m in ("naive", "polars", "duckdb")},
                "cat": ["sh", "-c", f"cat '{log}' > /dev/null"],
                "grep": ["grep", "-c", "iter = ", str(log)],
            }
            names = args.methods.split(",")
            if "before" in envs and "before" not in names:
                names.insert(names.index("ours") + 1 if "ours" in names else 0, "before")
            methods = [wp.Method(m, argv[m], env=envs.get(m, env),
                                 prepare=(lambda d=out[m]: fresh(d)) if m in out else None)
                       for m in names]
            for e in envs.values():
                wp.ready_scanners(e)
            for m in methods:
                if m.name in envs:   # untimed: a fresh install compiles numba's cache here
                    m.prepare()
                    s = wp.measure(m.argv, m.env, str(work))
                    print(f"  warm-up: {m.name} {s.wall:.2f} s wall {s.cpu:.2f} s cpu "
                          f"{s.rss_mib:.0f} MiB (not counted)", flush=True)
            wp.run_rounds(methods, args.rounds, cwd=str(work))
            counts = {}
            for m in methods:
                if m.name in envs:
                    counts[m.name] = _rows_of_ours(out[m.name], envs[m.name])
                elif m.name in out or m.name == "grep":
                    counts[m.name] = int(m.samples[-1].stdout.split()[-1])
            print("iteration rows:", json.dumps(counts))
            print(wp.table(methods, mb), flush=True)
            summary.append((gen, mb, methods))
            if args.flat_mb and "ours" in argv:
                small = work / f"{gen}-{variant}-{args.flat_mb}MB.log"
                if not small.exists():
                    generate(gen, small, args.flat_mb, args.variant)
                forced = dict(env, FORENSICS_INGEST_PATH="native")
                rss = []
                for lg in (small, log):
                    fresh(out["ours"])
                    rss.append(wp.measure([*argv["ours"][:4], str(lg), *argv["ours"][5:]],
                                          forced, str(work)).rss_mib)
                print(f"peak RSS of ours, {small.stat().st_size / 1e6:.0f} MB -> {mb:.0f} MB "
                      f"(x{log.stat().st_size / small.stat().st_size:.1f} input): "
                      f"{rss[0]:.0f} -> {rss[1]:.0f} MiB, ratio {rss[1] / rss[0]:.2f}", flush=True)
        print(goals(summary), flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
