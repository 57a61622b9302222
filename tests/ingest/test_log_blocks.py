"""The block reader (log_blocks) of plain files: whole lines, every byte once and in order, and a
block still referred to is never overwritten by a later one (its buffer is reused only after)."""
from __future__ import annotations

import random

import pytest

from forensics.readers import executor_log, log_blocks, native_scan


def _log(tmp_path, seed: int, n: int = 3000):
    rng = random.Random(seed)
    lines = [("x" * rng.choice([0, 1, 5, 40, 300, 5000])) + f" {i}" for i in range(n)]
    path = tmp_path / "a.log"
    path.write_bytes(("\n".join(lines) + ("\n" if seed % 2 else "")).encode())
    return path


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("keep", ["none", "all", "every_other"])
def test_blocks_cover_the_file_and_held_blocks_stay_intact(tmp_path, monkeypatch, seed, keep):
    monkeypatch.setattr(log_blocks, "READ_BYTES", 4096)
    path = _log(tmp_path, seed)
    data = path.read_bytes()
    held, copies, out = [], [], []
    for i, (block, _consumed, err) in enumerate(
            log_blocks.plain_blocks(path, 1 << 14, max_line=1 << 12)):
        assert err is None
        if isinstance(block, log_blocks.LongLine):
            out.append(None)
            continue
        out.append(bytes(block))
        if keep == "all" or (keep == "every_other" and i % 2 == 0):
            held.append(block)
            copies.append(bytes(block))
    # every held block still holds its bytes after all later blocks were read
    assert [bytes(b) for b in held] == copies
    lines = [ln for b in out if b is not None for ln in b.split(b"\n")[:-1 if b.endswith(b"\n")
                                                                       else None]]
    expect = [ln for ln in data.split(b"\n") if len(ln) <= 1 << 12]
    if data.endswith(b"\n"):
        expect = expect[:-1] if expect and expect[-1] == b"" else expect
    assert lines == expect


def test_buffers_are_reused_only_when_free():
    pool = log_blocks.Buffers(keep=2, max_size=100)
    a = pool.get(50)
    b = pool.get(60)
    assert a is not b
    c = pool.get(40)          # both still referred to here: a new one
    assert c is not a and c is not b
    del a
    d = pool.get(80)          # the first one is free again: reused, resized
    assert len(d) == 80 and d is pool.pool[0]
    assert pool.get(500) is not pool.pool[1]   # too big for the pool: never pooled
    assert len(pool.pool) == 2


@pytest.mark.parametrize("newline", [True, False])
def test_a_short_last_line_after_a_long_block_is_a_line(tmp_path, newline):
    """A block longer than ``max_line`` whose last line is short and has no newline: that line
    is an ordinary line (it was once reported as a ``long_line`` event)."""
    path = tmp_path / "a.log"
    text = "".join(f"line {i} " + "y" * 50 + "\n" for i in range(200)) + "the last line"
    path.write_text(text + ("\n" if newline else ""))
    parts = list(log_blocks.split_long(path.read_bytes(), 4096))
    assert not any(isinstance(p, log_blocks.LongLine) for p in parts)
    assert b"".join(parts) == path.read_bytes()
    batches = list(executor_log.parse_executor_log(path, "a.log", block_bytes=1 << 14,
                                                   max_line_bytes=4096, native=False))
    unparsed = [r for b in batches for r in b.unparsed.to_pylist()]
    events = [r for b in batches for r in b.events.to_pylist()]
    assert not events
    assert unparsed[-1]["line"] == 201 and unparsed[-1]["text"] == "the last line"


def test_a_block_without_long_lines_is_not_copied():
    block = bytearray(b"".join(b"%d %s\n" % (i, b"z" * 100) for i in range(100)))
    assert len(block) > 4096
    parts = list(log_blocks.split_long(block, 4096))
    assert len(parts) == 1 and parts[0] is block


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("native", [False, True])
def test_a_parse_reads_only_a_few_blocks_ahead(tmp_path, threads, native):
    """Batches come out while the file is still being read, on every path: at most the worker
    threads' blocks, a scanned group and the one being read are ahead of the first batch."""
    if native and native_scan.kernel() is None:
        pytest.skip("numba not importable")
    line = ("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [I] iter = 12, global_rank = 3, rank = 3, "
            "num_scheduled_requests = 2, states = {'num_ctx_requests': 1, 'num_ctx_tokens': 5, "
            "'num_generation_tokens': 3}\n")
    odd = "[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [W] something else\n"
    path = tmp_path / "a.log"
    path.write_text((line * 20 + odd) * 400)    # ~1.7 MB: over a hundred blocks
    read: list[int] = []
    batches = executor_log.parse_executor_log(path, "a.log", progress=read.append,
                                              block_bytes=1 << 14, threads=threads,
                                              native=native)
    first = next(batches)
    assert first.iterations.num_rows > 0
    assert path.stat().st_size > 10 * (threads + executor_log.GROUP_BLOCKS + 1) * (1 << 14)
    assert sum(read) <= (threads + executor_log.GROUP_BLOCKS + 1) * (1 << 14) + 4096
    rest = sum(b.iterations.num_rows for b in batches)
    assert first.iterations.num_rows + rest == 8000 and sum(read) == path.stat().st_size
