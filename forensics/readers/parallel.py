"""Reading the files of one ingest at once: on threads (the default), or one process per file.

A post-mortem's inputs are independent files (the executor log, the IterationStats JSON, the
request-state trace, per-rank files of each): each is read into a part dataset of its own
inside the writer's temporary directory, either on a thread of this process
(:func:`write_threaded`) or by a worker process (``python -m forensics.readers.parallel``, a
fresh interpreter: nothing of the caller's threads or ``__main__`` is inherited, so a script
calling :func:`forensics.readers.ingest` needs no ``if __name__ == "__main__"`` guard;
:func:`write_parallel`). The parts' Parquet files are then moved into the dataset in input
order (``DatasetWriter.adopt``: renamed, not rewritten), and the checks across trace files run
on them as a serial ingest runs them, so the dataset reads the same rows in the same order.

Threads are enough because the big readers spend their time outside the GIL (zstd, the
compiled JSON and log scanners, Arrow and Parquet), and they share one interpreter, pyarrow
and numba (~240 MiB a process). A reader that meets bad input raises (a worker process
reports) the typed error (class, message, file, line, hint): the first error in input order
wins, as in a serial ingest.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from forensics import errors
from forensics.cluster import in_worker_task
from forensics.dataset.schema import SCHEMAS
from forensics.dataset.tables import ArrowDataset
from forensics.dataset.writer import DatasetWriter
from forensics.errors import ForensicsError, InputError
from forensics.readers.files import Candidate, TraceRuns, ingest_file
from forensics.readers.meta import InputFingerprint
from forensics.readers.sources import content_size, recording_reads
from replay.heap import large_blocks_mapped, release_arrow, usable_cores
from replay.stage_clock import CLOCK

#: ``refuse(candidate, error)``: a file left out of an ingest that goes on without it.
Refuse = Callable[[Any, InputError], None]

#: Inputs holding less text than this in all (decompressed, estimated) are read on one thread:
#: they take moments.
THREADS_MIN_BYTES = 64 << 20
#: Most reader threads by default: two readers' memory at once (measured; docs/scale.md).
MAX_THREADS = 2


def _text_at_least(paths: list[Path], limit: int) -> bool:
    """Whether the files hold ``limit`` bytes of text, decompressed (sampled only as needed)."""
    if sum(_size(p) for p in paths) >= limit:
        return True
    total = 0
    for p in paths:
        total += content_size(p)
        if total >= limit:
            return True
    return False


def readers(jobs: int | None, paths: list[Path]) -> tuple[str, int]:
    """How to read the files ``paths``: ``("processes", n)`` for
    ``jobs`` > 1 (at most one per file), ``("serial", 1)`` for ``jobs`` = 1, and by default
    ``("threads", n)``: up to :data:`MAX_THREADS` threads, one per usable core, when there are
    several files holding at least :data:`THREADS_MIN_BYTES` of text (else, or inside a
    cluster's task, serial).

    Threads by default, measured on fleet-1h at 32 ranks x 100,000 iterations (reading alone,
    docs/scale.md): the files read in ~60 % of the serial wall time for the same CPU, in one
    process under 1 GiB; one process per file costs a second interpreter, pyarrow and numba
    (~240 MiB) and at the time took the post-mortem's tree from 616 to 1,117 MiB."""
    files = len(paths)
    if jobs is not None:
        n = max(1, min(int(jobs), files))
        return ("processes", n) if n > 1 else ("serial", 1)
    n = min(files, usable_cores(), MAX_THREADS)
    if n < 2 or in_worker_task() or not _text_at_least(paths, THREADS_MIN_BYTES):
        return "serial", 1
    return "threads", n


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _check_part(traces: Any, part: Path, source: str) -> None:
    """The cross-file trace checks of a serial ingest on a part's runs and frames, a row group
    at a time."""
    ds = ArrowDataset(part)
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
    cls = getattr(errors, str(report.get("error", "")), None)
    if isinstance(cls, type) and issubclass(cls, errors.ForensicsError):
        raise cls(report.get("message", ""), path=report.get("path"), line=report.get("line"),
                  hint=report.get("hint"))
    raise RuntimeError(f"reading {name} in a worker process failed:\n{stderr[-3000:]}")


def write_parallel(writer: Any, plan: list, traces: Any, advance: Callable[[int], None],
                   jobs: int, refuse: Refuse | None = None) -> list:
    """Read each ``(candidate, kind)`` of ``plan`` in a worker process, at most ``jobs`` at
    once, the largest files first (the longest sets the wall time), and move the parts into
    ``writer`` in input order. Returns the inputs' fingerprints in input order.

    ``refuse``: when given, a file whose reading raises an :class:`~forensics.errors.InputError`
    (a trace or stats file breaking its format) is handed to it and left out, the others go on
    (else the first such error is raised)."""
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
                    [sys.executable, "-m", "forensics.readers.parallel", os.fspath(cand.path),
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

                def reported(report=report, cand=cand, code=code, err_text=err_text):
                    if code != 0 or "fingerprint" not in report:
                        _raise_reported(report, cand.name, err_text)
                    return InputFingerprint(**report["fingerprint"])

                _take_part(writer, traces if several else None, scratch / f"{nxt:05d}", cand,
                           kind, refuse, reported, fingerprints)
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


def _take_part(writer: Any, traces: Any, part: Path, cand: Any, kind: str,
               refuse: Refuse | None, read: Callable[[], Any], fingerprints: list) -> None:
    """One file's part, in input order, whichever way it was read: ``read()`` gives its
    fingerprint or raises; a trace part is checked against the others (``traces``: None when
    the plan has one trace); then the part joins ``writer``, or the file is refused (``refuse``)
    or its error raised."""
    try:
        fp = read()
        if traces is not None and kind == "trace":
            _check_part(traces, part, cand.name)
    except InputError as e:
        if refuse is None:
            raise
        refuse(cand, e)
        return
    writer.adopt(part)
    fingerprints.append(fp)


class _Stopped(Exception):
    """Raised in a reader thread once an earlier file has failed: its rows are not needed."""


def write_threaded(writer: Any, plan: list, traces: Any, advance: Callable[[int], None],
                   threads: int, refuse: Refuse | None = None) -> list:
    """Read each ``(candidate, kind)`` of ``plan`` on a thread of its own, at most ``threads``
    at once, the largest files first, into a part dataset each; move the parts into ``writer``
    in input order. Returns the inputs' fingerprints in input order.

    The first error in input order is raised; readers still running then stop at their next
    block (their progress callback raises), and none is left writing when this returns.
    ``refuse``: as for :func:`write_parallel` (a file breaking its format is left out)."""
    scratch = writer.scratch()
    several = sum(1 for _, k in plan if k == "trace") > 1
    stop = threading.Event()
    lock = threading.Lock()

    def progress(n: int) -> None:
        if stop.is_set():
            raise _Stopped
        with lock:
            advance(n)

    def read(i: int):
        cand, kind = plan[i]
        try:
            return _read_part(cand, kind, scratch / f"{i:05d}", progress)
        finally:
            release_arrow()

    _load_scanners(plan)
    order = sorted(range(len(plan)), key=lambda i: -_size(plan[i][0].path))
    fingerprints: list = []
    pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="ingest")
    with large_blocks_mapped():
        try:
            futures = {i: pool.submit(read, i) for i in order}
            for i, (cand, kind) in enumerate(plan):
                _take_part(writer, traces if several else None, scratch / f"{i:05d}", cand,
                           kind, refuse, futures[i].result, fingerprints)
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
    return fingerprints


def _load_scanners(plan: list) -> None:
    """Load here, once, the compiled scanners the readers will choose: their first load links
    code with LLVM (through ctypes, without the GIL), which two threads must not do at once."""
    # The compiled scanners are imported only when an ingest reads on threads.
    from forensics.readers import json_scan, native_scan
    loaded: set = set()
    for cand, kind in plan:
        module = native_scan if kind == "log" else json_scan
        if module not in loaded and module.enabled(content_size(cand.path)):
            loaded.add(module)


def _read_part(cand: Any, kind: str, part: Path, progress: Callable[[int], None] | None) -> Any:
    """One input into its own dataset ``part`` (checks within the file as a serial ingest
    makes them); its fingerprint."""
    with DatasetWriter(part) as writer, recording_reads() as reads:
        fp = ingest_file(writer, cand, kind, TraceRuns(), progress, reads)
        with CLOCK.stage("dataset write"):
            writer.finish({"inputs": [fp.to_json()]})
    return fp


def _worker(path: str, name: str, kind: str, part: str) -> dict:
    """One input into its own dataset ``part`` (checks within the file as a serial ingest
    makes them); its fingerprint as JSON."""
    fp = _read_part(Candidate(Path(path), name), kind, Path(part), None)
    return {"fingerprint": {"name": fp.name, "size": fp.size, "xxh3_128": fp.xxh3_128,
                            "kind": fp.kind, "name_hex": fp.name_hex}}


def main(argv: list[str]) -> int:
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
