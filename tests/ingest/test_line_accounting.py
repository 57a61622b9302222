"""Every input line is accounted for exactly once (issue #2 item 5).

A line is the ``line`` of an iterations row, of a single-line event or of an unparsed row, or
lies inside the ``line``..``line_end`` range of exactly one multi-line event. Checked over the
shared real samples and over generated logs of every variant, plain and compressed, with block
sizes small enough that multi-line events cross block boundaries.
"""
from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.dataset.schema import EVENTS, ITERATIONS, UNPARSED
from forensics.readers import event_kinds
from forensics.readers.executor_log import parse_executor_log

from . import log_lines

_REPO = Path(__file__).resolve().parents[2]
#: ``../shared`` beside the repository (or beside the directory of worktrees holding it).
SHARED = next((p for p in (_REPO.parent / "shared", _REPO.parent.parent / "shared")
               if p.is_dir()), _REPO.parent / "shared")
REAL = SHARED / "samples" / "real-logs"


def collect(path: Path, **kw) -> tuple[pa.Table, pa.Table, pa.Table]:
    batches = list(parse_executor_log(path, path.name, **kw))
    for b in batches:
        assert b.iterations.schema.equals(ITERATIONS)
        assert b.events.schema.equals(EVENTS)
        assert b.unparsed.schema.equals(UNPARSED)
    return (pa.concat_tables([b.iterations for b in batches] or [ITERATIONS.empty_table()]),
            pa.concat_tables([b.events for b in batches] or [EVENTS.empty_table()]),
            pa.concat_tables([b.unparsed for b in batches] or [UNPARSED.empty_table()]))


def coverage(n_lines: int, it: pa.Table, ev: pa.Table, un: pa.Table) -> np.ndarray:
    """How many times each line 1..n is claimed (index 0 unused)."""
    seen = np.zeros(n_lines + 2, dtype=np.int64)
    for t in (it, un):
        np.add.at(seen, t.column("line").to_numpy(), 1)
    kinds = ev.column("kind").to_pylist()
    for start, end, kind in zip(ev.column("line").to_pylist(), ev.column("line_end").to_pylist(),
                                kinds):
        if kind == "input_truncated":
            assert start == end == n_lines + 1
            continue
        if kind in event_kinds.NOTES:   # marks a line another row claims
            assert 1 <= start == end <= n_lines
            continue
        assert 1 <= start <= end <= n_lines
        seen[start:end + 1] += 1
    return seen[1:n_lines + 1]


def assert_accounted(path: Path, n_lines: int, **kw) -> tuple[pa.Table, pa.Table, pa.Table]:
    it, ev, un = collect(path, **kw)
    seen = coverage(n_lines, it, ev, un)
    bad = np.flatnonzero(seen != 1) + 1
    assert len(bad) == 0, f"lines claimed != once: {bad[:20].tolist()} ({seen[bad[:20] - 1]})"
    return it, ev, un


def real_samples() -> list[Path]:
    return sorted(REAL.glob("*.txt")) if REAL.is_dir() else []


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/samples absent")
@pytest.mark.parametrize("path", real_samples(), ids=lambda p: p.name)
@pytest.mark.parametrize("block_bytes", [64, 16 << 20])
def test_real_sample_lines_accounted(path: Path, block_bytes: int):
    n = len(path.read_bytes().splitlines())
    _it, _ev, un = assert_accounted(path, n, block_bytes=block_bytes)
    # the '#' header is nobody's format: it stays verbatim in unparsed
    header = [i + 1 for i, ln in enumerate(path.read_text().splitlines()) if ln.startswith("#")]
    assert set(header) <= set(un.column("line").to_pylist())


def write(tmp_path: Path, text: str, compression: str, crlf: bool = False) -> Path:
    data = text.replace("\n", "\r\n").encode() if crlf else text.encode()
    if compression == "gzip":
        p = tmp_path / "log.gz"
        p.write_bytes(gzip.compress(data))
    elif compression == "zstd":
        p = tmp_path / "log.zst"
        p.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        p = tmp_path / "log.txt"
        p.write_bytes(data)
    return p


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), launcher=st.sampled_from(log_lines.LAUNCHERS),
       ranks=st.integers(1, 3), quote=st.booleans(), collector_tab=st.booleans(),
       block_bytes=st.sampled_from([97, 1000, 1 << 20]),
       compression=st.sampled_from([None, "gzip", "zstd"]), crlf=st.booleans(),
       threads=st.sampled_from([1, 2]))
def test_generated_lines_accounted(tmp_path_factory, seed, launcher, ranks, quote, collector_tab,
                                   block_bytes, compression, crlf, threads):
    rng = random.Random(seed)
    if launcher is None:
        ranks = 1
    streams = log_lines.random_streams(rng, 25, launcher=launcher, ranks=ranks, quote=quote,
                                       collector_tab=collector_tab)
    text, where = log_lines.render_interleaved(rng, streams)
    n = text.count("\n")
    path = write(tmp_path_factory.mktemp("acc"), text, compression, crlf)
    it, ev, _un = assert_accounted(path, n, block_bytes=block_bytes, threads=threads)
    # every iteration piece became an iteration row, and only those
    expected_iter = sorted(ls[0] for p, ls in where if p.kind == "iteration")
    assert sorted(it.column("line").to_pylist()) == expected_iter
    # every multi-line piece starts an event of its kind (or continues a split one)
    starts = {(s, k) for s, k in zip(ev.column("line").to_pylist(), ev.column("kind").to_pylist())}
    for p, ls in where:
        if p.kind in log_lines.MULTI_LINE_KINDS:
            assert (ls[0], p.kind) in starts, (p.kind, ls, p.lines[:2])


def test_empty_file_has_no_rows(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    it, ev, un = collect(p)
    assert it.num_rows == ev.num_rows == un.num_rows == 0


def test_last_line_without_newline_and_blank_lines_count(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"first\n\n\nlast")
    _it, _ev, un = assert_accounted(p, 4)
    assert un.column("line").to_pylist() == [1, 2, 3, 4]
    assert un.column("text").to_pylist() == ["first", "", "", "last"]
