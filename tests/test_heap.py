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


# 64 blocks of 1 MiB (arena blocks: below the mapping threshold set after a read) allocated
# between small live ones (no free top for glibc to trim by itself) and freed, twice: a
# TrimPast whose growth limit is above what they take keeps their pages resident (the second
# round reuses them), one whose limit is below hands them back.
_TRIM = """
import ctypes
from replay import heap

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def round_of_blocks():
    blocks = []
    for _ in range(64):
        blocks.append(libc.malloc(1 << 20))
        ctypes.memset(blocks[-1], 1, 1 << 20)   # resident
        libc.malloc(256 << 10)                   # kept: a live block after each (from the top)
    for b in blocks:
        libc.free(b)

with heap.large_blocks_mapped():
    pass
for growth in (256 << 20, 16 << 20):
    trim = heap.TrimPast(growth)
    trim()                                       # the first call trims: the base
    base = heap.resident_bytes()
    round_of_blocks()
    trim()
    print(growth, base, heap.resident_bytes())
"""


def test_trim_past_hands_back_freed_pages_only_past_the_growth_limit():
    if heap_unavailable():
        pytest.skip("not glibc, or no /proc")
    out = subprocess.run([sys.executable, "-c", _TRIM], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    (big, base_big, after_big), (small, base_small, after_small) = \
        (map(int, line.split()) for line in out)
    assert after_big > base_big + (56 << 20)     # under the limit: the freed pages stay
    assert after_small < base_small + (16 << 20)  # past it: handed back


def heap_unavailable() -> bool:
    from replay import heap
    try:
        ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return True
    return heap.resident_bytes() is None


# A block from the heap's top freed after a read: glibc hands the top back only past the trim
# threshold, so a replay's freed temporaries stay mapped for the next ones (the threshold left
# at 128 KiB handed back and faulted in every one of them).
_TOP = """
import ctypes
from replay import heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

with heap.large_blocks_mapped():
    pass
block = libc.malloc(8 << 20)                 # below the mapping threshold: from the top
ctypes.memset(block, 1, 8 << 20)
grown = libc.mallinfo2().arena
libc.free(block)
print(grown, libc.mallinfo2().arena)
"""


def test_freed_heap_top_below_the_trim_threshold_stays_after_a_read():
    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc 2.33 or later")
    from replay import heap

    assert heap.AFTER_TRIM_BYTES > 8 << 20
    out = subprocess.run([sys.executable, "-c", _TOP], capture_output=True, text=True,
                         check=True).stdout
    grown, after_free = map(int, out.split())
    assert grown >= 8 << 20
    assert after_free == grown                   # not handed back
