"""JSON tokens as the compiled JSON Lines scanners (:mod:`forensics.readers.compiled.json_kernel`)
read them: whitespace, strict numbers, literals, strings without escapes, and keys looked up
among known names. Imports numba (imported only when the scanners are compiled).

Every function is inlined into its caller (``inline="always"``) and allocates nothing
(``_nrt=False``): the reasons and measurements are in :mod:`~forensics.readers.compiled.json_kernel`,
whose functions are closures over this file's digest (numba's cache would keep them otherwise
when only this file changed: :mod:`~forensics.readers.compiled.cache_digest`). Each returns
what it read with certainty and a position; the caller declines a block on anything else.
"""
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# number kinds of json_number
K_INT, K_FLOAT, K_FTEXT = 1, 2, 3
pow10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)

MAX_INT_DIGITS = 18             # |v| < 10**18 fits int64 and is exact as a Python int
EXACT = 9007199254740992        # 2**53: mantissas below it are exact doubles


@intrinsic
def copy8(typingctx, dst, d, src, s):
    """Copy the 8 bytes at ``src[s]`` to ``dst[d]`` (uint8 arrays; one unaligned load and
    store, no bounds check: the caller checks both ends)."""
    sig = types.void(dst, d, src, s)

    def codegen(context, builder, signature, args):
        word = ir.IntType(64).as_pointer()
        to = context.make_array(signature.args[0])(context, builder, args[0])
        frm = context.make_array(signature.args[2])(context, builder, args[2])
        v = builder.load(builder.bitcast(builder.gep(frm.data, [args[3]]), word), align=1)
        builder.store(v, builder.bitcast(builder.gep(to.data, [args[1]]), word), align=1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def peek8(typingctx, src, s):
    """The 8 bytes at ``src[s]`` (a uint8 array) as a little-endian word (one unaligned load,
    no bounds check: the caller checks the end)."""
    sig = types.uint64(src, s)

    def codegen(context, builder, signature, args):
        word = ir.IntType(64).as_pointer()
        frm = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load(builder.bitcast(builder.gep(frm.data, [args[1]]), word), align=1)

    return sig, codegen


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def same_span(buf, a, b, m):
    """Whether ``buf[a:a + m]`` equals ``buf[b:b + m]`` (False when either runs past the end):
    a word at a time when 8 bytes past both spans are in ``buf``, byte by byte otherwise."""
    n = len(buf)
    if a < 0 or b < 0 or a + m > n or b + m > n:
        return False
    if a + m + 8 <= n and b + m + 8 <= n:
        j = 0
        while j + 8 <= m:
            if peek8(buf, a + j) != peek8(buf, b + j):
                return False
            j += 8
        if j == m:
            return True
        mask = (np.uint64(1) << np.uint64(8 * (m - j))) - np.uint64(1)
        return ((peek8(buf, a + j) ^ peek8(buf, b + j)) & mask) == 0
    for j in range(m):
        if buf[a + j] != buf[b + j]:
            return False
    return True


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def copy_bytes(dst, d, src, s, m):
    """Copy ``src[s:s + m]`` to ``dst[d:d + m]``; returns ``d + m``. A word at a time when both
    arrays have 8 bytes past the span (the bytes after ``d + m`` are then overwritten: for
    outputs appended in order only); byte by byte otherwise. Keys and timestamps are ~20-30
    bytes: the byte loop was the stats scanner's hottest (measured, perf)."""
    if d >= 0 and s >= 0 and d + m + 8 <= len(dst) and s + m + 8 <= len(src):
        j = 0
        while j < m:
            copy8(dst, d + j, src, s + j)
            j += 8
        return d + m
    for j in range(m):
        dst[d + j] = src[s + j]
    return d + m


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def skip_ws(buf, q, n):
    """The first position at or after ``q`` that is not JSON whitespace inside a line."""
    while q < n and (buf[q] == 32 or buf[q] == 9 or buf[q] == 13):
        q += 1
    return q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def delimiter(buf, q, n):
    """Whether a scalar may end at ``q``: whitespace, ``,``, ``}``, ``]``, a newline or the end."""
    if q >= n:
        return True
    c = buf[q]
    return c == 44 or c == 125 or c == 93 or c == 32 or c == 9 or c == 13 or c == 10


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def digit_run(buf, q, n, m, sig):
    """The decimal digits at ``q`` appended to the mantissa ``m`` (``sig`` significant digits
    in it so far; leading zeros are not significant, digits past ``MAX_INT_DIGITS`` significant
    ones are dropped): (mantissa, significant digits, digits dropped, position after)."""
    dropped = 0
    while q < n:
        d = np.int64(buf[q]) - 48
        if d < 0 or d > 9:
            break
        # a digit is significant once one is not zero: counted without a branch (a leading
        # zero's branch was the scanners' hottest, mispredicted on values like 0 and 1; perf)
        sig += (sig | d) != 0
        if sig <= MAX_INT_DIGITS:
            m = m * 10 + d          # m is 0 while sig is
        else:
            dropped += 1
        q += 1
    return m, sig, dropped, q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def json_int(buf, q, n):
    """(ok, value, position after) of a strict JSON integer of at most 18 digits at ``q``
    (``-?(0|[1-9][0-9]*)`` followed by a delimiter: no fraction, no exponent)."""
    neg = False
    if q < n and buf[q] == 45:
        neg = True
        q += 1
    p = q
    v, sig, _, q = digit_run(buf, q, n, 0, 0)
    if q == p or (buf[p] == 48 and q - p > 1) or sig > MAX_INT_DIGITS \
            or not delimiter(buf, q, n):
        return False, 0, q
    return True, -v if neg else v, q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def literal(buf, q, n, word):
    """Whether the bytes ``word`` (true/false/null) are at ``q``, followed by a delimiter."""
    m = len(word)
    if q + m > n:
        return False
    for j in range(m):
        if buf[q + j] != word[j]:
            return False
    return delimiter(buf, q + m, n)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def same_bytes(buf, a, names, o, m):
    for j in range(m):
        if buf[a + j] != names[o + j]:
            return False
    return True


@intrinsic
def ctz64(typingctx, x):
    """The trailing zero bits of the uint64 ``x`` (64 for 0)."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return sig, codegen


_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _has_zero(w):
    """The high bit of each zero byte of ``w`` (exact up to the lowest zero byte)."""
    return (w - _ONES) & ~w & _HIGH


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def plain_string_end(buf, q, n):
    """Position of the closing quote of the string whose body starts at ``q``, or -1 when the
    body holds a backslash, a control character or the line ends first."""
    while q + 8 <= n:          # 8 bytes at a time to the first quote, backslash or control
        w = peek8(buf, q)
        stop = _has_zero(w ^ _QUOTES) | _has_zero(w ^ _BACKSLASHES) | ((w - _SPACES) & ~w & _HIGH)
        if stop:
            q += ctz64(stop) >> 3
            break
        q += 8
    while q < n:
        c = buf[q]
        if c == 34:
            return q
        if c == 92 or c < 32:
            return -1
        q += 1
    return -1


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def load8(words, a):
    """The 8 bytes at ``a`` as a little-endian word, from the block's aligned words."""
    i = a >> 3
    r = a & 7
    if r == 0:
        return words[i]
    return (words[i] >> np.uint64(8 * r)) | (words[i + 1] << np.uint64(64 - 8 * r))


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def word_is(words, a, want, m):
    """Whether the ``m`` (1 to 8) bytes at ``a`` are those of the little-endian word ``want``
    (the caller checks that a word past ``a`` is in the block)."""
    if m == 8:
        return load8(words, a) == want
    mask = (np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)
    return ((load8(words, a) ^ want) & mask) == 0


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def name_here(words, a, wtab, woffs, lens, g):
    """Whether name ``g`` and its closing quote are at ``a``, compared 8 bytes at a time (the
    common case: a line laid out like the one before). False near the block's end."""
    if g < 0 or g >= len(lens):
        return False
    m = lens[g]
    if a + m + 16 > len(words) * 8:
        return False
    o = woffs[g]
    while m > 8:
        if load8(words, a) != wtab[o]:
            return False
        a += 8
        m -= 8
        o += 1
    return word_is(words, a, wtab[o], m)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def find_name(buf, a, m, names, offs, guess):
    """Index of the name equal to ``buf[a:a+m]`` (``guess`` tried first), or -1."""
    k = len(offs) - 1
    if 0 <= guess < k and offs[guess + 1] - offs[guess] == m \
            and same_bytes(buf, a, names, offs[guess], m):
        return guess
    for i in range(k):
        if offs[i + 1] - offs[i] == m and same_bytes(buf, a, names, offs[i], m):
            return i
    return -1


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def key_at(buf, words, a, n, names, offs, w, wo, wl, guess):
    """(index of the name whose string body starts at ``a``, position of its closing quote):
    ``guess`` compared a word at a time first, else the string's end found and every name
    looked up. (-1, -1) when the string holds an escape or a control character; (-1, end)
    when it is no known name."""
    if name_here(words, a, w, wo, wl, guess):
        return guess, a + wl[guess] - 1
    e = plain_string_end(buf, a, n)
    if e < 0:
        return -1, -1
    # the names of its length a word at a time: a request's state changes often enough that
    # comparing each name byte by byte was one of the frame scanner's hottest loops (perf)
    for i in range(len(wl)):
        if wl[i] == e - a + 1 and name_here(words, a, w, wo, wl, i):
            return i, e
    return find_name(buf, a, e - a, names, offs, -1), e     # none, or near the block's end


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def member_key(buf, words, q, n, names, offs, w, wo, wl, guess):
    """An object member's key at ``q`` (its opening quote) and its colon, as :func:`key_at`
    reads the key: (index of the name or -1, position of the key's closing quote or -1 when
    there is no plain string, position of the value after whitespace or -1 when no colon
    follows)."""
    if q >= n or buf[q] != 34:
        return -1, -1, -1
    key, e = key_at(buf, words, q + 1, n, names, offs, w, wo, wl, guess)
    if e < 0:
        return key, e, -1
    q = skip_ws(buf, e + 1, n)
    if q >= n or buf[q] != 58:
        return key, e, -1
    return key, e, skip_ws(buf, q + 1, n)


# the literals' bytes, for literal()
true_b = np.frombuffer(b"true", dtype=np.uint8).copy()
false_b = np.frombuffer(b"false", dtype=np.uint8).copy()
null_b = np.frombuffer(b"null", dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def next_member(buf, q, n, closer):
    """After a value at ``q``: (1, start of the next member) after a comma, (0, position
    after ``closer``) when it closes the object or list, (-1, q) for anything else."""
    q = skip_ws(buf, q, n)
    if q < n and buf[q] == 44:
        return 1, skip_ws(buf, q + 1, n)
    if q < n and buf[q] == closer:
        return 0, q + 1
    return -1, q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def json_bool(buf, q, n):
    """(ok, value, position after) of ``true`` or ``false`` at ``q``."""
    if literal(buf, q, n, true_b):
        return True, True, q + 4
    if literal(buf, q, n, false_b):
        return True, False, q + 5
    return False, False, q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def json_number(buf, q, n):
    """A strict JSON number at ``q``: (ok, kind, int value, float value, position after).

    ``K_INT`` for an integer of at most 18 significant digits; ``K_FLOAT`` for a decimal or exponent form
    whose value is one correctly rounded operation (mantissa < 2**53, power of ten <= 22:
    Clinger's fast path); ``K_FTEXT`` for any other decimal (the caller reads its text).
    Integers of more digits are not ok (the caller declines the block).
    """
    neg = False
    if q < n and buf[q] == 45:
        neg = True
        q += 1
    p = q
    m, sig, _, q = digit_run(buf, q, n, 0, 0)      # sig: significant digits in m
    if q == p or (buf[p] == 48 and q - p > 1):
        return False, 0, 0, 0.0, q
    frac = 0
    is_float = False
    if q < n and buf[q] == 46:
        is_float = True
        q += 1
        f0 = q
        m, sig, dropped, q = digit_run(buf, q, n, m, sig)
        frac = q - f0 - dropped     # the fraction's digits in m, its leading zeros included
        if q == f0:
            return False, 0, 0, 0.0, q
    exp = 0
    if q < n and (buf[q] == 101 or buf[q] == 69):
        is_float = True
        q += 1
        eneg = False
        if q < n and (buf[q] == 43 or buf[q] == 45):
            eneg = buf[q] == 45
            q += 1
        e0 = q
        while q < n and 48 <= buf[q] <= 57:
            if exp < 100000:
                exp = exp * 10 + (buf[q] - 48)
            q += 1
        if q == e0:
            return False, 0, 0, 0.0, q
        if eneg:
            exp = -exp
    if not delimiter(buf, q, n):
        return False, 0, 0, 0.0, q
    if not is_float:
        if sig > MAX_INT_DIGITS:
            return False, 0, 0, 0.0, q
        return True, K_INT, -m if neg else m, 0.0, q
    e10 = exp - frac
    if sig > MAX_INT_DIGITS or m >= EXACT or e10 > 22 or e10 < -22:
        return True, K_FTEXT, 0, 0.0, q
    v = m * pow10[e10] if e10 >= 0 else m / pow10[-e10]
    return True, K_FLOAT, 0, -v if neg else v, q


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def string_end(buf, q, n):
    """:func:`plain_string_end`, and whether the body holds a byte >= 0x80 (then the caller
    checks that the block is UTF-8)."""
    high = False
    # 8 bytes at a time to the first that is a quote, a backslash, a control character or
    # >= 0x80 (the bit tricks flag the lowest such byte exactly), then byte by byte
    while q + 8 <= n:
        w = peek8(buf, q)
        stop = (_has_zero(w ^ _QUOTES) | _has_zero(w ^ _BACKSLASHES)
                | ((w - _SPACES) & ~w & _HIGH) | (w & _HIGH))
        if stop:
            q += ctz64(stop) >> 3
            break
        q += 8
    while q < n:
        c = buf[q]
        if c == 34:
            return q, high
        if c == 92 or c < 32:
            return -1, high
        high |= c >= 128
        q += 1
    return -1, high
