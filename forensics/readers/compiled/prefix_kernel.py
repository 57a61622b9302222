"""What the compiled log scanner reads of the prefix of a line it does not take
(:class:`forensics.readers.line_prefix.Known`): the commonest logger prefix, the C++ logger's
``[TensorRT-LLM][LEVEL]``, or no prefix possible, so that the reference path's prefix patterns
run over the rare other shapes only. Imports numba (imported only when that path runs)."""
import numba
import numpy as np

from forensics.readers.compiled import byte_tests
from forensics.readers.compiled.byte_tests import at, digit_run, is_digit, is_letter
from forensics.readers.compiled.cache_digest import source_digest
from forensics.readers.native_scan import SEVERITIES

#: The source of the byte tests :func:`prefix_shape` inlines: it is a closure over it, so
#: numba's cache is keyed to it (:mod:`.cache_digest`).
BYTES_DIGEST = source_digest((byte_tests,))
sev_codes = np.frombuffer(SEVERITIES.encode(), dtype=np.uint8).copy()
common_mid = np.frombuffer(b"] [TRT-LLM] [RANK ", dtype=np.uint8).copy()
cpp_head = np.frombuffer(b"[TensorRT-LLM][", dtype=np.uint8).copy()
#: the C++ logger's level words (``line_prefix.PREFIX_PATTERN``), joined, with their offsets
#: and the index of each one's letter in ``SEVERITIES``
cpp_words = np.frombuffer(b"ERRORWARNINGINFODEBUGVERBOSETRACEINTERNAL_ERROR", dtype=np.uint8).copy()
cpp_word_off = np.array([0, 5, 12, 16, 21, 28, 33, 47], np.int64)
cpp_word_sev = np.array([SEVERITIES.index(c) for c in "EWIDVVF"], np.int64)


def _prefix_shape_for(bytes_digest):
    """:func:`prefix_shape` for the byte tests of ``bytes_digest`` (see ``BYTES_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def prefix_shape(buf, p, e):
        """(shape, body offset, rank, severity index) of the line ``p:e`` (``line_prefix.Known``):
        COMMON when it starts with :data:`line_prefix.COMMON_MATCH`'s prefix, CPP when with
        ``[TensorRT-LLM][LEVEL]``, BARE when no part of :data:`line_prefix.PREFIX_PATTERN` can
        match at its start (first character after any spaces and tabs: not ``[`` nor ``>``, no
        digits then ``:`` or ``-``, no possible host label, glog or uvicorn level: e.g. a
        traceback's lines, a C++ backtrace's numbered frames),
        else OTHER (the grammar reads it)."""
        bytes_digest  # noqa: B018 (a closure cell: keys numba's cache to byte_tests)
        n = e - p
        c0 = at(buf, p) if n > 0 else 0
        if c0 == 91:   # "["
            # [MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [RANK n] [S] then anything but "["
            if n >= 45:   # the shortest such prefix
                ok = True
                for j in range(1, 20):
                    c = at(buf, p + j)
                    if j in (3, 6):
                        ok = ok and c == 47
                    elif j == 11:
                        ok = ok and c == 45
                    elif j in (14, 17):
                        ok = ok and c == 58
                    else:
                        ok = ok and is_digit(c)
                if ok:
                    q = p + 20
                    for j in range(len(common_mid)):
                        if at(buf, q + j) != common_mid[j]:
                            ok = False
                            break
                if ok:
                    q = p + 20 + len(common_mid)
                    r, w = digit_run(buf, q, e, 9)
                    if r >= 0 and w + 5 <= e and at(buf, w) == 93 and at(buf, w + 1) == 32 \
                            and at(buf, w + 2) == 91 and at(buf, w + 4) == 93:
                        s = at(buf, w + 3)
                        sev = -1
                        for j in range(len(sev_codes)):
                            if sev_codes[j] == s:
                                sev = j
                        # "] " then the end, or a character that is not "["
                        if sev >= 0 and w + 5 < e and at(buf, w + 5) == 32 \
                                and (w + 6 == e or at(buf, w + 6) != 91):
                            return 1, w + 6 - p, r, sev
            # [TensorRT-LLM][LEVEL] and an optional space
            if n < len(cpp_head) + 2:
                return 0, 0, 0, 0
            for j in range(len(cpp_head)):
                if at(buf, p + j) != cpp_head[j]:
                    return 0, 0, 0, 0
            q = p + len(cpp_head)
            for k in range(len(cpp_word_sev)):
                o = cpp_word_off[k]
                ln = cpp_word_off[k + 1] - o
                if q + ln < e and at(buf, q + ln) == 93:
                    same = True
                    for j in range(ln):
                        if at(buf, q + j) != cpp_words[o + j]:
                            same = False
                            break
                    if same:
                        b = q + ln + 1
                        if b < e and at(buf, b) == 32:
                            b += 1
                        return 2, b - p, 0, cpp_word_sev[k]
            return 0, 0, 0, 0
        q = p
        while q < e and (at(buf, q) == 32 or at(buf, q) == 9):
            q += 1
        if q == e:
            return 3, 0, 0, 0
        c = at(buf, q)
        if c == 91 or c == 62:   # "[", ">"
            return 0, 0, 0, 0
        if is_digit(c):   # digits then ":" (srun) or "-" (a date) may be a prefix
            w = q
            while w < e and is_digit(at(buf, w)):
                w += 1
            if w < e and (at(buf, w) == 58 or at(buf, w) == 45):
                return 0, 0, 0, 0
            return 3, 0, 0, 0
        if is_letter(c):
            if q == p:   # a pdsh host label: letters, digits, "." and "-" holding a digit, ": "
                w = q + 1
                digit = False
                while w < e and (is_letter(at(buf, w)) or is_digit(at(buf, w))
                                 or at(buf, w) == 46 or at(buf, w) == 45):
                    digit = digit or is_digit(at(buf, w))
                    w += 1
                if digit and w < e and at(buf, w) == 58:
                    return 0, 0, 0, 0
            # glog: a level letter and a digit
            if (c == 73 or c == 87 or c == 69 or c == 70) and q + 1 < e and is_digit(at(buf, q + 1)):
                return 0, 0, 0, 0
            # uvicorn: an upper-case word and ":"
            w = q
            while w < e and 65 <= at(buf, w) <= 90 or (w < e and at(buf, w) == 95):
                w += 1
            if w > q and w < e and at(buf, w) == 58:
                return 0, 0, 0, 0
        return 3, 0, 0, 0

    return prefix_shape


prefix_shape = _prefix_shape_for(BYTES_DIGEST)
