"""Byte tests the compiled scanners share (imports numba: imported only when a compiled path
runs; see :mod:`forensics.readers.compiled.scan_kernel`)."""
import numba
import numpy as np


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def at(buf, i):
    """``buf[i]`` for an index known to be in range: unsigned, so numba emits no wrap-around
    of negative indices (a third of the scan's instructions on the hot paths)."""
    return buf[np.uint64(i)]


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def digits(buf, p, e, k):
    """(value, position after) of exactly ``k`` digits at ``p``; value -1 if not."""
    if p + k > e:
        return -1, p
    v = 0
    for j in range(k):
        c = at(buf, p + j)
        if c < 48 or c > 57:
            return -1, p
        v = v * 10 + (c - 48)
    return v, p + k


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def digit_run(buf, p, e, most):
    """(value, position after) of a run of 1..most digits at ``p``; -1 when none or longer."""
    q = p
    v = 0
    while q < e and 48 <= at(buf, q) <= 57:
        if q - p >= most:
            return -1, p
        v = v * 10 + (at(buf, q) - 48)
        q += 1
    if q == p:
        return -1, p
    return v, q


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def is_digit(c):
    return 48 <= c <= 57


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def is_letter(c):
    return 65 <= c <= 90 or 97 <= c <= 122
