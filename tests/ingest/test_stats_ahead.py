"""The stats reader's compiled path: blocks lent from the reader's buffer (a view, not a copy)
give the rows a copy gives, and the batches read ahead on a thread (``stats_json._ahead``)
arrive in order, with an error after the batches before it, and stop with their consumer."""
from __future__ import annotations

import json
import threading

import pyarrow as pa
import pytest

from forensics.errors import StatsFormatError
from forensics.readers import json_scan, stats_json
from forensics.readers.stats_json import _ahead, read_stats

pytestmark = pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)


def test_ahead_keeps_order_and_raises_after_the_items_before():
    def items():
        yield 1
        yield 2
        raise ValueError("line 3")

    got = []
    with pytest.raises(ValueError, match="line 3"):
        for x in _ahead(items(), depth=1):
            got.append(x)
    assert got == [1, 2]


def test_ahead_stops_its_thread_when_the_consumer_stops():
    produced, closed = [], []

    def items():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.append(threading.current_thread().name)

    before = threading.active_count()
    gen = _ahead(items(), depth=2)
    assert next(gen) == 0
    gen.close()
    # the producer ran at most the queue's depth (and one in hand) ahead, then was closed
    # on its own thread, which is gone
    assert len(produced) <= 4
    assert closed == ["stats-read"]
    assert threading.active_count() == before


def _text(rows: int, bad_at: int | None = None) -> bytes:
    out = []
    for i in range(rows):
        if i == bad_at:
            # its second line longer than a block: the block ends inside the object
            out.append(b'{"iter": 5, "kvCacheStats": {"usedNumBlocks": 1},\n'
                       b'  "numActiveRequests": 2, "note": "' + b"n" * 5000 + b'"}\n')
            continue
        out.append(json.dumps({"iter": i, "timestamp": f"07-09-2026 11:00:{i % 60:02d}",
                               "numActiveRequests": i % 7,
                               "kvCacheStats": {"usedNumBlocks": 3 * i, "freeNumBlocks": 9},
                               "attentionDpRank": i % 4}).encode() + b"\n")
    return b"".join(out)


def _tables(path) -> tuple[pa.Table, pa.Table, pa.Table]:
    batches = list(read_stats(path, "s.jsonl"))
    return tuple(pa.concat_tables([getattr(b, n) for b in batches])
                 for n in ("stats", "events", "unparsed"))


def _reference(data: bytes) -> tuple[pa.Table, pa.Table, pa.Table]:
    text = stats_json._Text(iter([(data, len(data), None)]), None)
    batches = list(stats_json._parse(text, stats_json._Rows("s.jsonl"), "s.jsonl"))
    return tuple(pa.concat_tables([getattr(b, n) for b in batches])
                 for n in ("stats", "events", "unparsed"))


@pytest.mark.parametrize("bad_at", [None, 700, 1999])
def test_lent_blocks_give_the_reference_rows(tmp_path, monkeypatch, bad_at):
    """Small blocks (many lent from one buffer); an object over two lines, the second longer
    than a block, so that a block ends inside it (per object from there on: the lent block,
    already taken from the buffer, is copied for it)."""
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 4096)
    data = _text(2000, bad_at)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    got = _tables(path)
    want = _reference(data)
    assert got[0].num_rows == 2000
    for g, w in zip(got, want):
        assert g.equals(w)
    rows = got[0].to_pylist()
    assert [r["line"] for r in rows[:3]] == [1, 2, 3]
    if bad_at is not None:
        # the object on lines bad_at+1..bad_at+2; every later row one line further down
        assert (rows[bad_at]["line"], rows[bad_at]["line_end"]) == (bad_at + 1, bad_at + 2)
        assert rows[-1]["line"] == (2001 if bad_at < 1999 else 2000)


def test_a_view_scans_as_its_bytes():
    """json_scan.stats of a view of a buffer (what the reader lends) is that of its bytes;
    a decimal read by Python's float (a fix-up) is read from the view too."""
    data = _text(50) + b'{"iter": 50, "iterLatencyMS": 0.1000000000000000055511151231257827}\n'
    buf = bytearray(b"x" * 16 + data)
    view = memoryview(buf)[16:]
    got = json_scan.stats(view, 7, "s.jsonl")
    want = json_scan.stats(bytes(view), 7, "s.jsonl")
    assert got is not None and want is not None
    assert got.stats.equals(want.stats)
    assert got.stats.column("iter_latency_ms")[50].as_py() == 0.1000000000000000055511151231257827


def test_error_in_an_array_is_raised_after_the_rows_before(tmp_path):
    """A JSON array's malformed object: the error (file and line) reaches the caller through
    the read-ahead thread."""
    body = b"[\n" + b",\n".join(_text(3).splitlines()) + b",\n{\"iter\": }\n]\n"
    path = tmp_path / "a.json"
    path.write_bytes(body)
    with pytest.raises(StatsFormatError) as e:
        list(read_stats(path, "a.json"))
    assert e.value.line == 5
