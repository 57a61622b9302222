"""A decimal's nearest double in the compiled scanner, for mantissas past the exact fast path
(imports numba: imported only when a compiled path runs).

Why: Python's ``repr`` prints a float with up to 17 significant digits (``209.07598830962883``),
past the exact quotient ``m / 10**k`` the scanner computes when ``m < 2**53``. Such values went
to Arrow's text cast, one copy of their bytes per block: on a log printing its times that way
(the ``varied`` generator of benchmarks/ingest.py, half of every line's times) that was the
most of its rows' Python-side cost. Here the Eisel-Lemire algorithm (Lemire, "Number parsing
at a gigabyte per second", 2021, the one fast_float implements, which Arrow's cast uses) gives
the correctly rounded double of ``m * 10**q`` for ``m < 10**19`` and ``Q_MIN <= q <= 0``. In
that range the 128-bit approximation of ``5**q`` always decides the rounding (no fallback is
ever needed), and a correctly rounded double is the one Arrow's cast gives (tests compare both).
"""
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

#: The most negative power of ten handled: for ``-27 <= q`` the truncated 128-bit reciprocal
#: of ``5**-q`` is exact enough that the product never leaves the rounding undecided.
Q_MIN = -27


def _power_of_five_128(q: int) -> tuple[int, int]:
    """(high, low) 64-bit words of ``5**q`` as a 128-bit number with its top bit set
    (``q >= 0``: truncated), or of the reciprocal ``2**(z + 127) // 5**-q + 1`` where ``2**z``
    is the least power of two at least ``5**-q`` (``Q_MIN <= q < 0``): fast_float's table."""
    if q >= 0:
        v = 5 ** q
        while v < 1 << 127:
            v <<= 1
        while v >= 1 << 128:
            v >>= 1
    else:
        p = 5 ** -q
        z = (p - 1).bit_length()
        v = (1 << (z + 127)) // p + 1
    return v >> 64, v & ((1 << 64) - 1)


_table = [_power_of_five_128(q) for q in range(Q_MIN, 1)]
five_hi = np.array([h for h, _ in _table], dtype=np.uint64)
five_lo = np.array([lo for _, lo in _table], dtype=np.uint64)
U0, U1, U2, U3 = (np.uint64(v) for v in (0, 1, 2, 3))
PRECISION_MASK = np.uint64((1 << 64) - 1 >> 55)   # the bits below a double's 52 + 3
ALL_ONES = np.uint64((1 << 64) - 1)


@intrinsic
def mul_64x64(typingctx, a, b):
    """(high, low) 64-bit words of the 128-bit product of two uint64."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128 = ir.IntType(128)
        p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
        hi = builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))
        lo = builder.trunc(p, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, (hi, lo))

    return sig, codegen


@intrinsic
def leading_zeros(typingctx, a):
    """Leading zero bits of a non-zero uint64."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))

    return sig, codegen


@intrinsic
def as_double(typingctx, bits):
    """The double whose IEEE-754 bits are the uint64 ``bits``."""
    sig = types.float64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@numba.njit(cache=True, nogil=True, error_model="numpy")
def nearest_double(m, q):
    """(ok, the double nearest ``m * 10**q``, ties to even) for ``0 < m < 10**19`` and
    ``Q_MIN <= q <= 0``; ok False outside that range (the caller keeps the text then)."""
    if m <= 0 or q < Q_MIN or q > 0:
        return False, 0.0
    w = np.uint64(m)
    lz = leading_zeros(w)
    w = w << np.uint64(lz)
    i = q - Q_MIN
    hi, lo = mul_64x64(w, five_hi[i])
    if (hi & PRECISION_MASK) == PRECISION_MASK:   # the low word may carry into the high one
        hi2, _lo2 = mul_64x64(w, five_lo[i])
        lo = lo + hi2
        if hi2 > lo:
            hi = hi + U1
    upper = np.int64(hi >> np.uint64(63))
    shift = np.uint64(upper + 9)                  # 64 - (52 + 3) + the top bit
    mant = hi >> shift
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upper - lz + 1023
    if power2 <= 0:                               # subnormal: never for these inputs
        return False, 0.0
    # exactly between two doubles (only possible for -4 <= q <= 23): round to even
    if lo <= U1 and q >= -4 and (mant & U3) == U1 and (mant << shift) == hi:
        mant = mant & ~U1
    mant = mant + (mant & U1)
    mant = mant >> U1
    if mant >= (U2 << np.uint64(52)):
        mant = U1 << np.uint64(52)
        power2 += 1
    mant = mant & ~(U1 << np.uint64(52))
    if power2 >= 0x7FF:
        return False, 0.0
    return True, as_double(mant | (np.uint64(power2) << np.uint64(52)))
