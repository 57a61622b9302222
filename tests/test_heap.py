"""replay.heap: the glibc threshold under which blocks stay in the arenas while files are
read on threads, and back after."""
import ctypes
import subprocess
import sys

import pytest

# Run in a fresh interpreter: glibc serves a request from a free chunk of the arena whatever
# its size, so in a long-lived process (the test session) a block may never reach the threshold.
_CHECK = """
import ctypes
import numpy as np
from replay import heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
info = ctypes.CDLL(None).mallinfo2
info.restype = MallInfo2

def mapped_for(nbytes):
    before = info().hblkhd
    block = np.ones(nbytes, np.uint8)      # written: one malloc of nbytes
    grown = info().hblkhd - before
    del block
    return grown

size = heap.READING_MMAP_BYTES + (2 << 20)
with heap.large_blocks_mapped():
    mapped_for(24 << 20)    # freed: glibc's dynamic threshold would rise above ``size`` here
    inside = mapped_for(size), mapped_for(heap.READING_MMAP_BYTES // 4)
after = mapped_for(size), mapped_for(heap.AFTER_MMAP_BYTES + (1 << 20))
print(*inside, *after)
"""


def test_text_sized_blocks_are_mapped_while_reading_and_in_the_arenas_after():
    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc 2.33 or later")
    from replay import heap

    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout
    big_inside, small_inside, big_after, huge_after = map(int, out.split())
    assert big_inside >= heap.READING_MMAP_BYTES + (2 << 20)
    assert small_inside == 0
    assert big_after == 0
    assert huge_after >= heap.AFTER_MMAP_BYTES


# 64 blocks of 1 MiB (arena blocks: below the mapping threshold set after a read) freed between
# small live ones (no free top for glibc to trim by itself), then trim_above with a limit above
# and below what they free: the pages stay resident, then are handed back.
_TRIM = """
import ctypes
from replay import heap

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

with heap.large_blocks_mapped():
    pass
heap.trim()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
blocks = []
for _ in range(64):
    blocks.append(libc.malloc(1 << 20))
    ctypes.memset(blocks[-1], 1, 1 << 20)   # resident
    libc.malloc(256 << 10)                   # kept: a live block after each (from the top)
for b in blocks:
    libc.free(b)
free, before = heap.free_heap_bytes(), rss()
heap.trim_above(free + (1 << 20))
kept = rss()
heap.trim_above(free // 2)
print(free, before, kept, rss())
"""


def test_trim_above_hands_back_freed_pages_only_past_the_limit():
    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc 2.33 or later")
    out = subprocess.run([sys.executable, "-c", _TRIM], capture_output=True, text=True,
                         check=True).stdout
    free, before, kept, after = map(int, out.split())
    assert free >= 60 << 20
    assert kept > before - (8 << 20)        # under the limit: nothing handed back
    assert after < kept - (48 << 20)        # past it: the freed blocks' pages
