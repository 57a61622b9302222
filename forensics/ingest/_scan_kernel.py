"""The compiled scanner of :mod:`forensics.ingest.native_scan` (imports numba: imported only
when that path runs). Module-level functions and constant arrays, so numba's cache works."""
import numba
import numpy as np

from forensics.ingest.native_scan import (
    F_ELAPSED,
    F_HOST,
    F_KV,
    F_PREV,
    I_ADC,
    I_ADG,
    I_CUR,
    I_GRANK,
    I_ITER,
    I_LOGT,
    I_LRANK,
    I_NCR,
    I_NCT,
    I_NGT,
    I_NSR,
    I_PRANK,
    I_TOT,
    I_TS,
    N_FLOATS,
    N_INTS,
    N_STATE_FIRST,
    NAMES,
    SEVERITIES,
)

name_bytes = np.frombuffer("".join(NAMES).encode(), dtype=np.uint8).copy()
name_off = np.cumsum([0] + [len(n) for n in NAMES]).astype(np.int64)
sev_codes = np.frombuffer(SEVERITIES.encode(), dtype=np.uint8).copy()
n_names = len(NAMES)
state_first = N_STATE_FIRST
# column of each name: int column, float column, or special (-1)
int_col = np.array([I_GRANK, I_LRANK, I_NSR, -1, -1, -1, -1, -1, -1, I_ADC, I_ADG,
                    I_NCR, I_NCT, I_NGT], dtype=np.int64)
int_digits = np.array([9, 9, 9, 0, 0, 0, 0, 0, 0, 18, 18, 18, 18, 18], dtype=np.int64)
flt_col = np.array([-1, -1, -1, -1, F_HOST, F_PREV, F_ELAPSED, F_KV, -1, -1, -1, -1, -1,
                    -1], dtype=np.int64)
# unit letters after a decimal: 0 none, 1 "ms", 2 "s"
unit = np.array([0, 0, 0, 0, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64)
pow10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)
cum_days = np.array([0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334], np.int64)
mdays = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
prefix_mid = np.frombuffer(b"] [TRT-LLM] [RANK ", dtype=np.uint8).copy()
iter_head = np.frombuffer(b"iter = ", dtype=np.uint8).copy()
na = np.frombuffer(b"N/A", dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True, inline="always")
def digits(buf, p, e, k):
    """(value, position after) of exactly ``k`` digits at ``p``; value -1 if not."""
    if p + k > e:
        return -1, p
    v = 0
    for j in range(k):
        c = buf[p + j]
        if c < 48 or c > 57:
            return -1, p
        v = v * 10 + (c - 48)
    return v, p + k


@numba.njit(cache=True, nogil=True, inline="always")
def digit_run(buf, p, e, most):
    """(value, position after) of a run of 1..most digits at ``p``; -1 when none or longer."""
    q = p
    v = 0
    while q < e and 48 <= buf[q] <= 57:
        if q - p >= most:
            return -1, p
        v = v * 10 + (buf[q] - 48)
        q += 1
    if q == p:
        return -1, p
    return v, q


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def line(buf, p, e, k, ints, floats, valid, fspan, fneed, fmt, sevs):
    """Read one line ``buf[p:e]`` into row ``k``; False when it is not a fast line."""
    # ---- prefix: [MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [S]
    if e - p < 60 or buf[p] != 91:
        return False
    mo, q = digits(buf, p + 1, e, 2)
    if mo < 0 or buf[q] != 47:
        return False
    dd, q = digits(buf, q + 1, e, 2)
    if dd < 0 or buf[q] != 47:
        return False
    yy, q = digits(buf, q + 1, e, 4)
    if yy < 0 or buf[q] != 45:
        return False
    hh, q = digits(buf, q + 1, e, 2)
    if hh < 0 or buf[q] != 58:
        return False
    mi, q = digits(buf, q + 1, e, 2)
    if mi < 0 or buf[q] != 58:
        return False
    ss, q = digits(buf, q + 1, e, 2)
    if ss < 0:
        return False
    t = epoch_us(yy, mo, dd, hh, mi, ss)
    if t < 0:
        return False
    for j in range(len(prefix_mid)):
        if buf[q + j] != prefix_mid[j]:
            return False
    q += len(prefix_mid)
    r, q = digit_run(buf, q, e, 9)
    if r < 0 or q + 5 > e or buf[q] != 93 or buf[q + 1] != 32 or buf[q + 2] != 91:
        return False
    s = buf[q + 3]
    sev = -1
    for j in range(len(sev_codes)):
        if sev_codes[j] == s:
            sev = j
    if sev < 0 or buf[q + 4] != 93 or buf[q + 5] != 32:
        return False
    q += 6
    # ---- iter = N
    if q + len(iter_head) >= e:
        return False
    for j in range(len(iter_head)):
        if buf[q + j] != iter_head[j]:
            return False
    it, q = digit_run(buf, q + len(iter_head), e, 18)
    if it < 0:
        return False
    for c in range(N_INTS):
        valid[c, k] = False
    for c in range(N_FLOATS):
        valid[c + N_INTS, k] = False
        fneed[c, k] = False
    ints[I_ITER, k] = it
    valid[I_ITER, k] = True
    ints[I_PRANK, k] = r
    ints[I_LOGT, k] = t
    sevs[k] = sev
    seen = 0
    in_states = False
    nsr_eq = False
    while q < e:
        # ", " then a name
        if q + 2 > e or buf[q] != 44 or buf[q + 1] != 32:
            return False
        q += 2
        if not in_states and e - q > 10 and buf[q] == 115 and buf[q + 1] == 116 \
                and buf[q + 2] == 97 and buf[q + 3] == 116 and buf[q + 4] == 101 \
                and buf[q + 5] == 115 and buf[q + 6] == 32 and buf[q + 7] == 61 \
                and buf[q + 8] == 32 and buf[q + 9] == 123:   # "states = {"
            in_states = True
            q += 10
            if q >= e or buf[q] != 39:
                return False
        quoted = False
        if in_states:
            if q >= e or buf[q] != 39:
                return False
            quoted = True
            q += 1
        a = q
        while q < e and (97 <= buf[q] <= 122 or buf[q] == 95):
            q += 1
        ln = q - a
        code = -1
        for c in range(n_names):
            o = name_off[c]
            if name_off[c + 1] - o != ln:
                continue
            same = True
            for j in range(ln):
                if name_bytes[o + j] != buf[a + j]:
                    same = False
                    break
            if same:
                code = c
                break
        if code < 0 or (code >= state_first) != in_states or (seen >> code) & 1:
            return False
        seen |= 1 << code
        if quoted:
            if q >= e or buf[q] != 39:
                return False
            q += 1
        # separator " = " or ": " (a states key takes ": " only)
        if q + 3 <= e and buf[q] == 32 and buf[q + 1] == 61 and buf[q + 2] == 32 \
                and not in_states:
            if code == 2:
                nsr_eq = True
            q += 3
        elif q + 2 <= e and buf[q] == 58 and buf[q + 1] == 32:
            q += 2
        else:
            return False
        # the value runs to ", " or the end (a states value to "}" + end or ", ")
        ve = q
        while ve < e and not (buf[ve] == 44 and ve + 1 < e and buf[ve + 1] == 32):
            ve += 1
        if in_states and ve == e:      # the dict's last value: exactly one "}" ends the line
            if ve - 1 <= q or buf[ve - 1] != 125 or buf[ve - 2] == 125:
                return False
            ve -= 1
            in_states = False
            last = True
        else:
            last = False
        is_na = ve - q == 3 and buf[q] == na[0] and buf[q + 1] == na[1] \
            and buf[q + 2] == na[2]
        if code == 8:                  # timestamp = YYYY-MM-DD HH:MM:SS
            if ve - q != 19:
                return False
            y2, w = digits(buf, q, ve, 4)
            m2, w2 = digits(buf, w + 1, ve, 2)
            d2, w3 = digits(buf, w2 + 1, ve, 2)
            h2, w4 = digits(buf, w3 + 1, ve, 2)
            n2, w5 = digits(buf, w4 + 1, ve, 2)
            s2, _w6 = digits(buf, w5 + 1, ve, 2)
            if y2 < 0 or m2 < 0 or d2 < 0 or h2 < 0 or n2 < 0 or s2 < 0 \
                    or buf[w] != 45 or buf[w2] != 45 or buf[w3] != 32 \
                    or buf[w4] != 58 or buf[w5] != 58:
                return False
            t2 = epoch_us(y2, m2, d2, h2, n2, s2)
            if t2 < 0:
                return False
            ints[I_TS, k] = t2
            valid[I_TS, k] = True
        elif code == 3:                # currank_total_requests = a/b
            av, w = digit_run(buf, q, ve, 18)
            if av < 0 or w >= ve or buf[w] != 47:
                return False
            bv, w = digit_run(buf, w + 1, ve, 18)
            if bv < 0 or w != ve:
                return False
            ints[I_CUR, k] = av
            ints[I_TOT, k] = bv
            valid[I_CUR, k] = True
            valid[I_TOT, k] = True
        elif int_col[code] >= 0:
            if not is_na:
                v, w = digit_run(buf, q, ve, int_digits[code])
                if v < 0 or w != ve:
                    return False
                ints[int_col[code], k] = v
                valid[int_col[code], k] = True
        else:                           # a decimal with its unit
            fc = flt_col[code]
            if not is_na:
                u = ve
                if unit[code] == 1:
                    if ve - q < 3 or buf[ve - 2] != 109 or buf[ve - 1] != 115:
                        return False
                    u = ve - 2
                elif unit[code] == 2:
                    if ve - q < 2 or buf[ve - 1] != 115:
                        return False
                    u = ve - 1
                m = 0
                nd = 0
                frac = -1
                w = q
                while w < u:
                    c = buf[w]
                    if 48 <= c <= 57:
                        if nd < 18:      # more digits: Arrow reads the text
                            m = m * 10 + (c - 48)
                        nd += 1
                        if frac >= 0:
                            frac += 1
                    elif c == 46 and frac < 0 and w > q and w + 1 < u:
                        frac = 0
                    else:
                        return False
                    w += 1
                if nd == 0:
                    return False
                frac = max(frac, 0)
                if nd <= 18 and m < 9007199254740992 and frac <= 22:
                    floats[fc, k] = m / pow10[frac]
                else:
                    fneed[fc, k] = True
                    fspan[2 * fc, k] = q
                    fspan[2 * fc + 1, k] = u
                valid[fc + N_INTS, k] = True
        q = ve + (1 if last else 0)
        if last and q != e:
            return False
    if in_states:
        return False
    f = 0
    if (seen >> 2) & 1:
        f = 1
    if (seen >> 4) & 1 or (seen >> 5) & 1:
        f = 2
    if (seen >> 7) & 1 or nsr_eq:
        f = 3
    if (seen >> 9) & 1 or (seen >> 10) & 1:
        f = 4
    fmt[k] = f
    return True


@numba.njit(cache=True, nogil=True)
def scan(buf, starts, ends, fast_line, ints, floats, valid, fspan, fneed, fmt, sev):
    """Split ``buf`` into lines (starts/ends, newline excluded) and read the fast ones;
    returns (lines, fast rows). Row ``k`` of the outputs is line ``fast_line[k]``."""
    n = len(buf)
    i = 0
    p = 0
    k = 0
    while p < n:
        e = p
        while e < n and buf[e] != 10:
            e += 1
        starts[i] = p
        ends[i] = e
        if line(buf, p, e, k, ints, floats, valid, fspan, fneed, fmt, sev):
            fast_line[k] = i
            k += 1
        i += 1
        p = e + 1
    return i, k
