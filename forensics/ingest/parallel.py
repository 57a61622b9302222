"""Reading the files of one ingest at once, one process per file.

A post-mortem's inputs are independent files (the executor log, the IterationStats JSON, the
request-state trace, per-rank files of each): each is read by a worker process of its own
(``python -m forensics.ingest.parallel``, a fresh interpreter: nothing of the caller's threads
or ``__main__`` is inherited, so a script calling :func:`forensics.ingest.ingest` needs no
``if __name__ == "__main__"`` guard) into a part dataset inside the writer's temporary
directory. The parts' Parquet files are then moved into the dataset in input order
(``DatasetWriter.adopt``: renamed, not rewritten), and the checks across trace files run on
them as a serial ingest runs them, so the dataset reads the same rows in the same order.

A worker that meets bad input reports the typed error (class, message, file, line, hint),
raised again here: the first error in input order wins, as in a serial ingest.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def ingest_jobs(jobs: int | None, files: int) -> int:
    """Processes to read ``files`` inputs with: ``jobs`` when given (at most one per file),
    else 1.

    One reader by default, measured with ``benchmarks/postmortem.py --one-reader`` on
    fleet-1h: at 32 ranks x 100,000 iterations two readers at once took the post-mortem from
    683 to 1,140 MiB (both readers resident) and 119 to 137 s CPU (two interpreters) for 10 %
    less wall time (102 -> 92 s); one reader keeps peak RSS flat in iterations (642 MiB at
    20,000). ``jobs`` > 1 is for a machine with memory to spare and idle cores."""
    if jobs is None:
        return 1
    return max(1, min(int(jobs), files))


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _check_part(traces: Any, part: Path, source: str) -> None:
    """The cross-file trace checks of a serial ingest on a part's runs and frames, a row group
    at a time."""
    import pyarrow.parquet as pq

    from forensics.dataset.schema import SCHEMAS
    from forensics.dataset.store import Dataset

    ds = Dataset(part)
    runs = ds.arrow("runs")
    for i in range(runs.num_rows):
        first = runs.slice(i, 1)
        traces.check(types.SimpleNamespace(runs=first, frames=SCHEMAS["frames"].empty_table()),
                     source)
        for f in ds.files("frames", first.column("run")[0].as_py()):
            pf = pq.ParquetFile(f)
            for g in range(pf.num_row_groups):
                frames = pf.read_row_group(g, columns=["iter", "rank", "line"])
                traces.check(types.SimpleNamespace(runs=runs.slice(0, 0), frames=frames), source)


def _raise_reported(report: dict, name: str, stderr: str) -> None:
    from forensics import errors

    cls = getattr(errors, str(report.get("error", "")), None)
    if isinstance(cls, type) and issubclass(cls, errors.ForensicsError):
        raise cls(report.get("message", ""), path=report.get("path"), line=report.get("line"),
                  hint=report.get("hint"))
    raise RuntimeError(f"reading {name} in a worker process failed:\n{stderr[-3000:]}")


def write_parallel(writer: Any, plan: list, traces: Any, advance: Callable[[int], None],
                   jobs: int) -> list:
    """Read each ``(candidate, kind)`` of ``plan`` in a worker process, at most ``jobs`` at
    once, the largest files first (the longest sets the wall time), and move the parts into
    ``writer`` in input order. Returns the inputs' fingerprints in input order."""
    from forensics.ingest.meta import InputFingerprint

    scratch = writer.scratch()
    # Checks across files only matter with several traces (one is checked as it is read).
    several = sum(1 for _, k in plan if k == "trace") > 1
    todo = sorted(range(len(plan)), key=lambda i: -_size(plan[i][0].path))
    running: dict[int, tuple[subprocess.Popen, Any]] = {}
    finished: dict[int, tuple[int, str, str]] = {}
    fingerprints: list = []
    nxt = 0
    try:
        while nxt < len(plan):
            while todo and len(running) < jobs:
                i = todo.pop(0)
                cand, kind = plan[i]
                err = open(scratch / f"{i:05d}.err", "w+")
                running[i] = (subprocess.Popen(
                    [sys.executable, "-m", "forensics.ingest.parallel", os.fspath(cand.path),
                     cand.name, kind, os.fspath(scratch / f"{i:05d}")],
                    stdout=subprocess.PIPE, stderr=err, text=True), err)
            for i, (proc, err) in list(running.items()):
                if proc.poll() is not None:
                    out = proc.stdout.read()
                    proc.stdout.close()
                    err.seek(0)
                    finished[i] = (proc.returncode, out, err.read())
                    err.close()
                    del running[i]
            while nxt in finished:        # input order: the first error a serial ingest meets
                code, out, err_text = finished.pop(nxt)
                cand, kind = plan[nxt]
                report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
                if code != 0 or "fingerprint" not in report:
                    _raise_reported(report, cand.name, err_text)
                part = scratch / f"{nxt:05d}"
                if several and kind == "trace":
                    _check_part(traces, part, cand.name)
                writer.adopt(part)
                fingerprints.append(InputFingerprint(**report["fingerprint"]))
                advance(_size(cand.path))
                nxt += 1
            if running and nxt < len(plan) and nxt not in finished:
                time.sleep(0.02)
    finally:
        for proc, err in running.values():   # only on an error: the rest is not needed
            proc.kill()
            proc.wait()
            err.close()
    return fingerprints


def _worker(path: str, name: str, kind: str, part: str) -> dict:
    """One input into its own dataset ``part`` (checks within the file as a serial ingest
    makes them); its fingerprint as JSON."""
    from forensics.dataset.store import DatasetWriter
    from forensics.ingest import _Candidate, _ingest_file, _TraceRuns
    from forensics.ingest.sources import recording_reads

    cand = _Candidate(Path(path), name)
    with DatasetWriter(part) as writer, recording_reads() as reads:
        fp = _ingest_file(writer, cand, kind, _TraceRuns(), None, reads)
        writer.finish({"inputs": [fp.to_json()]})
    return {"fingerprint": {"name": fp.name, "size": fp.size, "xxh3_128": fp.xxh3_128,
                            "kind": fp.kind, "name_hex": fp.name_hex}}


def main(argv: list[str]) -> int:
    from forensics.errors import ForensicsError

    try:
        report = _worker(*argv)
    except ForensicsError as e:
        report = {"error": type(e).__name__, "message": e.message, "path": e.path,
                  "line": e.line, "hint": e.hint}
        print(json.dumps(report))
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
