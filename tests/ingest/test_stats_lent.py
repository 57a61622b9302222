"""The stats reader's compiled path reads blocks lent from the reader's buffer (views, not
copies): the rows are the per-object reader's, also when a block ends inside an object."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
import zstandard

from forensics.readers import json_scan, stats_json
from forensics.readers.stats_json import read_stats

pytestmark = pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)


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


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("bad_at", [None, 700, 1999])
def test_lent_blocks_give_the_reference_rows(tmp_path, monkeypatch, bad_at, compressed):
    """Small blocks (many lent from one buffer); an object over two lines, the second longer
    than a block, so that a block ends inside it (per object from there on: the lent block,
    already taken from the buffer, is copied for it)."""
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 4096)
    data = _text(2000, bad_at)
    path = tmp_path / ("s.jsonl.zst" if compressed else "s.jsonl")
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
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
