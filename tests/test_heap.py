"""forensics.heap: the glibc threshold under which blocks stay in the arenas while files are
read on threads, and back after."""
import ctypes

import numpy as np
import pytest

from forensics import heap


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def _mapped_bytes():
    """Bytes glibc holds in blocks with mappings of their own (``mallinfo2().hblkhd``)."""
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc 2.33 or later")
    f.restype = _MallInfo2
    return f().hblkhd


def _mapped_for(nbytes: int) -> int:
    before = _mapped_bytes()
    block = np.ones(nbytes, np.uint8)      # written: one malloc of nbytes
    grown = _mapped_bytes() - before
    del block
    return grown


def test_text_sized_blocks_are_mapped_while_reading_and_in_the_arenas_after():
    size = heap.READING_MMAP_BYTES + (2 << 20)
    with heap.large_blocks_mapped():
        assert _mapped_for(size) >= size
        assert _mapped_for(heap.READING_MMAP_BYTES // 4) == 0
    assert _mapped_for(size) == 0
    assert _mapped_for(heap.AFTER_MMAP_BYTES + (1 << 20)) >= heap.AFTER_MMAP_BYTES

