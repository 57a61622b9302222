"""The compiled scanner of :mod:`forensics.readers.native_scan` (imports numba: imported only
when that path runs). Module-level functions and constant arrays (the field table's lookup
arrays built from :mod:`forensics.dataset.log_fields` on import), so numba's cache works; the
functions that freeze the table are closures over its digest, so the cache is keyed to it."""
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from forensics.readers.compiled import byte_tests, decimal_kernel, event_kernel, prefix_kernel
from forensics.readers.compiled.byte_tests import at, digit_run, digits
from forensics.readers.compiled.cache_digest import source_digest
from forensics.readers.compiled.decimal_kernel import nearest_double
from forensics.readers.compiled.prefix_kernel import prefix_shape
from forensics.readers.native_scan import (
    I_ITER,
    I_LOGT,
    I_PRANK,
    K_INT,
    K_RATIO,
    K_TIME,
    LOOKUP,
    N_FLOATS,
    N_INTS,
    NEED_SHIFT,
    SCRATCH,
    SEVERITIES,
)

# The field table's lookup arrays (native_scan.LOOKUP, built from log_fields): numba freezes
# them into the compiled code. Its cache keys a function by its bytecode, not by the globals
# it freezes, so the functions that read them (and those that link them in: ``scan``,
# ``scan_c``) are closures over the table's digest, which numba's cache key includes. The
# digest takes in the source of the compiled modules they call too, and so do the functions
# that call those only (``odd_bytes``, ``count_newlines``, ``count_c``): numba's cache checks
# only the stamp of the file a function is defined in (:mod:`.cache_digest`).
TABLE_DIGEST = source_digest((byte_tests, decimal_kernel, prefix_kernel),
                             str(LOOKUP.digest).encode())
NAMES = LOOKUP.names
name_bytes = np.frombuffer("".join(NAMES).encode(), dtype=np.uint8).copy()
name_off = np.cumsum([0] + [len(n) for n in NAMES]).astype(np.int64)
sev_codes = np.frombuffer(SEVERITIES.encode(), dtype=np.uint8).copy()
n_names = len(NAMES)
state_first = LOOKUP.state_first
kind = LOOKUP.kind
int_row = LOOKUP.int_row
int_digits = LOOKUP.digits
flt_row = LOOKUP.flt_row
unit_bytes = LOOKUP.unit_bytes
unit_off = LOOKUP.unit_off
fmt_colon = LOOKUP.fmt_colon
fmt_eq = LOOKUP.fmt_eq
pow10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)
cum_days = np.array([0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334], np.int64)
mdays = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
#: the logger prefix's MM/DD/YYYY-HH:MM:SS and the iteration line's YYYY-MM-DD HH:MM:SS
prefix_widths = np.array([2, 2, 4, 2, 2, 2], np.int64)
prefix_seps = np.array([47, 47, 45, 58, 58, -1], np.int64)
iso_widths = np.array([4, 2, 2, 2, 2, 2], np.int64)
iso_seps = np.array([45, 45, 32, 58, 58, -1], np.int64)


def _words(text: bytes) -> tuple[list[int], list[int]]:
    """``text`` as little-endian 8-byte words and the masks of their bytes (3 words)."""
    words, masks = [0, 0, 0], [0, 0, 0]
    for j, b in enumerate(text):
        words[j // 8] |= b << (8 * (j % 8))
        masks[j // 8] |= 0xFF << (8 * (j % 8))
    return words, masks


name_word = np.array([_words(n.encode())[0] for n in NAMES], dtype=np.uint64)
name_mask = np.array([_words(n.encode())[1] for n in NAMES], dtype=np.uint64)
#: The codes of the names by their first byte: ``first_code[b]`` the first (-1: none),
#: ``next_code[c]`` the next after ``c`` with the same first byte (-1: none): a name is found
#: by comparing one or two names, not all. (Trying first the name the last line had at the same
#: place measured no faster on a log of fixed field order, and 7% slower on the varied log of
#: benchmarks/ingest.py, whose order changes every line.)
first_code = np.full(256, -1, np.int64)
next_code = np.full(max(n_names, 1), -1, np.int64)
for _c in range(n_names - 1, -1, -1):
    _b = NAMES[_c].encode()[0]
    next_code[_c] = first_code[_b]
    first_code[_b] = _c
prefix_mid = np.frombuffer(b"] [TRT-LLM] [RANK ", dtype=np.uint8).copy()
iter_head = np.frombuffer(b"iter = ", dtype=np.uint8).copy()
na = np.frombuffer(b"N/A", dtype=np.uint8).copy()


@intrinsic
def load_u64(typingctx, arr, at):
    """The 8 bytes of the uint8 array ``arr`` from ``at`` as a little-endian uint64 (one
    unaligned load; the caller keeps ``at + 8 <= len(arr)``)."""
    sig = types.uint64(arr, at)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return sig, codegen


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def same_name(buf, q, c):
    """Whether name ``c`` is at ``q`` (3 masked word compares: ``q + 24 <= len(buf)``)."""
    d = (load_u64(buf, q) ^ name_word[c, 0]) & name_mask[c, 0]
    d |= (load_u64(buf, q + 8) ^ name_word[c, 1]) & name_mask[c, 1]
    d |= (load_u64(buf, q + 16) ^ name_word[c, 2]) & name_mask[c, 2]
    return d == 0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def same_time(buf, a, b):
    """Whether the 19 bytes of a time at ``a`` are those at ``b`` (``a + 19 <= len(buf)``)."""
    return load_u64(buf, a) == load_u64(buf, b) and load_u64(buf, a + 8) == load_u64(buf, b + 8) \
        and at(buf, a + 16) == at(buf, b + 16) and at(buf, a + 17) == at(buf, b + 17) \
        and at(buf, a + 18) == at(buf, b + 18)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def time_fields(buf, p, n, widths, seps):
    """(ok, six numbers, position after) of a time of fixed-width fields ``widths`` joined by
    the bytes ``seps`` (-1: none after that field)."""
    v0 = v1 = v2 = v3 = v4 = v5 = 0
    q = p
    for j in range(6):
        v, q = digits(buf, q, n, widths[j])
        if v < 0:
            return False, 0, 0, 0, 0, 0, 0, q
        if seps[j] >= 0:
            if q >= n or at(buf, q) != seps[j]:
                return False, 0, 0, 0, 0, 0, 0, q
            q += 1
        if j == 0:
            v0 = v
        elif j == 1:
            v1 = v
        elif j == 2:
            v2 = v
        elif j == 3:
            v3 = v
        elif j == 4:
            v4 = v
        else:
            v5 = v
    return True, v0, v1, v2, v3, v4, v5, q


@numba.njit(cache=True, nogil=True, error_model="numpy")
def epoch_us(year, month, day, hour, minute, sec):
    """Microseconds since 1970 of a valid local time, -1 if it is not one."""
    if year < 1900 or year > 2999 or month < 1 or month > 12 or day < 1:
        return -1
    leap = (year % 4 == 0 and year % 100 != 0) or year % 400 == 0
    md = mdays[month - 1] + (1 if (leap and month == 2) else 0)
    if day > md or hour > 23 or minute > 59 or sec > 59:
        return -1
    y = year - 1
    days = y * 365 + y // 4 - y // 100 + y // 400 - 719162   # days of 0001-01-01..1970
    days += cum_days[month - 1] + (1 if (leap and month > 2) else 0) + day - 1
    return ((days * 24 + hour) * 60 + minute) * 60000000 + sec * 1000000


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def eol(buf, q, n):
    """Whether ``q`` is the end of the line (a newline or the end of the block)."""
    return q >= n or at(buf, q) == 10


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def comma(buf, q, n):
    """Whether ``", "`` is at ``q``."""
    return q + 1 < n and at(buf, q) == 44 and at(buf, q + 1) == 32


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ends_value(buf, q, n, in_states):
    """Whether a value may end at ``q``: ``", "``, the end of the line, or (in the
    ``states`` dict) its closing brace."""
    return comma(buf, q, n) or eol(buf, q, n) or (in_states and q < n and at(buf, q) == 125)


def _line_for(table_digest):
    """:func:`line` for the table of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def line(buf, p, n, k, ints, floats, bits, fspan, fmt, sevs, scratch):
        """Read the line starting at ``p`` into row ``k``. Returns the offset of its end (its
        newline, or ``n``) when it is a fast line, else -1 (nothing of row ``k`` is used then).

        A name is looked up by its first byte (one or two names compared). ``scratch`` holds
        the last times read (``native_scan.SCRATCH``): the same 19 bytes are the same time.
        Which values the row has, and which decimals Arrow must read, are bits of one word
        (``bits[k]``, ``native_scan.NEED_SHIFT``), stored once: a boolean per value and row
        cost ~20 scattered stores a line (7 % of this scan, measured).

        Every test is on a byte class, so no test reads past the line's newline as if it were
        part of the line; the value grammars are exact and each value must end at a separator.
        """
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the table)
        # ---- prefix: [MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [S]
        if p + 53 > n or at(buf, p) != 91:
            return -1
        if scratch[0] >= 0 and same_time(buf, p + 1, scratch[0]):
            t = scratch[1]
            q = p + 20
        else:
            ok, mo, dd, yy, hh, mi, ss, q = time_fields(buf, p + 1, n, prefix_widths,
                                                        prefix_seps)
            if not ok:
                return -1
            t = epoch_us(yy, mo, dd, hh, mi, ss)
            if t < 0:
                return -1
            scratch[0] = p + 1
            scratch[1] = t
        for j in range(len(prefix_mid)):
            if at(buf, q + j) != prefix_mid[j]:
                return -1
        q += len(prefix_mid)
        r, q = digit_run(buf, q, n, 9)
        if r < 0 or q + 6 + len(iter_head) > n or at(buf, q) != 93 or at(buf, q + 1) != 32 \
                or at(buf, q + 2) != 91:
            return -1
        s = at(buf, q + 3)
        sev = -1
        for j in range(len(sev_codes)):
            if sev_codes[j] == s:
                sev = j
        if sev < 0 or at(buf, q + 4) != 93 or at(buf, q + 5) != 32:
            return -1
        q += 6
        # ---- iter = N
        for j in range(len(iter_head)):
            if at(buf, q + j) != iter_head[j]:
                return -1
        it, q = digit_run(buf, q + len(iter_head), n, 18)
        if it < 0:
            return -1
        vb = 1 << I_ITER   # the values read (bit c) and the decimals Arrow must read
        ints[I_ITER, k] = it
        ints[I_PRANK, k] = r
        ints[I_LOGT, k] = t
        sevs[k] = sev
        seen = 0
        in_states = False
        f = 0   # the format: the newest the fields so far imply
        while True:
            # ---- what follows a value: the end, "}" + end (states), or ", " and a name
            if eol(buf, q, n):
                if in_states:
                    return -1
                break
            if in_states and at(buf, q) == 125:
                q += 1
                if not eol(buf, q, n):
                    return -1
                break
            if not comma(buf, q, n):
                return -1
            q += 2
            if not in_states and q + 10 <= n and at(buf, q) == 115 and at(buf, q + 1) == 116 \
                    and at(buf, q + 2) == 97 and at(buf, q + 3) == 116 and at(buf, q + 4) == 101 \
                    and at(buf, q + 5) == 115 and at(buf, q + 6) == 32 and at(buf, q + 7) == 61 \
                    and at(buf, q + 8) == 32 and at(buf, q + 9) == 123:   # "states = {"
                in_states = True
                q += 10
            if in_states:
                if q >= n or at(buf, q) != 39:
                    return -1
                q += 1
            code = -1
            if q + 24 <= n:   # the names of this first byte, compared
                c = first_code[at(buf, q)]
                while c >= 0:
                    ln = name_off[c + 1] - name_off[c]
                    if same_name(buf, q, c) and not (97 <= at(buf, q + ln) <= 122
                                                     or at(buf, q + ln) == 95):
                        code = c
                        q += ln
                        break
                    c = next_code[c]
                if code < 0:
                    return -1
            if code < 0:   # near the block's end: the name's letters, then each name
                a = q
                while q < n and (97 <= at(buf, q) <= 122 or at(buf, q) == 95):
                    q += 1
                ln = q - a
                for c in range(n_names):
                    o = name_off[c]
                    if name_off[c + 1] - o != ln:
                        continue
                    same = True
                    for j in range(ln):
                        if name_bytes[o + j] != at(buf, a + j):
                            same = False
                            break
                    if same:
                        code = c
                        break
            if code < 0 or (code >= state_first) != in_states or (seen >> code) & 1:
                return -1
            seen |= 1 << code
            if in_states:
                if q >= n or at(buf, q) != 39:
                    return -1
                q += 1
            # separator " = " or ": " (a states key takes ": " only)
            if not in_states and q + 3 <= n and at(buf, q) == 32 and at(buf, q + 1) == 61 \
                    and at(buf, q + 2) == 32:
                f = max(f, fmt_eq[code])
                q += 3
            elif q + 2 <= n and at(buf, q) == 58 and at(buf, q + 1) == 32:
                f = max(f, fmt_colon[code])
                q += 2
            else:
                return -1
            # ---- the value, by the field's grammar
            is_na = q + 3 <= n and at(buf, q) == na[0] and at(buf, q + 1) == na[1] and at(buf, q + 2) == na[2] \
                and ends_value(buf, q + 3, n, in_states)
            kc = kind[code]
            if kc == K_TIME:               # YYYY-MM-DD HH:MM:SS
                if scratch[2] >= 0 and q + 19 <= n and same_time(buf, q, scratch[2]):
                    t2 = scratch[3]
                    w = q + 19
                else:
                    ok, y2, m2, d2, h2, n2, s2, w = time_fields(buf, q, n, iso_widths, iso_seps)
                    if not ok:
                        return -1
                    t2 = epoch_us(y2, m2, d2, h2, n2, s2)
                    if t2 < 0:
                        return -1
                    scratch[2] = q
                    scratch[3] = t2
                ints[int_row[code], k] = t2
                vb |= 1 << int_row[code]
                q = w
            elif kc == K_RATIO:            # a/b
                av, w = digit_run(buf, q, n, int_digits[code])
                if av < 0 or w >= n or at(buf, w) != 47:
                    return -1
                bv, w = digit_run(buf, w + 1, n, int_digits[code])
                if bv < 0:
                    return -1
                r = int_row[code]
                ints[r, k] = av
                ints[r + 1, k] = bv
                vb |= 1 << r
                vb |= 1 << (r + 1)
                q = w
            elif is_na:
                q += 3
            elif kc == K_INT:
                v, w = digit_run(buf, q, n, int_digits[code])
                if v < 0:
                    return -1
                ints[int_row[code], k] = v
                vb |= 1 << int_row[code]
                q = w
            else:                           # a decimal D+[.D+] with its unit
                fc = flt_row[code]
                m = 0
                nd = 0
                frac = 0
                w = q
                while w < n and 48 <= at(buf, w) <= 57:
                    if nd < 18:             # more digits: Arrow reads the text
                        m = m * 10 + (at(buf, w) - 48)
                    nd += 1
                    w += 1
                if nd == 0:
                    return -1
                if w < n and at(buf, w) == 46:
                    w += 1
                    f0 = w
                    while w < n and 48 <= at(buf, w) <= 57:
                        if nd < 18:
                            m = m * 10 + (at(buf, w) - 48)
                        nd += 1
                        w += 1
                    frac = w - f0
                    if frac == 0:
                        return -1
                u = w
                uo = unit_off[code]
                ul = unit_off[code + 1] - uo
                if w + ul > n:
                    return -1
                for j in range(ul):
                    if at(buf, w + j) != unit_bytes[uo + j]:
                        return -1
                w += ul
                exact = nd <= 18 and m < 9007199254740992 and frac <= 22
                if exact:
                    floats[fc, k] = m / pow10[frac]
                elif nd <= 18:   # repr's 17 digits: the correctly rounded double
                    exact, v = nearest_double(m, -frac)
                    floats[fc, k] = v
                if not exact:
                    vb |= 1 << (NEED_SHIFT + fc)
                    fspan[2 * fc, k] = q
                    fspan[2 * fc + 1, k] = u
                vb |= 1 << (fc + N_INTS)
                q = w
            if not ends_value(buf, q, n, in_states):
                return -1
        fmt[k] = f
        bits[k] = vb
        return q

    return line


line = _line_for(TABLE_DIGEST)


def _odd_bytes_for(table_digest):
    """:func:`odd_bytes` for the callees of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def odd_bytes(buf, p, e):
        """1 if ``at(buf, p:e)`` holds a ``\\r`` or NUL, | 2 if a byte >= 0x80 (a separate loop
        from the newline search: it vectorises)."""
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the callees)
        hi = 0
        ctl = 0
        for j in range(p, e):
            b = at(buf, j)
            hi |= b
            ctl |= (b == 13) | (b == 0)
        return (1 if ctl else 0) | (2 if hi >= 128 else 0)

    return odd_bytes


odd_bytes = _odd_bytes_for(TABLE_DIGEST)


def _scan_for(table_digest):
    """:func:`scan` for the table of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def scan(buf, starts, ends, fast_line, ints, floats, bits, fspan, fmt, sev, scratch,
             shape, boff, lrank, lsev):
        """Split ``buf`` into lines (starts/ends, newline excluded) and read the fast ones;
        returns (lines, fast rows, odd). Row ``k`` of the outputs is line ``fast_line[k]``. A fast
        line has only bytes its grammar names; the other lines' bytes set ``odd``: 1 for a ``\\r``
        or NUL, 2 for a byte >= 0x80 (the caller checks the UTF-8). Per line, what
        :func:`prefix_shape` reads of the prefix of a line not taken (``shape`` 0 for a fast
        one): ``shape``, ``boff``, ``lrank``, ``lsev``. ``scratch`` (int64,
        ``native_scan.SCRATCH`` of them, filled with -1) is scratch: no allocation here, so the
        compiled code needs no runtime (see :mod:`forensics.readers.compiled.loader`). Lines -1
        when ``buf`` has more lines than the outputs have rows (the caller then counts them and
        calls again)."""
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the table)
        n = len(buf)
        cap = len(starts)
        i = 0
        p = 0
        k = 0
        odd = 0
        while p < n:
            if i == cap:
                return -1, k, odd
            e = line(buf, p, n, k, ints, floats, bits, fspan, fmt, sev, scratch)
            if e >= 0:
                fast_line[k] = i
                k += 1
                shape[i] = 0
            else:
                e = p
                while e < n and at(buf, e) != 10:
                    e += 1
                odd |= odd_bytes(buf, p, e)
                sh, bo, rk, sv = prefix_shape(buf, p, e)
                shape[i] = sh
                boff[i] = bo
                lrank[i] = rk
                lsev[i] = sv
            starts[i] = p
            ends[i] = e
            i += 1
            p = e + 1
        return i, k, odd

    return scan


scan = _scan_for(TABLE_DIGEST)


def _count_newlines_for(table_digest):
    """:func:`count_newlines` for the callees of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def count_newlines(buf):
        """Newlines in ``buf`` (a plain loop numba vectorises: 3x ``bytes.count`` here)."""
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the callees)
        c = 0
        for i in range(len(buf)):
            c += at(buf, i) == 10
        return c

    return count_newlines


count_newlines = _count_newlines_for(TABLE_DIGEST)


_P8, _P64 = types.CPointer(types.uint8), types.CPointer(types.int64)
_PF = types.CPointer(types.float64)
#: C signatures of the entry points (``loader`` calls them through ctypes).
SCAN_SIG = types.int64(_P8, types.int64, types.int64, _P64, _P64, _P64, _P64, _PF, _P64, _P64,
                       _P8, _P8, _P64, _P64, _P8, _P64, _P64, _P8)
COUNT_SIG = types.int64(_P8, types.int64)


def _scan_c_for(table_digest):
    """:func:`scan_c` for the table of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.cfunc(SCAN_SIG, cache=True, nogil=True, error_model="numpy")
    def scan_c(buf, n, cap, starts, ends, fast_line, ints, floats, bits, fspan, fmt, sev,
               scratch, out, shape, boff, lrank, lsev):
        """:func:`scan` over raw pointers (arrays of ``cap`` rows); fast rows and odd to out."""
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the table)
        i, k, odd = scan(numba.carray(buf, (n,)), numba.carray(starts, (cap,)),
                    numba.carray(ends, (cap,)), numba.carray(fast_line, (cap,)),
                    numba.carray(ints, (N_INTS, cap)), numba.carray(floats, (N_FLOATS, cap)),
                    numba.carray(bits, (cap,)), numba.carray(fspan, (2 * N_FLOATS, cap)),
                    numba.carray(fmt, (cap,)), numba.carray(sev, (cap,)),
                    numba.carray(scratch, (SCRATCH,)),
                    numba.carray(shape, (cap,)), numba.carray(boff, (cap,)),
                    numba.carray(lrank, (cap,)), numba.carray(lsev, (cap,)))
        o = numba.carray(out, (2,))
        o[0] = k
        o[1] = odd
        return i

    return scan_c


def _count_c_for(table_digest):
    """:func:`count_c` for the callees of ``table_digest`` (see ``TABLE_DIGEST``)."""

    @numba.cfunc(COUNT_SIG, cache=True, nogil=True, error_model="numpy")
    def count_c(buf, n):
        """:func:`count_newlines` over a raw pointer."""
        table_digest  # noqa: B018 (a closure cell: keys numba's cache to the callees)
        return count_newlines(numba.carray(buf, (n,)))

    return count_c


def __getattr__(name: str):
    """``ENTRY_POINTS`` (and ``scan_c``, ``count_c``): the entry points, by the names
    :mod:`forensics.readers.compiled.loader` knows them, compiled on first use, not on import (a
    ``cfunc`` compiles when defined): so one function can be compiled alone
    (tests/ingest/test_log_fields.py compiles :func:`line` of a changed table, a third of the
    whole scanner's compile)."""
    if name not in ("ENTRY_POINTS", "scan_c", "count_c"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global ENTRY_POINTS, scan_c, count_c
    scan_c, count_c = _scan_c_for(TABLE_DIGEST), _count_c_for(TABLE_DIGEST)
    ENTRY_POINTS = {"scan": scan_c, "count": count_c,
                    "events": event_kernel.events_c_for(event_kernel.BYTES_DIGEST)}
    return globals()[name]
