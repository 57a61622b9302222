"""Stats and trace JSON Lines ingest as a user runs it, against the baselines a user would write.

Simulates a fleet (``forensics simulate --scenario fleet-1h``, 32 ranks) at two iteration counts
and times, per kind (``stats.jsonl``, ``trace.jsonl``) at the larger count, whole processes in
paired, interleaved rounds (``wholeprocess``: wall, CPU of the child and its threads, peak RSS;
medians):

- ``ours``: ``python -m forensics ingest FILE -o DS -q`` (every table, sha256, summary);
- ``before`` (with ``--before PATH``): the same command run from another checkout (for instance
  the commit before a change: ``git archive REV | tar -x -C PATH``), run from a directory outside
  any checkout so the working directory does not shadow it; with ``--before`` every method
  reads the trace as ``trace-v1.jsonl`` (the run record rewritten as format v1, frames
  unchanged), since a checkout older than format v2 refuses v2;
- ``json.loads``: the per-object loop a user would write: ``json.loads`` per line, a dict row
  per object (stats: every numeric leaf under its dotted name; trace: one row per frame and one
  per request), pandas DataFrames, ``to_parquet``;
- ``pyarrow.json``: ``pyarrow.json.read_json`` of the whole file, structs flattened (trace:
  frames filtered, the request lists flattened), ``write_table``;
- ``polars``: ``read_ndjson``, structs unnested (trace: frames filtered, requests exploded),
  ``write_parquet`` (``POLARS_MAX_THREADS=2``);
- floor: ``cat FILE > /dev/null``.

The baselines are scripts written into the work directory (``--workdir`` keeps them). They keep
less than ours (no line numbers, no unparsed lines, no validation), so any ratio is, if anything,
unfair to ours. Then ours once more at the smaller count: the peak-RSS ratio large/small says
whether memory is flat in the input size (close to 1 while the input grows by the iteration
ratio). The figures to quote are CPU-time ratios from one run.

Usage:
    python benchmarks/trace_ingest.py                       # 32 ranks x 2,000 and x 8,000 iterations
    python benchmarks/trace_ingest.py --iters 5000,20000 --rounds 3 --before /tmp/base
    python benchmarks/trace_ingest.py --iters 20,40 --ranks 4 --rounds 1      # smoke test
    # only ours against another checkout, inputs kept for a rerun (large inputs: the baselines
    # above hold whole files in memory)
    python benchmarks/trace_ingest.py --iters 4000,20000 --methods ours,cat \
        --before /work/bench/before --workdir /work/bench/json
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
import wholeprocess as wp  # noqa: E402  (the helper beside this script)

# benchmarks/replay.py would shadow the replay package for anything imported from here on.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent

LOADS_STATS = '''"""Per-object loop: json.loads per line, dotted numeric leaves, pandas, Parquet."""
import json, sys
import pandas as pd

def flatten(obj, prefix, out):
    for k, v in obj.items():
        if isinstance(v, dict):
            flatten(v, f"{prefix}{k}.", out)
        elif isinstance(v, (int, float)) or k == "timestamp":
            out[prefix + k] = v

rows = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if line.strip():
            row = {}
            flatten(json.loads(line), "", row)
            rows.append(row)
df = pd.DataFrame(rows)
df.to_parquet(sys.argv[2] + "/stats.parquet", compression="zstd")
print(len(df))
'''

LOADS_TRACE = '''"""Per-object loop: json.loads per line, a row per frame and per request, pandas, Parquet."""
import json, sys
import pandas as pd

OPTIONAL = ("expected", "padded", "scheduled", "can_queue", "alloc_ok", "postpadded",
            "kv_precheck_ok")
frames, requests = [], []
with open(sys.argv[1], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        rec = json.loads(line)
        if rec.get("kind") != "frame":
            continue
        reqs = rec["requests"]
        frames.append({"line": n, "iter": rec["iter"], "rank": rec["rank"],
                       "num_requests": len(reqs),
                       "num_dummies": sum(bool(r.get("dummy")) for r in reqs),
                       **{k: rec.get(k) for k in OPTIONAL}})
        for pos, r in enumerate(reqs):
            requests.append({"iter": rec["iter"], "rank": rec["rank"], "pos": pos, "id": r["id"],
                             "state": r["state"], "dummy": bool(r.get("dummy", False))})
pd.DataFrame(frames).to_parquet(sys.argv[2] + "/frames.parquet", compression="zstd")
pd.DataFrame(requests).to_parquet(sys.argv[2] + "/requests.parquet", compression="zstd")
print(len(frames))
'''

ARROW_STATS = '''"""pyarrow.json: read the whole file, flatten the structs, write Parquet."""
import sys
import pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq

t = pj.read_json(sys.argv[1])
while any(pa.types.is_struct(f.type) for f in t.schema):
    t = t.flatten()
pq.write_table(t, sys.argv[2] + "/stats.parquet", compression="zstd")
print(t.num_rows)
'''

ARROW_TRACE = '''"""pyarrow.json: read the whole file, frames filtered, request lists flattened, Parquet."""
import sys
import pyarrow as pa, pyarrow.compute as pc, pyarrow.json as pj, pyarrow.parquet as pq

t = pj.read_json(sys.argv[1])
t = t.filter(pc.equal(t["kind"], "frame"))
reqs = t["requests"].combine_chunks()
items = pc.list_flatten(reqs)
parent = pc.list_parent_indices(reqs)
requests = pa.table({"iter": t["iter"].take(parent), "rank": t["rank"].take(parent),
                     **{f.name: items.field(f.name) for f in items.type}})
frames = t.drop_columns(["requests", "kind"]).append_column("num_requests", pc.list_value_length(reqs))
pq.write_table(frames, sys.argv[2] + "/frames.parquet", compression="zstd")
pq.write_table(requests, sys.argv[2] + "/requests.parquet", compression="zstd")
print(frames.num_rows)
'''

POLARS_STATS = '''"""polars: read_ndjson, unnest the structs, write Parquet."""
import sys
import polars as pl

df = pl.read_ndjson(sys.argv[1])
while any(isinstance(t, pl.Struct) for t in df.dtypes):
    df = df.unnest([c for c, t in zip(df.columns, df.dtypes) if isinstance(t, pl.Struct)],
                   separator=".")
df.write_parquet(sys.argv[2] + "/stats.parquet", compression="zstd")
print(df.height)
'''

POLARS_TRACE = '''"""polars: read_ndjson, frames filtered, requests exploded and unnested, Parquet."""
import sys
import polars as pl

df = pl.read_ndjson(sys.argv[1], infer_schema_length=1000).filter(pl.col("kind") == "frame")
frames = df.drop("requests", "kind", *[c for c in df.columns if c in ("simulator",)]).with_columns(
    num_requests=df["requests"].list.len())
requests = df.select("iter", "rank", "requests").explode("requests").unnest("requests")
frames.write_parquet(sys.argv[2] + "/frames.parquet", compression="zstd")
requests.write_parquet(sys.argv[2] + "/requests.parquet", compression="zstd")
print(frames.height)
'''

BASELINES = {("stats", "json.loads"): LOADS_STATS, ("trace", "json.loads"): LOADS_TRACE,
             ("stats", "pyarrow.json"): ARROW_STATS, ("trace", "pyarrow.json"): ARROW_TRACE,
             ("stats", "polars"): POLARS_STATS, ("trace", "polars"): POLARS_TRACE}


def simulate(ranks: int, iters: int, out: Path) -> None:
    subprocess.run([sys.executable, "-m", "forensics", "simulate", "--scenario", "fleet-1h",
                    "--ranks", str(ranks), "--iters", str(iters), "-o", str(out)],
                   check=True, capture_output=True, cwd=out.parent)


def as_v1(trace: Path) -> Path:
    """A copy of a simulated trace whose run record says version 1 (no ``model_arch`` or
    ``state_numbering``; the frames carry state names, read the same by both versions), so that
    a checkout older than format v2 (``--before``) reads the same bytes as ours."""
    out = trace.with_name("trace-v1.jsonl")
    if not out.exists():
        with open(trace, "rb") as f, open(str(out) + ".tmp", "wb") as o:
            rec = json.loads(f.readline())
            rec["version"] = 1
            rec.pop("model_arch", None)
            rec.pop("state_numbering", None)
            o.write(json.dumps(rec).encode() + b"\n")
            shutil.copyfileobj(f, o, 16 << 20)
        os.replace(str(out) + ".tmp", out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", default="2000,8000", help="two iteration counts, small,large")
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--kinds", default="stats,trace")
    ap.add_argument("--methods", default="ours,json.loads,pyarrow.json,polars,cat")
    ap.add_argument("--before", help="another checkout to time as 'before' (same command)")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (medians reported)")
    ap.add_argument("--workdir", help="keep the inputs, baseline scripts and outputs here")
    args = ap.parse_args()
    sizes = [int(x) for x in args.iters.split(",")]
    if len(sizes) != 2:
        ap.error("--iters takes two counts, e.g. 2000,8000")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="json-ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    outside = Path(tempfile.mkdtemp(prefix="cwd-"))      # no checkout here to shadow PYTHONPATH

    def env_for(tree: Path) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(tree), POLARS_MAX_THREADS="2")

    env = env_for(REPO)
    try:
        sims = {}
        for iters in sizes:
            sims[iters] = work / f"sim-{args.ranks}x{iters}"
            if not (sims[iters] / "trace.jsonl").exists():
                simulate(args.ranks, iters, sims[iters])
        peaks = {}
        def source(kind: str, iters: int) -> Path:
            src = sims[iters] / f"{kind}.jsonl"
            return as_v1(src) if kind == "trace" and args.before else src

        for kind in args.kinds.split(","):
            src = source(kind, sizes[1])
            mb = src.stat().st_size / 1e6
            print(f"--- {kind}: {src.name} of {args.ranks} ranks x {sizes[1]} iterations, "
                  f"{mb:.0f} MB", flush=True)
            names = args.methods.split(",")
            if args.before:
                names.insert(1, "before")
            methods = []
            for name in names:
                out = work / f"out-{kind}-{name}"

                def fresh(d: Path = out, mk: bool = name not in ("ours", "before")) -> None:
                    shutil.rmtree(d, ignore_errors=True)
                    if mk:
                        d.mkdir()
                if name in ("ours", "before"):
                    argv = [sys.executable, "-m", "forensics", "ingest", str(src), "-o", str(out),
                            "-q"]
                    menv = env_for(Path(args.before).resolve()) if name == "before" else env
                elif name == "cat":
                    argv, menv = ["sh", "-c", f"cat '{src}' > /dev/null"], env
                else:
                    script = work / f"baseline_{kind}_{name.replace('.', '_')}.py"
                    script.write_text(BASELINES[(kind, name)])
                    argv, menv = [sys.executable, str(script), str(src), str(out)], env
                methods.append(wp.Method(name, argv, env=menv,
                                         prepare=None if name == "cat" else fresh))
            wp.ready_scanners(env)
            wp.run_rounds(methods, args.rounds, cwd=str(outside))
            rows = {m.name: int(m.samples[-1].stdout.split()[-1]) for m in methods
                    if m.name not in ("ours", "before", "cat")}
            if rows:
                print("rows (stats rows / frames):", json.dumps(rows))
            print(wp.table(methods, mb), flush=True)
            small = wp.measure([sys.executable, "-m", "forensics", "ingest",
                                str(source(kind, sizes[0])), "-o",
                                str(work / f"out-{kind}-small"), "-q"], env, str(outside))
            large = next(m for m in methods if m.name == "ours").median("rss_mib")
            peaks[kind] = (small.rss_mib, large)
        print(f"--- peak RSS of ours, {sizes[1]} / {sizes[0]} iterations (input x"
              f"{sizes[1] / sizes[0]:.1f}; flat = 1.0)")
        for kind, (small, large) in peaks.items():
            print(f"{kind} ingest: {large / small:.2f}  ({small:.0f} -> {large:.0f} MiB)")
    finally:
        shutil.rmtree(outside, ignore_errors=True)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
