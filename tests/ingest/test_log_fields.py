"""The iteration-line field table (``forensics.dataset.log_fields``): every field goes from the
simulator's writer through each reader unchanged, in every format; the table's rules hold.

Readers: the reference reader (``iteration_line.parse``) and the compiled scanner
(``native_scan``). The expected row is
the value the writer was given, never a reader's output.
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forensics.dataset import log_fields
from forensics.dataset.log_fields import DECIMAL, INT, RATIO, TIME, Field
from forensics.dataset.schema import ITERATIONS
from forensics.readers import iteration_line, native_scan
from forensics.simulate.log_writer import iteration_line as write_line

REPO = Path(__file__).resolve().parents[2]
LOG_TIME = dt.datetime(2026, 5, 4, 10, 0, 1)
PREFIX = "[05/04/2026-10:00:01] [TRT-LLM] [RANK 3] [I] "


def _value(f: Field):
    """A strategy of (text as printed without unit, expected column values) for field ``f``."""
    na = st.just(("N/A", (None,) * len(f.columns)))
    if f.kind == INT:
        return st.one_of(na, st.integers(0, 10 ** f.digits - 1).map(lambda v: (str(v), (v,))))
    if f.kind == DECIMAL:
        def text(parts):
            whole, frac = parts
            t = str(whole) if frac is None else f"{whole}.{frac}"
            return t, (float(t),)
        return st.one_of(na, st.tuples(st.integers(0, 10 ** 6),
                                       st.none() | st.from_regex(r"\A[0-9]{1,6}\Z")).map(text))
    if f.kind == TIME:
        return st.datetimes(dt.datetime(1971, 1, 1), dt.datetime(2999, 12, 31)).map(
            lambda t: (t.strftime("%Y-%m-%d %H:%M:%S"), (t.replace(microsecond=0),)))
    assert f.kind == RATIO
    n = st.integers(0, 10 ** f.digits - 1)
    return st.tuples(n, n).map(lambda ab: (f"{ab[0]}/{ab[1]}", ab))


@st.composite
def lines(draw):
    """(format, iter, text of the line without prefix, expected columns)."""
    fmt = draw(st.sampled_from(log_fields.FORMATS))
    it = draw(st.integers(0, 10 ** 18 - 1))
    values, expected = {}, {c: None for c in log_fields.column_types()}
    for f in log_fields.printed(fmt):
        text, cols = draw(_value(f))
        values[f.name] = text
        expected.update(zip(f.columns, cols, strict=True))
    if expected["rank"] is None:   # no global_rank: the prefix's rank
        expected["rank"] = 3
    expected.update(iter=it, format=fmt)
    return fmt, it, write_line(fmt, it, values), expected


def _check(table: pa.Table, expected: dict, reader: str) -> None:
    assert table.num_rows == 1, reader
    row = table.to_pylist()[0]
    got = {c: row[c] for c in expected}
    assert got == expected, reader
    assert row["extra"] == [], reader


def _reference(text: str) -> pa.Table:
    kw = dict(source="x.log", line=pa.array([1]), rank=pa.array([3], pa.int32()),
              log_time=pa.array(["05/04/2026-10:00:01"]))
    return iteration_line.parse(pa.array([text]), **kw)


@given(lines())
def test_every_field_reaches_the_reference_reader_unchanged(case):
    fmt, _it, text, expected = case
    _check(_reference(text), expected, f"{fmt} reference: {text}")


@pytest.mark.skipif(native_scan.kernel() is None, reason="numba not importable")
@given(lines())
def test_every_field_reaches_the_compiled_scanner_unchanged(case):
    fmt, _it, text, expected = case
    block = (PREFIX + text + "\n").encode()
    scan = native_scan.scan_block(block)
    assert scan is not None and len(scan.fast_line) == 1, f"{fmt} not fast: {text}"
    table = native_scan.iterations(scan, block, "x.log")
    _check(table, expected, f"{fmt} compiled: {text}")
    assert table.column("log_time").to_pylist() == [LOG_TIME]


def test_every_format_prints_the_fields_of_section_8():
    """The writer's shapes, field by field (docs/adp-executor.md section 8)."""
    names = {fmt: [f.name + f.sep.strip() for f in log_fields.printed(fmt)]
             for fmt in log_fields.FORMATS}
    states = ["num_ctx_requests:", "num_ctx_tokens:", "num_generation_tokens:"]
    v1 = ["global_rank=", "rank=", "currank_total_requests=", "elapsed_time=", "timestamp="]
    assert names["V1"] == v1 + states
    assert names["V2"] == v1 + ["num_scheduled_requests:"] + states
    assert names["V3"] == ["global_rank=", "rank=", "currank_total_requests=", "host_step_time=",
                           "prev_device_step_time=", "timestamp=", "num_scheduled_requests:",
                           *states]
    v4 = ["global_rank=", "rank=", "num_scheduled_requests=", "kv_cache_util=",
          "currank_total_requests=", "host_step_time=", "prev_device_step_time=", "timestamp=",
          *states]
    assert names["V4"] == v4
    assert names["V5"] == v4[:3] + ["adp_dummy_ctx_tokens=", "adp_dummy_gen_tokens="] + v4[3:]


def test_the_writer_prints_a_v2_line_as_upstream():
    values = {"global_rank": 1, "rank": 1, "elapsed_time": 0.5, "currank_total_requests": "3/4",
              "timestamp": "2025-03-01 10:00:00", "num_scheduled_requests": 2,
              "num_ctx_requests": 0, "num_ctx_tokens": 0, "num_generation_tokens": 2}
    assert write_line("V2", 7, values) == (
        "iter = 7, global_rank = 1, rank = 1, currank_total_requests = 3/4, elapsed_time = 0.5s, "
        "timestamp = 2025-03-01 10:00:00, num_scheduled_requests: 2, states = "
        "{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 2}")


def test_the_format_a_separator_implies():
    """num_scheduled_requests: ``": "`` came with V2 (PR #3914), ``" = "`` with V4 (#14206)."""
    implied = log_fields.implied_formats()
    assert implied["num_scheduled_requests"] == (1, 3)
    assert implied["kv_cache_util"] == (3, 3)
    assert implied["adp_dummy_gen_tokens"] == (4, 4)
    assert implied["host_step_time"] == (2, 2)
    assert implied["global_rank"] == (0, 0)


def test_the_columns_are_the_iterations_schema():
    for col, typ in log_fields.column_types().items():
        assert ITERATIONS.field(col).type == typ, col


@pytest.mark.parametrize("bad, message", [
    (Field("x_count", "x_count", INT, pa.int32(), digits=10), "digits"),
    (Field("x_count", "x_count", INT, pa.int64(), digits=18, sep=" - "), "separator"),
    (Field("x_ms", "x_ms", DECIMAL, pa.float64(), digits=3), "digits are for integers"),
    (Field("rank", "other", INT, pa.int32(), digits=9), "disagree"),
    (Field("a_name_longer_than_twenty_four", "c", INT, pa.int64(), digits=18), "24"),
    (Field("when", "when", TIME, pa.timestamp("us")), "exactly one time"),
])
def test_the_table_refuses_what_the_readers_cannot_read(bad, message):
    table = (*log_fields.ITERATION_FIELDS[:2], bad, *log_fields.ITERATION_FIELDS[2:])
    with pytest.raises(ValueError, match=message):
        log_fields.check(table)


def test_a_states_key_must_come_last():
    table = (*log_fields.ITERATION_FIELDS, Field("x_count", "x_count", INT, pa.int64(), digits=18))
    with pytest.raises(ValueError, match="states keys come last"):
        log_fields.check(table)


#: The row docs/adding-a-log-field.md adds (a hypothetical V5 field).
NEW_ROW = ('    Field("num_paused_requests",    "num_paused_requests",      INT,     _i64, "", 18,'
           ' EQ,    "V5", pr="#99999"),\n')
ANCHOR = '    Field("kv_cache_util",'


@pytest.mark.slow
def test_a_new_field_is_one_line(tmp_path):
    """A copy of the package with one row added to the table: the simulator writes the field,
    the reference reader and the compiled scanner read it into a new column of its own.

    Of the scanner only :func:`scan_kernel.line` is compiled, the function that reads a line
    with the table's lookup arrays (a third of the whole scanner's compile): its row goes
    through ``native_scan.iterations`` as a scanned block's rows do."""
    for pkg in ("forensics", "replay"):
        shutil.copytree(REPO / pkg, tmp_path / pkg,
                        ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.nb?"))
    table = tmp_path / "forensics" / "dataset" / "log_fields.py"
    text = table.read_text()
    assert text.count(ANCHOR) == 1
    table.write_text(text.replace(ANCHOR, NEW_ROW + ANCHOR))
    script = f"""
import importlib.util
import numpy as np
import pyarrow as pa
from forensics.readers import iteration_line, native_scan
from forensics.simulate.log_writer import iteration_line as write_line
values = {{"global_rank": 0, "rank": 0, "num_scheduled_requests": 2, "adp_dummy_ctx_tokens": 0,
          "adp_dummy_gen_tokens": 1, "num_paused_requests": 4, "kv_cache_util": "0.5",
          "currank_total_requests": "1/2", "host_step_time": "3.5", "prev_device_step_time": "N/A",
          "timestamp": "2026-08-01 00:00:00", "num_ctx_requests": 0, "num_ctx_tokens": 0,
          "num_generation_tokens": 1}}
text = write_line("V5", 9, values)
assert "adp_dummy_gen_tokens = 1, num_paused_requests = 4, kv_cache_util" in text, text
kw = dict(source="x", line=pa.array([1]), rank=pa.array([0], pa.int32()),
          log_time=pa.array(["08/01/2026-00:00:00"]))
rows = [iteration_line.parse(pa.array([text]), **kw).to_pylist()[0]]
if importlib.util.find_spec("numba") is not None:
    from forensics.readers.compiled import scan_kernel
    block = ("[08/01/2026-00:00:00] [TRT-LLM] [RANK 0] [I] " + text + "\\n").encode()
    ni, nf = native_scan.N_INTS, native_scan.N_FLOATS
    ints, floats = np.zeros((ni, 1), np.int64), np.zeros((nf, 1))
    bits, fspan = np.zeros(1, np.int64), np.zeros((2 * nf, 1), np.int64)
    fmt, sev = np.zeros(1, np.uint8), np.zeros(1, np.uint8)
    scratch = np.full(native_scan.SCRATCH, -1, np.int64)
    end = scan_kernel.line(np.frombuffer(block, np.uint8), 0, len(block), 0, ints, floats,
                           bits, fspan, fmt, sev, scratch)
    assert end == len(block) - 1, end   # a fast line: every name known, read to its end
    z64, z8 = np.zeros(1, np.int64), np.zeros(1, np.uint8)   # line 0, a fast one (shape 0)
    scan = native_scan.Scan(1, z64, np.array([end]), z64, ints, floats, bits, fspan,
                            fmt, sev, z8, z64, z64, z8)
    rows.append(native_scan.iterations(scan, block, "x").to_pylist()[0])
for row in rows:
    assert row["num_paused_requests"] == 4 and row["extra"] == [], row
    assert row["format"] == "V5" and row["adp_dummy_gen_tokens"] == 1, row
print(len(rows))
"""
    env = dict(os.environ, PYTHONPATH=str(tmp_path), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               FORENSICS_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == ("2" if importlib.util.find_spec("numba") else "1")
