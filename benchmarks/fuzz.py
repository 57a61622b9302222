"""Long fuzz runs of the readers (the suite runs a bounded one: tests/ingest/test_fuzz.py).

Each input is a mutated log built by ``tests/ingest/fuzz_lines.py`` (every documented line
variant, the issue-13 log-stack shapes, the shared real samples when ``../shared`` is present),
parsed with a random block size and thread count; checked: no exception, every line accounted
for exactly once; every ``--load-every``-th input is also ingested and loaded with
``forensics.load`` (every table to pandas). A share ``--json-share`` of the inputs are stats or
trace JSON Lines instead (``tests/ingest/fuzz_json.py``: lone surrogate escapes, mid-line cuts,
plain or gzip), ingested on a random reader path; checked: no exception but a trace cut before
its run record, one ``input_truncated`` event exactly when cut mid-line. Failing inputs are
saved under ``--out``.
Then the suite's property tests (``pytest -m hypothesis``) run under the ``long`` hypothesis
profile of ``tests/conftest.py`` (1,000 examples each, where the suite's default runs 15);
``--no-properties`` skips them.

Usage: ``nice python benchmarks/fuzz.py --minutes 10``; prints the inputs and lines tried and
the failures found (exit status 1 if any, or if a property fails).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))   # the repository: tests.ingest.fuzz_lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--load-every", type=int, default=10)
    ap.add_argument("--json-share", type=float, default=0.25)
    ap.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    ap.add_argument("--no-properties", dest="properties", action="store_false",
                    help="skip the property tests under the long hypothesis profile")
    args = ap.parse_args()

    import forensics
    from forensics.dataset.schema import TABLES
    from forensics.errors import TraceFormatError
    from forensics.readers import json_scan
    from tests.ingest import fuzz_json, fuzz_lines
    from tests.ingest.test_line_accounting import SHARED, assert_accounted

    samples = fuzz_lines.sample_lines(SHARED)
    rng = random.Random(args.seed)
    stop = time.monotonic() + args.minutes * 60
    inputs = lines = loads = 0
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.log"
        while time.monotonic() < stop:
            seed = rng.randrange(2**32)
            r = random.Random(seed)
            if r.random() < args.json_share:
                kind = r.choice(["stats", "trace"])
                data, cut = fuzz_json.fuzz_json(r, kind, n_lines=r.randrange(1, 60))
                jpath = Path(d) / f"fuzz.{kind}.jsonl"
                jpath.write_bytes(data)
                os.environ[json_scan.PATH_ENV] = r.choice(["", "native", "reference"])
                try:
                    try:
                        forensics.ingest([jpath], Path(d) / "ds", kind=kind)
                    except TraceFormatError as e:
                        if kind != "trace" or "run record" not in str(e):
                            raise
                    else:
                        ds = forensics.load(Path(d) / "ds")
                        for t in TABLES:
                            getattr(ds, t)
                        got = int((ds.events["kind"] == "input_truncated").sum())
                        if got != int(cut):
                            raise AssertionError(f"{got} input_truncated events, cut={cut}")
                except Exception:  # noqa: BLE001 - a fuzz finding, saved with its input
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"{seed}.{kind}.jsonl").write_bytes(data)
                    (args.out / f"{seed}.txt").write_text(traceback.format_exc())
                    failures.append(f"seed {seed}: {traceback.format_exc().splitlines()[-1]}")
                finally:
                    os.environ.pop(json_scan.PATH_ENV, None)
                inputs += 1
                continue
            data = fuzz_lines.fuzz_log(r, samples if r.random() < 0.5 else (),
                                       n_lines=r.randrange(1, 80))
            path.write_bytes(data)
            n = fuzz_lines.n_lines(data)
            try:
                assert_accounted(path, n, block_bytes=r.choice([61, 997, 1 << 20]),
                                 threads=r.choice([1, 2]), max_line_bytes=4096)
                if inputs % args.load_every == 0:
                    forensics.ingest([path], Path(d) / "ds", kind="log")
                    ds = forensics.load(Path(d) / "ds")
                    for t in TABLES:
                        getattr(ds, t)
                    loads += 1
            except Exception:  # noqa: BLE001 - a fuzz finding, saved with its input
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{seed}.log").write_bytes(data)
                (args.out / f"{seed}.txt").write_text(traceback.format_exc())
                failures.append(f"seed {seed}: {traceback.format_exc().splitlines()[-1]}")
            inputs += 1
            lines += n
    print(f"{inputs} inputs ({lines} lines, {loads} ingested and loaded) in {args.minutes} min; "
          f"{len(failures)} failure(s)" + (f", saved under {args.out}" if failures else ""))
    for f in failures[:20]:
        print(" ", f)
    status = 1 if failures else 0
    if args.properties:
        status = max(status, properties())
    return status


def properties() -> int:
    """The suite's property tests at depth: pytest's exit status, 0 when all pass."""
    repo = _HERE.parent
    return int(pytest.main([str(repo / "tests"), "-q", "-p", "no:cacheprovider", "-m", "hypothesis",
                            "--hypothesis-profile", "long", "--rootdir", str(repo)]))


if __name__ == "__main__":
    sys.exit(main())
