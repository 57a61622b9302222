"""No input crashes the ingest (issue 13 item 6): numbers too large for their column stay
verbatim, repeated fields load, NUL-padded logs read as text, a very long line costs linear
time and bounded memory. Datasets are read through ``forensics.load`` only."""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

import forensics
from forensics.readers.executor_log import parse_executor_log

from .test_line_accounting import assert_accounted

PRE = "[11/30/2026-12:00:01] [TRT-LLM] [RANK 0] [I] "
ITER = ("iter = 7, global_rank = 1, rank = 1, currank_total_requests = 2/9, "
        "host_step_time = 1.5ms, prev_device_step_time = 1.25ms, timestamp = 2026-11-30 12:00:01")


def ingest_text(tmp_path: Path, text: str | bytes, name: str = "x.log", kind: str | None = "log"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    forensics.ingest([p], tmp_path / "ds", kind=kind)
    return forensics.load(tmp_path / "ds")


@pytest.mark.parametrize("line", [
    "99999999999: x",
    "99999999999: " + PRE + ITER,
    "[11/30/2026-12:00:01] [TRT-LLM] [RANK 2147483648] [I] hello",
    "[TensorRT-LLM][RANK 2147483648][WARNING] hello",
    "[1,99999999999]<stderr>:hello",
])
def test_a_prefix_number_too_large_for_its_column_leaves_the_line_verbatim(tmp_path, line):
    ds = ingest_text(tmp_path, line + "\n")
    assert ds.unparsed.text.tolist() == [line]
    assert len(ds.iterations) == len(ds.events) == 0


def test_a_torch_rank_too_large_stays_in_the_event_text(tmp_path):
    ds = ingest_text(tmp_path, "[11/30/2026-12:00:01] [TRT-LLM] [I] [_torch][RANK 99999999999] hi\n")
    ev = ds.events.iloc[0]
    assert ev.kind == "log" and ev["rank"] is pd_na() and ev.text == "[_torch][RANK 99999999999] hi"


def test_a_rank_too_large_in_a_kv_transfer_error_stays_in_text(tmp_path):
    body = "Disagg KV cache transfer error: rank=2147483648, local_err_count=99999999999999999999"
    ds = ingest_text(tmp_path, "[11/30/2026-12:00:01] [TRT-LLM] [E] " + body + "\n")
    ev = ds.events.iloc[0]
    assert ev.kind == "kv_transfer_error"
    assert ev["rank"] is pd_na() and ev.error_count is pd_na()
    assert ev.text == body


def pd_na():
    import pandas as pd
    return pd.NA


def test_a_twenty_digit_traceback_line_number_stays_in_text(tmp_path):
    text = ('Traceback (most recent call last):\n'
            '  File "/x/tensorrt_llm/a.py", line 99999999999999999999, in f\n'
            "    g()\nValueError: x\n")
    ds = ingest_text(tmp_path, text)
    ev = ds.events.iloc[0]
    assert ev.kind == "traceback" and ev.innermost_function == "f"
    assert ev.innermost_line is pd_na()
    assert "line 99999999999999999999" in ev.text


def test_a_huge_rank_in_a_trace_note_record_stays_in_the_record(tmp_path):
    run = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
           "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": False,
           "overlap_scheduler": False, "encoder_decoder": False, "build": "x"}
    note = {"kind": "note", "rank": 3_000_000_000, "iter": 10 ** 30, "message": "hi"}
    text = json.dumps(run) + "\n" + json.dumps(note) + "\n"
    ds = ingest_text(tmp_path, text, "t.jsonl", kind=None)
    ev = ds.events.iloc[0]
    assert ev.kind == "trace_note" and ev["rank"] is pd_na() and ev.iter is pd_na()


def test_repeated_fields_keep_the_first_and_the_rest_in_extra(tmp_path):
    line = PRE + ITER + ", foo = 1, foo = 2, global_rank = 5, foo = 3"
    ds = ingest_text(tmp_path, line + "\n")
    row = ds.iterations.iloc[0]
    assert row["rank"] == 1 and row["iter"] == 7
    assert row.extra == {"foo": "1", "foo#2": "2", "global_rank": "5", "foo#3": "3"}


def test_a_log_starting_with_nuls_is_read_as_text_and_the_run_reported(tmp_path):
    text = b"\0" * 100_000 + (PRE + ITER + "\n" + PRE + "hello\n").encode()
    ds = ingest_text(tmp_path, text, kind=None)       # also without --kind log
    assert ds.iterations["iter"].tolist() == [7]
    ev = ds.events
    assert sorted(ev.kind.tolist()) == ["log", "nul_bytes"]
    note = ev[ev.kind == "nul_bytes"].iloc[0]
    assert note.line == 1 and "100000 NUL bytes" in note.message
    assert ds.meta["refused"] == []


def test_a_file_of_nuls_only_is_still_binary(tmp_path):
    p = tmp_path / "blob.out"
    p.write_bytes(b"\0" * 100)
    with pytest.raises(forensics.errors.InputError):
        forensics.ingest([p], tmp_path / "ds")


def test_nul_runs_inside_a_log_leave_every_line_accounted(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(("a\n" + PRE).encode() + b"\0\0" + (ITER + "\n\0\0\0\nb\n").encode())
    it, ev, un = assert_accounted(p, 4)
    assert it.column("line").to_pylist() == [2]
    assert sorted(ev.column("line").to_pylist()) == [2, 3]
    assert un.column("text").to_pylist() == ["a", "", "b"]


@pytest.mark.parametrize("compressed", [False, True])
def test_a_line_longer_than_the_limit_is_one_event_with_its_head(tmp_path, compressed):
    long = "x" * 5000
    text = f"{PRE}{ITER}\n{long}\n{PRE}{ITER}\nTraceback (most recent call last):\n{long}"
    p = tmp_path / ("x.log.gz" if compressed else "x.log")
    p.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    it, ev, un = assert_accounted(p, 5, block_bytes=256, max_line_bytes=1000)
    assert it.column("line").to_pylist() == [1, 3]
    kinds = dict(zip(ev.column("line").to_pylist(), ev.column("kind").to_pylist()))
    assert kinds[2] == "long_line" and kinds[5] == "long_line"
    row = next(r for r in ev.to_pylist() if r["line"] == 2)
    assert row["text"] == "x" * 1000 and "5000 bytes" in row["message"]


def test_a_long_line_costs_linear_time(tmp_path):
    """Reading a 4 MB line in 4 KB blocks must not copy the carry per read (that was
    quadratic: 1000 reads of a growing carry)."""
    def seconds(n: int) -> float:
        p = tmp_path / f"l{n}.log"
        p.write_bytes(b"y" * n + b"\nend\n")
        t = time.process_time()
        batches = list(parse_executor_log(p, "l", block_bytes=4096, max_line_bytes=1 << 30))
        assert sum(b.unparsed.num_rows for b in batches) == 2
        return time.process_time() - t
    small, big = seconds(1 << 20), seconds(8 << 20)
    assert big < 8 * small * 3 + 0.5, (small, big)


def test_nul_runs_after_text_read_as_a_log_when_the_kind_is_forced(tmp_path):
    text = (PRE + "before\n").encode() + b"\0" * 500 + (PRE + ITER + "\n").encode()
    p = tmp_path / "x.log"
    p.write_bytes(text)
    with pytest.raises(forensics.errors.InputError):      # sniffed: NULs mean binary
        forensics.ingest([p], tmp_path / "ds")
    forensics.ingest([p], tmp_path / "ds", kind="log")
    ds = forensics.load(tmp_path / "ds")
    assert ds.iterations["line"].tolist() == [2]
    assert sorted(ds.events.kind.tolist()) == ["log", "nul_bytes"]
