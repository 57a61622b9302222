"""Fuzzing the log reader (issue 13 item 7), bounded to about a minute: mutations of every
line variant and of the shared real samples (when ``../shared`` is present) never raise, keep
every line accounted for exactly once, and give a dataset ``forensics.load`` reads whole.
Long runs: ``python benchmarks/fuzz.py --minutes 10``."""
from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics.dataset.schema import TABLES

from . import fuzz_lines
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
