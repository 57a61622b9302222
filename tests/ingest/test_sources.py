"""Opening compressed inputs: decompressed output handed on in bounded pieces, and the
decompressed size a reader is chosen by."""
from __future__ import annotations

import gzip
import json
import random

import pytest
import zstandard

from forensics.readers import json_scan, sources, stats_json


def _text(n_lines: int, seed: int = 0) -> bytes:
    """JSON Lines that compress ~30-100x, as real stats do (repetitive keys, varying numbers)."""
    rng = random.Random(seed)
    return b"".join(json.dumps({"iter": i, "rank": i % 8, "latency": round(rng.random(), 3),
                                "kvCacheStats": {"free": 1000 - i % 97}},
                               separators=(",", ":")).encode() + b"\n"
                    for i in range(n_lines))


def _compress(comp: str, data: bytes) -> bytes:
    return gzip.compress(data) if comp == "gzip" else zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("comp", ["gzip", "zstd"])
def test_decompressed_chunks_bounded_and_complete(comp, tmp_path, monkeypatch):
    """No chunk holds much more than ``OUT_BYTES`` however large the read block's output; the
    chunks join to the text and their consumed bytes add up to the file."""
    monkeypatch.setattr(sources, "OUT_BYTES", 64 << 10)
    monkeypatch.setattr(sources, "PIECE_BYTES", 2 << 10)
    data = _text(60_000)
    path = tmp_path / "x.jsonl.z"
    path.write_bytes(_compress(comp, data))
    size = path.stat().st_size
    assert size < 1 << 20 and len(data) > 5 * size   # one read block, far more than OUT_BYTES out
    with open(path, "rb") as raw:
        chunks = list(sources.decompressed_chunks(raw, comp, 1 << 20))
    assert b"".join(c for c, _, _ in chunks) == data
    assert sum(n for _, n, _ in chunks) == size
    assert all(err is None for _, _, err in chunks)
    # past the bound by at most one piece's output (a zstd block is <= 128 KiB of output)
    ratio = len(data) / size
    widest = max(len(c) for c, _, _ in chunks)
    assert 64 << 10 <= widest < (64 << 10) + 4 * (2 << 10) * ratio + (128 << 10)
    assert widest * 4 < len(data)


@pytest.mark.parametrize("comp", ["gzip", "zstd"])
def test_decompressed_chunks_bounded_output_keeps_a_cut_stream(comp, tmp_path, monkeypatch):
    """A stream cut past the first bounded pieces: every byte decompressed before the cut is
    kept, and the cut is reported at the file's end."""
    monkeypatch.setattr(sources, "OUT_BYTES", 64 << 10)
    data = _text(60_000)
    blob = _compress(comp, data)
    cut = blob[:len(blob) * 3 // 4]
    path = tmp_path / "x.jsonl.z"
    path.write_bytes(cut)
    with open(path, "rb") as raw:
        chunks = list(sources.decompressed_chunks(raw, comp, 1 << 20))
    err = chunks[-1][2]
    assert err is not None and err.kind == "input_truncated" and err.offset == len(cut)
    kept = b"".join(c for c, _, _ in chunks)
    assert len(kept) > len(data) // 2 and data.startswith(kept)
    assert sum(n for _, n, _ in chunks) == len(cut)
    assert len(chunks) > 3


def test_content_size(tmp_path, monkeypatch):
    data = _text(200_000, seed=1)
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(data)
    assert sources.content_size(plain) == len(data)
    for comp, name in (("gzip", "a.jsonl.gz"), ("zstd", "a.jsonl.zst")):
        p = tmp_path / name
        p.write_bytes(_compress(comp, data))
        assert p.stat().st_size * 5 < len(data)
        # sampled from the first SAMPLE_BYTES: close to the real size
        monkeypatch.setattr(sources, "SAMPLE_BYTES", p.stat().st_size // 4)
        assert 0.8 * len(data) < sources.content_size(p) < 1.25 * len(data)
        # a file no larger than the sample: exact
        monkeypatch.setattr(sources, "SAMPLE_BYTES", p.stat().st_size + 1)
        assert sources.content_size(p) == len(data)
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    assert sources.content_size(empty) == 0


def test_content_size_decompresses_each_version_of_a_file_once(tmp_path, monkeypatch):
    calls = []
    real = sources.decompressed_chunks

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(sources, "decompressed_chunks", counted)
    monkeypatch.setattr(sources, "SAMPLE_BYTES", 1 << 30)   # the whole file: exact sizes
    p = tmp_path / "s.jsonl.zst"
    data = _text(100_000, seed=2)
    p.write_bytes(_compress("zstd", data))
    first = [sources.content_size(p) for _ in range(3)]
    assert first == [len(data)] * 3 and calls == ["zstd"]
    # rewritten in place (another size): estimated again, from the new content
    more = data * 3
    p.write_bytes(_compress("zstd", more))
    assert sources.content_size(p) == len(more) and len(calls) == 2


@pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")
def test_compressed_input_read_by_its_decompressed_size(tmp_path, monkeypatch):
    """A zstd stats file small on disk but holding more text than ``json_scan.MIN_BYTES`` is
    read by the compiled scanner (the size switch counts text, not compressed bytes)."""
    monkeypatch.delenv("FORENSICS_INGEST_PATH", raising=False)
    data = _text(40_000, seed=2)
    path = tmp_path / "stats.jsonl.zst"
    path.write_bytes(_compress("zstd", data))
    monkeypatch.setattr(json_scan, "MIN_BYTES", len(data) // 2)
    assert path.stat().st_size < json_scan.MIN_BYTES
    calls = []
    real = json_scan.stats
    monkeypatch.setattr(json_scan, "stats", lambda *a: calls.append(1) or real(*a))
    rows = sum(b.stats.num_rows for b in stats_json.read_stats(path, "stats.jsonl.zst"))
    assert rows == 40_000 and calls
    calls.clear()
    monkeypatch.setattr(json_scan, "MIN_BYTES", len(data) * 2)
    assert sum(b.stats.num_rows for b in stats_json.read_stats(path, "s")) == 40_000
    assert not calls
