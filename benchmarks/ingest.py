"""Executor-log ingest as a user runs it, against the baselines a user would write, same run.

Every method is a whole process (interpreter start-up, imports and output included), timed in
paired, interleaved rounds by ``wholeprocess`` (wall, CPU of the child and its threads, peak
RSS; medians). The log comes from one of two generators, both writing the simulator's line
layout of one iteration-line variant (``--variant``, default V4):

- ``bench``: iteration lines of 8 ranks with random values, plus warnings, C++ lines, an ADP
  error now and then and a closing traceback (a 16 MB chunk repeated, iteration numbers go on);
- ``simulate``: ``forensics simulate --scenario fleet-1h`` (32 ranks), the product's simulator.

Methods (the baselines are scripts this benchmark writes into its work directory; read them
there, ``--workdir`` keeps them):

- ``ours``: ``python -m forensics ingest LOG -o DS -q`` (the console script minus any launcher
  shim of the environment): every table (iterations, events, unparsed), sha256, summary;
- ``naive``: the loop a user would write: ONE compiled regex capturing every field of the
  variant's iteration line (prefix included), ``match`` per line, ``groupdict`` rows, one pandas
  DataFrame, numbers typed with ``to_numeric``, ``to_parquet`` (iterations only);
- ``polars``: lazy ``scan_csv`` of whole lines, ``filter``, one ``str.extract_groups`` with the
  same regex, casts, ``sink_parquet`` (``POLARS_MAX_THREADS=2``);
- ``duckdb``: ``read_csv`` of one VARCHAR column, ``regexp_extract`` with the same regex into
  named groups, ``TRY_CAST``, ``COPY ... TO parquet`` (2 threads);
- floors: ``cat LOG > /dev/null`` and ``grep -c 'iter = ' LOG``.

Every process runs with its bytecode cached (``wholeprocess.warm_bytecode``: the warm-up run of
ours fills it), as an installed package's second run has it.

The baselines build the iterations table only; ours builds every table, so any ratio is, if
anything, unfair to ours. The figures to quote are CPU-time ratios from one run (on a shared
machine wall time also measures the neighbours).

Logs are generated once per work directory and size (``{generator}-{variant}-{size}MB.log``)
and reused by later runs with the same ``--workdir``. ``ours`` runs once untimed first (its
first run on a fresh install compiles the numba scanner into numba's cache).

Usage:
    python benchmarks/ingest.py                        # 64 MB, both generators, 3 rounds
    python benchmarks/ingest.py --size-mb 1024 --rounds 3 --generators bench,simulate
    python benchmarks/ingest.py --methods ours,naive --size-mb 2 --rounds 1   # smoke test
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import wholeprocess as wp  # noqa: E402  (the helper beside this script)

# benchmarks/replay.py would shadow the replay package for anything imported from here on.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent

# --------------------------------------------------------------------------- the variants

_HEAD = [("iter", r"\d+"), ("global_rank", r"\d+"), ("rank", r"\d+")]
_CUR = [("currank_total_requests", r"(?P<currank_requests>\d+)/(?P<total_requests>\d+)")]
_TIMES = [("host_step_time", r"(?P<host_step_time>[0-9.]+)ms"),
          ("prev_device_step_time", r"(?:(?P<prev_device_step_time>[0-9.]+)ms|N/A)")]
_TS = [("timestamp", r"[^,]+")]
_STATES = ("states = \\{'num_ctx_requests': (?P<num_ctx_requests>\\d+), 'num_ctx_tokens': "
           "(?P<num_ctx_tokens>\\d+), 'num_generation_tokens': (?P<num_generation_tokens>\\d+)\\}")
#: Per variant, the fields in the simulator's order (``forensics/simulate/log_writer.py``):
#: (name, value pattern); a pattern with its own groups names them itself; ``name:`` is the
#: colon form (``num_scheduled_requests: 3`` in V2/V3).
VARIANTS = {
    "V1": _HEAD + _CUR + [("elapsed_time", r"(?P<elapsed_time>[0-9.e-]+)s")] + _TS,
    "V2": _HEAD + _CUR + [("elapsed_time", r"(?P<elapsed_time>[0-9.e-]+)s")] + _TS
    + [("num_scheduled_requests:", r"\d+")],
    "V3": _HEAD + _CUR + _TIMES + _TS + [("num_scheduled_requests:", r"\d+")],
    "V4": _HEAD + [("num_scheduled_requests", r"\d+"), ("kv_cache_util", r"(?:(?P<kv_cache_util>"
                   r"[0-9.]+)|N/A)")] + _CUR + _TIMES + _TS,
    "V5": _HEAD + [("num_scheduled_requests", r"\d+"), ("adp_dummy_ctx_tokens", r"\d+"),
                   ("adp_dummy_gen_tokens", r"\d+"),
                   ("kv_cache_util", r"(?:(?P<kv_cache_util>[0-9.]+)|N/A)")] + _CUR + _TIMES + _TS,
}
_PREFIX = (r"^\[(?P<log_time>[^\]]+)\] \[TRT-LLM\] \[RANK (?P<prefix_rank>\d+)\] "
           r"\[(?P<severity>[A-Z])\] ")
FLOATS = ("elapsed_time", "host_step_time", "prev_device_step_time", "kv_cache_util")
STRINGS = ("log_time", "severity", "timestamp")


def iteration_regex(variant: str) -> str:
    """The one regex for a whole iteration line of ``variant``, every field a named group."""
    parts = []
    for name, pat in VARIANTS[variant]:
        if name.endswith(":"):
            parts.append(f"{name} (?P<{name[:-1]}>{pat})")
        elif "(?P<" in pat:
            parts.append(f"{name} = {pat}")
        else:
            parts.append(f"{name} = (?P<{name}>{pat})")
    return _PREFIX + ", ".join(parts) + ", " + _STATES + "$"


def group_names(variant: str) -> list[str]:
    import re
    return list(re.compile(iteration_regex(variant)).groupindex)


# --------------------------------------------------------------------------- generators

def _bench_line(rng: random.Random, it: int, rank: int, variant: str) -> str:
    pre = f"[11/30/2026-12:{(it // 60) % 60:02d}:{it % 60:02d}] [TRT-LLM] [RANK {rank}] [I] "
    vals = {
        "iter": str(it), "global_rank": str(rank), "rank": str(rank),
        "currank_total_requests": f"{it * 3 + rank}/{it * 24}",
        "elapsed_time": f"{rng.uniform(0.005, 0.08)!r}s",
        "host_step_time": f"{round(rng.uniform(5, 80), 6)}ms",
        "prev_device_step_time": "N/A" if rng.random() < 0.05 else f"{round(rng.uniform(5, 80), 6)}ms",
        "timestamp": "2026-11-30 12:00:01",
        "num_scheduled_requests": str(rng.randint(0, 64)),
        "kv_cache_util": f"{rng.random():.3f}",
        "adp_dummy_ctx_tokens": "0", "adp_dummy_gen_tokens": str(rng.randint(0, 1)),
    }
    body = []
    for name, _ in VARIANTS[variant]:
        body.append(f"{name} {vals[name[:-1]]}" if name.endswith(":") else f"{name} = {vals[name]}")
    states = (f"states = {{'num_ctx_requests': {rng.randint(0, 4)}, 'num_ctx_tokens': "
              f"{rng.randint(0, 8192)}, 'num_generation_tokens': {rng.randint(0, 64)}}}")
    return pre + ", ".join(body) + ", " + states


def generate_bench(path: Path, size_mb: int, variant: str, seed: int = 0) -> None:
    """~size_mb of log: a 16 MB unique chunk repeated (iteration numbers continue)."""
    rng = random.Random(seed)
    lines: list[str] = []
    it = 0
    size = 0
    while size < min(16, size_mb) << 20:
        for rank in range(8):
            lines.append(_bench_line(rng, it, rank, variant))
            size += len(lines[-1]) + 1
        if it % 50 == 0:
            lines.append(f"[11/30/2026-12:00:01] [TRT-LLM] [RANK {it % 8}] [W] active_requests (9) "
                         "exceeds expected_num_active_requests (8); tolerating the ADP pad-dummy "
                         "surplus")
            lines.append("[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: "
                         f"Can not find sequence for request {it}")
        if it % 997 == 0:
            lines.append("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [E] Error in event loop: x")
        it += 1
    chunk = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        written = 0
        while written < size_mb << 20:
            f.write(chunk)
            written += len(chunk)
        f.write("Traceback (most recent call last):\n"
                '  File "/usr/lib/python3.12/site-packages/tensorrt_llm/_torch/pyexecutor/'
                'py_executor.py", line 2101, in _pad_attention_dp_dummy_request\n'
                "    assert self.expected_num_active_requests >= len(self.active_requests)\n"
                "AssertionError\n")


def generate_simulated(path: Path, size_mb: int, variant: str) -> None:
    """``forensics simulate --scenario fleet-1h`` sized to about ``size_mb`` of log."""
    iters = max(20, int(size_mb * 5000 / 57))        # 32 ranks x 5,000 iterations ~ 57 MB
    out = path.parent / "sim"
    subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                    "--iters", str(iters), "--log-format", variant, "-o", str(out)],
                   check=True, capture_output=True, cwd=path.parent)
    (out / "executor.log").rename(path)
    shutil.rmtree(out)


# --------------------------------------------------------------------------- baselines

NAIVE = '''"""The loop a user would write: one regex per line, dict rows, pandas, Parquet."""
import re, sys
import pandas as pd

RX = re.compile({regex!r})
FLOATS, STRINGS = {floats!r}, {strings!r}
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = RX.match(line.rstrip("\\n"))
        if m:
            d = m.groupdict()
            d["line"] = n
            rows.append(d)
df = pd.DataFrame(rows)
for c in df.columns:
    if c not in STRINGS and c != "line":
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if c not in FLOATS:
            df[c] = df[c].astype("Int64")
df.to_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(len(df))
'''

POLARS = '''"""polars, lazy: whole lines, filter, one extract_groups, casts, sink_parquet."""
import sys
import polars as pl

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
lf = pl.scan_csv(sys.argv[1], has_header=False, separator="\\x1f", quote_char=None,
                 new_columns=["text"], schema_overrides={{"text": pl.String}}, infer_schema=False,
                 truncate_ragged_lines=True)
lf = lf.with_row_index("line", offset=1).filter(pl.col("text").str.contains("] iter = ", literal=True))
lf = lf.select("line", pl.col("text").str.extract_groups(RX).alias("g")).unnest("g")
lf = lf.filter(pl.col("iter").is_not_null()).with_columns(
    *(pl.col(c).cast(pl.Float64, strict=False) for c in NAMES if c in FLOATS),
    *(pl.col(c).cast(pl.Int64, strict=False) for c in NAMES if c not in FLOATS and c not in STRINGS))
lf.sink_parquet(sys.argv[2] + "/iterations.parquet", compression="zstd")
print(pl.scan_parquet(sys.argv[2] + "/iterations.parquet").select(pl.len()).collect().item())
'''

DUCKDB = '''"""duckdb: one VARCHAR column, regexp_extract into named groups, TRY_CAST, COPY TO parquet."""
import sys
import duckdb

RX = {regex!r}
FLOATS, STRINGS, NAMES = {floats!r}, {strings!r}, {names!r}
con = duckdb.connect()
con.execute("SET threads = 2")
casts = ", ".join(f"g.{{c}}" if c in STRINGS else
                  f"TRY_CAST(g.{{c}} AS {{'DOUBLE' if c in FLOATS else 'BIGINT'}}) AS {{c}}" for c in NAMES)
names = ", ".join("'" + c + "'" for c in NAMES)
src = (f"read_csv('{{sys.argv[1]}}', columns = {{{{'text': 'VARCHAR'}}}}, delim = '\\x1f', quote = '', "
       "escape = '', header = false, auto_detect = false, strict_mode = false, null_padding = true)")
rx = RX.replace("'", "''")
con.execute(f"""COPY (SELECT {{casts}} FROM (
    SELECT regexp_extract(text, '{{rx}}', [{{names}}]) AS g FROM {{src}} WHERE text LIKE '%] iter = %')
    WHERE g.iter <> '') TO '{{sys.argv[2]}}/iterations.parquet' (FORMAT parquet, COMPRESSION zstd)""")
print(con.execute(f"SELECT count(*) FROM '{{sys.argv[2]}}/iterations.parquet'").fetchone()[0])
'''


def write_baselines(work: Path, variant: str) -> dict[str, Path]:
    regex = iteration_regex(variant)
    names = [n for n in group_names(variant)]
    fill = dict(regex=regex, floats=FLOATS, strings=STRINGS, names=names)
    out = {}
    for name, src in (("naive", NAIVE), ("polars", POLARS), ("duckdb", DUCKDB)):
        p = work / f"baseline_{name}_{variant}.py"
        p.write_text(src.format(**fill))
        out[name] = p
    return out


def _rows_of_ours(ds: Path, env: dict) -> int:
    """Iteration rows of our dataset, read in a subprocess (this process stays small)."""
    code = ("import sys, forensics; print(len(forensics.load(sys.argv[1]).iterations))")
    return int(subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True,
                              text=True, check=True, env=env, cwd=ds.parent).stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=64, help="log size per generator (default 64)")
    ap.add_argument("--generators", default="bench,simulate")
    ap.add_argument("--variant", default="V4", choices=sorted(VARIANTS))
    ap.add_argument("--methods", default="ours,naive,polars,duckdb,cat,grep")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (medians reported)")
    ap.add_argument("--workdir", help="keep the log, the baseline scripts and outputs here")
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
    try:
        scripts = write_baselines(work, args.variant)
        for gen in args.generators.split(","):
            log = work / f"{gen}-{args.variant}-{args.size_mb}MB.log"
            if log.exists():   # a work directory's logs are reused (delete one to regenerate)
                print(f"reusing {log}", flush=True)
            else:
                (generate_bench(log, args.size_mb, args.variant) if gen == "bench"
                 else generate_simulated(log, args.size_mb, args.variant))
            mb = log.stat().st_size / 1e6
            print(f"--- generator {gen}, variant {args.variant}: {mb:.0f} MB ({log})", flush=True)
            out = {m: work / f"out-{gen}-{m}" for m in ("ours", "naive", "polars", "duckdb")}

            def fresh(d: Path) -> None:
                shutil.rmtree(d, ignore_errors=True)
                if d.name.split("-")[-1] != "ours":
                    d.mkdir()

            argv = {
                "ours": [sys.executable, "-m", "forensics", "ingest", str(log), "-o",
                         str(out["ours"]), "-q"],
                **{m: [sys.executable, str(scripts[m]), str(log), str(out[m])]
                   for m in ("naive", "polars", "duckdb")},
                "cat": ["sh", "-c", f"cat '{log}' > /dev/null"],
                "grep": ["grep", "-c", "iter = ", str(log)],
            }
            methods = [wp.Method(m, argv[m], env=env,
                                 prepare=(lambda d=out[m]: fresh(d)) if m in out else None)
                       for m in args.methods.split(",")]
            wp.ready_scanners(env)
            for m in methods:
                if m.name == "ours":   # untimed: a fresh install compiles numba's cache here
                    m.prepare()
                    s = wp.measure(m.argv, m.env, str(work))
                    print(f"  warm-up: ours {s.wall:.2f} s wall {s.cpu:.2f} s cpu "
                          f"{s.rss_mib:.0f} MiB (not counted)", flush=True)
            wp.run_rounds(methods, args.rounds, cwd=str(work))
            counts = {}
            for m in methods:
                if m.name == "ours":
                    counts[m.name] = _rows_of_ours(out["ours"], env)
                elif m.name in out or m.name == "grep":
                    counts[m.name] = int(m.samples[-1].stdout.split()[-1])
            print("iteration rows:", json.dumps(counts))
            print(wp.table(methods, mb), flush=True)
            if args.flat_mb and "ours" in argv:
                small = work / f"{gen}-{args.variant}-{args.flat_mb}MB.log"
                if not small.exists():
                    (generate_bench(small, args.flat_mb, args.variant) if gen == "bench"
                     else generate_simulated(small, args.flat_mb, args.variant))
                forced = dict(env, FORENSICS_INGEST_PATH="native")
                rss = []
                for lg in (small, log):
                    fresh(out["ours"])
                    rss.append(wp.measure([*argv["ours"][:4], str(lg), *argv["ours"][5:]],
                                          forced, str(work)).rss_mib)
                print(f"peak RSS of ours, {small.stat().st_size / 1e6:.0f} MB -> {mb:.0f} MB "
                      f"(x{log.stat().st_size / small.stat().st_size:.1f} input): "
                      f"{rss[0]:.0f} -> {rss[1]:.0f} MiB, ratio {rss[1] / rss[0]:.2f}", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
