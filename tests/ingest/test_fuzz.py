"""Fuzzing the readers (issue 13 item 7, issue 25), bounded to about a minute: mutations of every
log line variant and of the shared real samples (when ``../shared`` is present) never raise, keep
every line accounted for exactly once, and give a dataset ``forensics.load`` reads whole; stats
and trace JSON Lines with lone surrogate escapes and mid-line cuts read on every reader path.
Long runs: ``python benchmarks/fuzz.py --minutes 10``."""
from __future__ import annotations

import contextlib
import os
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics.dataset.schema import TABLES
from forensics.errors import TraceFormatError
from forensics.readers import json_scan

from . import fuzz_json, fuzz_lines
from .test_line_accounting import SHARED, assert_accounted

SAMPLES = fuzz_lines.sample_lines(SHARED)


@settings(suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), block=st.sampled_from([61, 997, 1 << 20]),
       threads=st.sampled_from([1, 2]), real=st.booleans())
def test_mutated_logs_parse_stay_accounted_and_load(seed, block, threads, real):
    rng = random.Random(seed)
    data = fuzz_lines.fuzz_log(rng, SAMPLES if real else (), n_lines=rng.randrange(1, 50))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.log"
        path.write_bytes(data)
        assert_accounted(path, fuzz_lines.n_lines(data), block_bytes=block, threads=threads,
                         max_line_bytes=4096)
        forensics.ingest([path], Path(d) / "ds", kind="log")
        ds = forensics.load(Path(d) / "ds")
        for t in TABLES:
            getattr(ds, t)   # every table converts to pandas (no duplicate map keys, ...)


@settings(suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["stats", "trace"]),
       path=st.sampled_from(["default", "native", "reference"]))
def test_mutated_json_lines_never_raise_but_a_format_error(seed, kind, path):
    """Surrogate escapes and mid-line cuts (plain and gzip): rows or ``unparsed``, a cut named
    by an ``input_truncated`` event; only a trace cut before its run record is an error, which
    names the file."""
    rng = random.Random(seed)
    data, cut = fuzz_json.fuzz_json(rng, kind, n_lines=rng.randrange(1, 30))
    env = {} if path == "default" else {json_scan.PATH_ENV: path}
    with tempfile.TemporaryDirectory() as d, _env(env):
        p = Path(d) / f"{kind}.jsonl"
        p.write_bytes(data)
        try:
            forensics.ingest([p], Path(d) / "ds", kind=kind)
        except TraceFormatError as e:
            assert kind == "trace" and e.path == str(p) and "run record" in str(e)
            return
        ds = forensics.load(Path(d) / "ds")
        for t in TABLES:
            getattr(ds, t)
        truncated = (ds.events["kind"] == "input_truncated").sum()
        assert truncated == (1 if cut else 0)


@contextlib.contextmanager
def _env(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
