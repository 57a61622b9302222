"""``ZstdInto`` (a zstd file decompressed straight into the reader's buffer) gives exactly the
bytes, the error and the read digest of ``decompressed_chunks`` on whole, cut, corrupt,
padded and multi-frame files, and its progress adds up to the file's size."""
from __future__ import annotations

import random
import struct

import pytest
import zstandard

from forensics.readers.sources import decompressed_chunks, open_raw, recording_reads
from forensics.readers.zstd_into import ZstdInto

_TEXT = b"".join(b'{"kind": "frame", "iter": %d, "rank": %d, "requests": []}\n' % (i // 8, i % 8)
                 for i in range(60_000))


def _files() -> dict[str, bytes]:
    one = zstandard.ZstdCompressor(level=3).compress(_TEXT)
    half = len(_TEXT) // 2
    first = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(_TEXT[:half])
    multi = first + zstandard.ZstdCompressor(level=1).compress(_TEXT[half:])
    rng = random.Random(7)
    files = {"one": one, "multi": multi, "padded": one + bytes(64), "garbage": one + b"xyz",
             "skippable": struct.pack("<II", 0x184D2A50, 3) + b"abc" + one,
             "frame_end": first, "empty": b""}
    for k in range(4):
        files[f"cut{k}"] = multi[:rng.randrange(1, len(multi))]
        flipped = bytearray(one)
        flipped[rng.randrange(20, len(one))] ^= 0xFF
        files[f"flip{k}"] = bytes(flipped)
    return files


_FILES = _files()


def _reference(path) -> tuple[bytes, object, object]:
    out, err = [], None
    with recording_reads() as reads:
        with open_raw(path) as raw:
            for data, _, e in decompressed_chunks(raw, "zstd", 1 << 20):
                out.append(data)
                err = e or err
    return b"".join(out), err, reads[str(path)]


def _direct(path, view_bytes: int) -> tuple[bytes, object, object, int]:
    out, seen = bytearray(), []
    buf = bytearray(view_bytes)
    with recording_reads() as reads:
        with open_raw(path) as raw:
            reader = ZstdInto(path, raw, seen.append)
            while n := reader.readinto(memoryview(buf)):
                out += buf[:n]
    return bytes(out), reader.error, reads[str(path)], sum(seen)


@pytest.mark.parametrize("name", sorted(_FILES))
@pytest.mark.parametrize("view_bytes", [1 << 12, 1 << 20])
def test_same_bytes_error_and_digest(name, view_bytes, tmp_path):
    path = tmp_path / f"{name}.zst"
    path.write_bytes(_FILES[name])
    data, err, digest = _reference(path)
    got, got_err, got_digest, progress = _direct(path, view_bytes)
    assert got == data
    assert (str(got_err), getattr(got_err, "kind", None), getattr(got_err, "offset", None)) == \
        (str(err), getattr(err, "kind", None), getattr(err, "offset", None))
    assert got_digest == digest
    assert progress == path.stat().st_size
    if name in ("one", "multi", "padded"):
        assert got == _TEXT and got_err is None
    if name.startswith("cut"):
        assert got_err.kind == "input_truncated" and _TEXT.startswith(got)
