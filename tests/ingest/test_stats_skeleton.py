"""The stats scanner reads a line against the skeleton of the last line it read token by token
(``forensics.readers.compiled.stats_kernel``); a line that differs anywhere is read token by
token. Each case here is a block of fleet-like lines with lines that differ from their
predecessor mid-block: the scanner must take the block and give the reference reader's rows."""
from __future__ import annotations

import json
import threading

import pytest

from forensics.readers import json_scan, stats_json

pytestmark = pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")


def _line(i: int, **over) -> dict:
    """A line laid out as the fleet's (compact, this key order), ``over`` replacing values."""
    d = {"iter": i, "timestamp": f"07-09-2026 11:00:{i % 60:02d}", "iterLatencyMS": 14.28,
         "numActiveRequests": 1, "numQueuedRequests": 0, "maxNumActiveRequests": 16,
         "kvCacheStats": {"maxNumBlocks": 1088, "freeNumBlocks": 1042 - i, "usedNumBlocks": 46},
         "inflightBatchingStats": {"numScheduledRequests": 1, "numCtxTokens": 0,
                                   "microBatchId": 0, "avgNumDecodedTokensPerIter": 1.0},
         "attentionDpRank": i % 4, "hostStepTimeMS": 14.28}
    for key, value in over.items():
        if "." in key:
            outer, inner = key.split(".")
            d[outer][inner] = value
        else:
            d[key] = value
    return d


def _text(d: dict) -> str:
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def _block(odd: list[str], before: int = 5, after: int = 5) -> bytes:
    """``before`` fleet lines, each of ``odd`` followed by a fleet line, then ``after`` more."""
    lines = [_text(_line(i)) for i in range(before)]
    for k, text in enumerate(odd):
        lines += [text, _text(_line(100 + k))]
    lines += [_text(_line(200 + i)) for i in range(after)]
    return ("\n".join(lines) + "\n").encode()


def _reference_rows(block: bytes, tmp_path, monkeypatch) -> list[dict]:
    path = tmp_path / "s.jsonl"
    path.write_bytes(block)
    monkeypatch.setenv(json_scan.PATH_ENV, "reference")
    batches = list(stats_json.read_stats(path, "s.jsonl"))
    return [r for b in batches for r in b.stats.to_pylist()]


def _assert_taken_and_same(block: bytes, tmp_path, monkeypatch) -> list[dict]:
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    got = json_scan.stats(block, 1, "s.jsonl")
    assert got is not None, "the scanner declined the block"
    rows = got.stats.to_pylist()
    ref = _reference_rows(block, tmp_path, monkeypatch)
    assert len(rows) == len(ref) == block.count(b"\n")
    for i, (a, b) in enumerate(zip(rows, ref)):
        assert repr(a) == repr(b), f"row {i}: {a} != {b}"
    return rows


_ODD = {
    "wider values": [_text(_line(123456789, iterLatencyMS=1234.5678, numActiveRequests=15))],
    "a float needing Python's float": [_text(_line(7, iterLatencyMS=0.30000000000000004,
                                                   **{"inflightBatchingStats."
                                                      "avgNumDecodedTokensPerIter": 1e-400}))],
    "literals where numbers were": [_text(_line(8, numActiveRequests=True, numQueuedRequests=None,
                                                iterLatencyMS=False))],
    "a string where a number was": [_text(_line(9, maxNumActiveRequests="16"))],
    "a null object, then the object again": [_text(_line(10, kvCacheStats=None))],
    "an empty object": [_text(_line(11, inflightBatchingStats={}))],
    "a key missing": [_text({k: v for k, v in _line(12).items() if k != "numQueuedRequests"})],
    "an inner key missing": [_text(_line(13, kvCacheStats={"maxNumBlocks": 1})),
                             _text(_line(14, kvCacheStats={"usedNumBlocks": 2}))],
    "spaces between tokens": [json.dumps(_line(15)), " " + _text(_line(16)) + " \r"],
    "a non-ASCII timestamp": [_text(_line(17, timestamp="caf\u00e9"))],
    "whole floats in int columns": [_text(_line(18, attentionDpRank=2.0, numActiveRequests=3.5))],
    "a negative and a zero": [_text(_line(19, numActiveRequests=-1, hostStepTimeMS=-0.0))],
    "two layouts alternating": [json.dumps(_line(20)), _text(_line(21)), json.dumps(_line(22))],
    "a shorter line, then the fleet's": ['{"iter":23}', '{}'],
}


@pytest.mark.parametrize("name", sorted(_ODD))
def test_lines_unlike_the_last_read_as_the_reference_reads_them(name, tmp_path, monkeypatch):
    _assert_taken_and_same(_block(_ODD[name]), tmp_path, monkeypatch)


def test_values_read_against_the_skeleton_hand_checked(tmp_path, monkeypatch):
    """Lines after the first are read against its skeleton: their own values, not its."""
    block = _block([], before=3, after=0)
    rows = _assert_taken_and_same(block, tmp_path, monkeypatch)
    assert [r["iter"] for r in rows] == [0, 1, 2]
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert [r["timestamp"] for r in rows] == ["07-09-2026 11:00:00", "07-09-2026 11:00:01",
                                              "07-09-2026 11:00:02"]
    assert [dict(r["fields"])["kvCacheStats.freeNumBlocks"] for r in rows] == [1042, 1041, 1040]


@pytest.mark.parametrize("bad", [
    _text(_line(30, iterLatencyMS=1)).replace('"iter":30', '"iter":030'),   # a leading zero
    _text(_line(31)).replace('"iterLatencyMS":14.28', '"iterLatencyMS":14.'),
    _text(_line(32)).replace('"numActiveRequests":1', '"numActiveRequests":1e'),
    _text(_line(33)).replace(',"hostStepTimeMS"', ',"hostStepTimeMs"'),     # an unknown key
    _text(_line(34, timestamp="a\\b")),                                      # an escape
    _text(_line(35)).replace('"attentionDpRank":3', '"attentionDpRank":1.5e0'),
    _text(_line(36)).replace('"microBatchId":0', '"microBatchId":{"a":1}'),  # a new object
    _text(_line(37)).replace('"iter":37', '"iter":12345678901234567890'),   # too many digits
])
def test_a_line_the_reference_reads_otherwise_gives_its_rows(bad, tmp_path, monkeypatch):
    """A line that matches the skeleton's spans but holds a value the scanner declines or
    learns from, mid-block: read by the reference reader's rules whichever path reads it."""
    block = _block([bad])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(block)
    ref = _reference_rows(block, tmp_path, monkeypatch)
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    got = [r for b in stats_json.read_stats(path, "s.jsonl") for r in b.stats.to_pylist()]
    assert repr(got) == repr(ref)


def test_reused_column_arrays_leave_nothing_of_the_block_before(tmp_path, monkeypatch):
    """The typed columns' arrays are reused from block to block: a block whose lines lack
    columns the one before wrote gets nulls there, and the first batch is not changed."""
    full = _block([], before=20, after=0)
    bare = ("\n".join(f'{{"iter":{i},"timestamp":null}}' for i in range(30)) + "\n").encode()
    first = _assert_taken_and_same(full, tmp_path, monkeypatch)
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    kept = json_scan.stats(full, 1, "s.jsonl")
    rows = _assert_taken_and_same(bare, tmp_path, monkeypatch)
    assert [r["num_active_requests"] for r in rows] == [None] * 30
    assert [r["iter_latency_ms"] for r in rows] == [None] * 30
    assert [r["rank"] for r in rows] == [None] * 30
    assert kept.stats.to_pylist() == first


def test_a_block_of_very_short_lines_gets_arrays_of_its_own(monkeypatch):
    """A row bound past ``SCRATCH_CELLS`` is not kept for the next block (its arrays would hold
    the thread's memory), and its rows are read all the same; a smaller one is kept."""
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    monkeypatch.setattr(json_scan, "_scratch", threading.local())
    monkeypatch.setattr(json_scan, "SCRATCH_CELLS", 64)
    block = ("\n".join(f'{{"iter":{i}}}' for i in range(50)) + "\n").encode()
    got = json_scan.stats(block, 1, "s.jsonl")
    assert got.stats.column("iter").to_pylist() == list(range(50))
    assert getattr(json_scan._scratch, "arrays", None) is None
    one = json_scan.stats(b'{"iter":7}\n', 1, "s.jsonl")       # 14 columns x 4 rows
    assert one.stats.column("iter").to_pylist() == [7]
    assert json_scan._scratch.arrays[0].size <= 64
