"""trace_v1._blocks: whole-line blocks of a decompressed trace, each byte once, in order."""
from __future__ import annotations

import random

import numpy as np
import pytest
import zstandard

from forensics.readers import json_object_lines, trace_v1


@pytest.mark.parametrize("lent", [False, True])
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("block", [64, 1000, 5000])
def test_blocks_cover_the_input_in_whole_lines(tmp_path, monkeypatch, compressed, block, lent):
    rng = random.Random(block)
    lines = [b"x" * rng.choice([0, 1, 5, 70, 300, 3000]) for _ in range(4000)]
    data = b"\n".join(lines) + b"\ntail without newline"
    path = tmp_path / ("t.jsonl.zst" if compressed else "t.jsonl")
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
    # a decompressed chunk is many blocks long: a block is cut from where the last one ended
    monkeypatch.setattr(trace_v1, "_READ_BYTES", 1 << 16)
    stop: dict = {}
    # lent blocks are views valid until the next block is asked for: copied as they come;
    # each starts at its buffer's start (the scanner reads 8-byte words without a copy) when
    # reads stop at what a block wants (blocks of MBs are much longer than the least read)
    aligned = lent and block >= 1000      # (64-byte blocks would read a byte at a time)
    if aligned:
        monkeypatch.setattr(json_object_lines, "_LENT_MIN_READ", 1)
    blocks, offsets = [], set()
    for b in trace_v1._blocks(path, None, stop, block_bytes=block, lent=lent):
        if isinstance(b, memoryview):
            offsets.add(np.frombuffer(b, np.uint8).ctypes.data % 8)
        blocks.append(bytes(b))
    if aligned:
        assert offsets == {0}
    if not lent:
        assert not offsets                # bytes, not views
    # a last line without its newline that is no whole record is the cut a killed writer
    # leaves: kept aside (verbatim in unparsed) with an input_truncated event, never parsed
    assert b"".join(blocks) + stop["tail"] == data
    assert stop["tail"] == b"tail without newline"
    assert stop["error"].kind == "input_truncated"
    for b in blocks:
        assert b.endswith(b"\n")
        # at most one block's worth, unless a single line is longer than a block
        assert len(b) <= block or b.count(b"\n") == 1 or b[:-1].rfind(b"\n") < block
    assert len(blocks) > len(data) // (block + 3001)
