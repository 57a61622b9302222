"""Golden outputs of a checkout: every user-visible output on the samples, for a before/after check.

    cd CHECKOUT && PYTHONPATH=$PWD python benchmarks/golden.py --out /tmp/golden/a
    python benchmarks/golden.py --compare /tmp/golden/a /tmp/golden/b

The first form runs, with the checkout's own `forensics` (whatever is first on the path):
- `forensics postmortem` of every directory in traces/samples/ (report.md, report.html,
  findings.json, the SVGs, the exit code and stdout),
- `forensics replay --json` of each sample,
- `forensics ingest` of each sample: every table's rows, sorted, as CSV, and the dataset's meta,
- `forensics simulate` of three scenarios with fixed seeds, then the post-mortem of each,
- the same for ../shared/samples/real-logs when it exists (skipped otherwise),
and writes the results as text files under --out. Absolute paths, temporary directories and
timings are replaced by fixed tokens so two checkouts compare equal when they behave alike.
Each run starts with an empty per-user cache (``FORENSICS_CACHE_DIR`` in its temporary
directory): a cached result of earlier code or another process never stands in for this one's.
The second form prints every difference between two such directories (exit 1 when any).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path.cwd()
SIMULATED = [("nvbug-6438685", 7), ("surplus-17278", 11), ("healthy", 3)]
TIMING = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|seconds|sec)\b")
TIMING_KEYS = re.compile(r'("(?:[a-z_]*_)?(?:seconds|elapsed|duration_s|wall|time_s|ms)"\s*:\s*)[-0-9.e]+')


def _samples() -> list[tuple[str, Path]]:
    found = [(f"samples/{p.name}", p) for p in sorted((ROOT / "traces" / "samples").iterdir()) if p.is_dir()]
    real = ROOT.parent / "shared" / "samples" / "real-logs"
    if not real.is_dir():
        real = Path("/work/shared/samples/real-logs")
    if real.is_dir():
        found.append(("real-logs", real))
    else:
        print("golden: ../shared/samples/real-logs absent, skipped", file=sys.stderr)
    return found


def _normalise(text: str, tmp: Path) -> str:
    # ../shared as the checkout sees it (in a git worktree, often a symlink) and as found.
    for path, token in ((tmp, "<TMP>"), (ROOT, "<ROOT>"), (ROOT.parent / "shared", "<SHARED>"),
                        (Path("/work/shared"), "<SHARED>")):
        text = text.replace(str(path.resolve()), token).replace(str(path), token)
    text = re.sub(r"/tmp/[A-Za-z0-9_.\-]+", "<TMP>", text)
    text = TIMING_KEYS.sub(r"\1<T>", text)
    return TIMING.sub("<TIME>", text)


def _run(args: list[str], tmp: Path) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT),
                                        "FORENSICS_CACHE_DIR": str(tmp / ".user-cache")})
    return proc.returncode, _normalise(proc.stdout, tmp), _normalise(proc.stderr, tmp)


def _write(out: Path, name: str, text: str) -> None:
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _table_csv(directory: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq
    tables = [pq.read_table(p) for p in sorted(directory.glob("*.parquet"))]
    if not tables:
        return ""
    table = pa.concat_tables(tables, promote_options="permissive")
    header = ",".join(f"{f.name}:{f.type}" for f in table.schema)
    columns = [c.to_pylist() for c in table.columns]
    rows = sorted(",".join(json.dumps(v, default=str) for v in row) for row in zip(*columns))
    return "\n".join([header, *rows]) + "\n"


def _dataset(out: Path, prefix: str, ds: Path, tmp: Path) -> None:
    for table in sorted(p for p in ds.iterdir() if p.is_dir()):
        _write(out, f"{prefix}/{table.name}.csv", _normalise(_table_csv(table), tmp))
    for meta in sorted(ds.glob("*.json")):
        _write(out, f"{prefix}/{meta.name}", _normalise(meta.read_text(), tmp))


def _postmortem(out: Path, prefix: str, inputs: list[str], tmp: Path) -> None:
    report = tmp / "report"
    shutil.rmtree(report, ignore_errors=True)
    code, stdout, stderr = _run(["postmortem", *inputs, "-o", str(report)], tmp)
    _write(out, f"{prefix}/exit_stdout_stderr.txt", f"exit {code}\n--- stdout\n{stdout}--- stderr\n{stderr}")
    if report.is_dir():
        for f in sorted(p for p in report.iterdir() if p.is_file()):
            _write(out, f"{prefix}/{f.name}", _normalise(f.read_text(errors="replace"), tmp))


def collect(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for label, sample in _samples():
            print(f"golden: {label}", file=sys.stderr)
            inputs = [str(sample)]
            _postmortem(out, f"postmortem/{label}", inputs, tmp)
            code, stdout, stderr = _run(["replay", "--json", *inputs], tmp)
            _write(out, f"replay/{label}.json", f"exit {code}\n{stdout}--- stderr\n{stderr}")
            ds = tmp / "ingest.ds"
            shutil.rmtree(ds, ignore_errors=True)
            code, stdout, stderr = _run(["ingest", *inputs, "-o", str(ds), "--json"], tmp)
            _write(out, f"ingest/{label}/exit_stdout_stderr.txt", f"exit {code}\n{stdout}--- stderr\n{stderr}")
            if ds.is_dir():
                _dataset(out, f"ingest/{label}", ds, tmp)
        for scenario, seed in SIMULATED:
            print(f"golden: simulate {scenario}", file=sys.stderr)
            sim = tmp / f"sim-{scenario}"
            code, stdout, stderr = _run(["simulate", "--scenario", scenario, "--seed", str(seed),
                                         "-o", str(sim), "--json"], tmp)
            _write(out, f"simulate/{scenario}/simulate.txt", f"exit {code}\n{stdout}--- stderr\n{stderr}")
            for f in sorted(sim.iterdir()):
                data = f.read_bytes()
                _write(out, f"simulate/{scenario}/{f.name}.digest",
                       f"{len(data.splitlines())} lines sha256 {hashlib.sha256(data).hexdigest()}\n")
            _postmortem(out, f"simulate/{scenario}/postmortem", [str(sim)], tmp)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.relative_to(a) for p in a.rglob("*") if p.is_file()}
                   | {p.relative_to(b) for p in b.rglob("*") if p.is_file()})
    differing = 0
    for name in names:
        left, right = a / name, b / name
        if not left.exists() or not right.exists():
            print(f"only in {a if left.exists() else b}: {name}")
            differing += 1
            continue
        x, y = left.read_text().splitlines(), right.read_text().splitlines()
        if x != y:
            differing += 1
            sys.stdout.writelines(line + "\n" for line in
                                  difflib.unified_diff(x, y, f"{a}/{name}", f"{b}/{name}", lineterm=""))
    print(f"golden: {len(names)} files compared, {differing} differ")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("--out or --compare")
    collect(args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
