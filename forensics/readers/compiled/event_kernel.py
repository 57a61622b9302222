"""Whole Python tracebacks and C++ backtraces among a block's other lines, read by the compiled
scanner (:mod:`forensics.readers.native_events`; imports numba: imported only when that path
runs).

Only the plainest shapes are taken, each exactly as the line-by-line reader
(:mod:`forensics.readers.traceback_event`, :class:`~forensics.readers.log_events.CppBacktrace`)
would end and read it, and every line without a prefix (``SHAPE_BARE``: its body is the line):

* a traceback: ``Traceback (most recent call last):``, then indented lines (frames
  ``File "f", line N, in fn``, their source, ``^``/``~`` markers), then an unindented exception
  line ``Type[: message]``, then a line that ends it (an iteration or logger line, or a line
  with text that is no chain message). Lines of printable ASCII only (so ``\\s`` is a space);
  no blank line, no exception-group ``|``/``+``, no ``File "`` but as a frame, no ``iter``;
* a C++ backtrace: numbered frames ``N  0xADDR ...``, then a line that is not one.

Anything else (chains, groups, blank lines, a block's last line, interleaved streams) is left
to the line-by-line reader.
"""
import numba
import numpy as np
from numba import types

from forensics.readers.compiled import byte_tests
from forensics.readers.compiled.byte_tests import at, is_digit, is_letter
from forensics.readers.compiled.cache_digest import source_digest

#: The byte tests the functions here inline (see :mod:`.cache_digest`).
BYTES_DIGEST = source_digest((byte_tests,))
#: Prefix shapes (``line_prefix.SHAPE_*``: other, common, C++, bare).
OTHER, COMMON, CPP, BARE = range(4)
#: Rows of the event outputs: first line, last line, kind (``TRACEBACK``, ``ADP_ASSERT``,
#: ``CPP_BACKTRACE``), end of the exception type, start of its message (-1: none), whether the
#: exception line may hold a typed failure message (``failure_messages.match``: the line-by-line
#: reader adds its numbers), the innermost frame and the executor frame (row of the frame
#: outputs, -1: none).
EV_ROWS = 8
TRACEBACK, ADP_ASSERT, CPP_BACKTRACE = range(3)
#: Rows of the frame outputs: event, line, file start and end, line number (-1: none), function
#: start (-1: none; it runs to the line's end), source start and end (-1: none).
FR_ROWS = 8
header = np.frombuffer(b"Traceback (most recent call last):", np.uint8).copy()
file_head = np.frombuffer(b'File "', np.uint8).copy()
line_head = np.frombuffer(b", line ", np.uint8).copy()
in_head = np.frombuffer(b", in ", np.uint8).copy()
above = np.frombuffer(b"above exception", np.uint8).copy()
iter_word = np.frombuffer(b"iter", np.uint8).copy()
#: ``traceback_event.ADP_ASSERT_SOURCE`` / ``ADP_FUNCTION`` / ``EXECUTOR_PATH``, and the type an
#: assert raises
adp_source = np.frombuffer(b"expected_num_active_requests >= len(self.active_requests)",
                           np.uint8).copy()
adp_function = np.frombuffer(b"_pad_attention_dp_dummy_request", np.uint8).copy()
executor_path = np.frombuffer(b"tensorrt_llm/", np.uint8).copy()
assertion = np.frombuffer(b"AssertionError", np.uint8).copy()
#: words of the messages ``failure_messages.match`` types (its tests before its patterns)
typed_words = np.frombuffer(b"block:Watchdog caughtCUDA out of memorywaiting for clients",
                            np.uint8).copy()
typed_off = np.array([0, 6, 21, 39, 58], np.int64)
#: the exception type's endings (``traceback_event._EXC``), joined, with their offsets
suffixes = np.frombuffer(b"ErrorExceptionExitInterruptWarningGroup", np.uint8).copy()
suffix_off = np.array([0, 5, 14, 18, 27, 34, 39], np.int64)


def _kernel_for(bytes_digest):
    """:func:`events` for the byte tests of ``bytes_digest`` (see ``BYTES_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
    def has(buf, q, e, word):
        """Whether ``word`` is at ``q`` (before ``e``)."""
        if q + len(word) > e:
            return False
        for j in range(len(word)):
            if at(buf, q + j) != word[j]:
                return False
        return True

    @numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
    def find(buf, p, e, word):
        """The first place of ``word`` in ``p:e``, -1 if none."""
        for q in range(p, e - len(word) + 1):
            if has(buf, q, e, word):
                return q
        return -1

    @numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
    def printable(buf, p, e):
        """Whether every byte of ``p:e`` is printable ASCII (no tab, no control, no UTF-8)."""
        for q in range(p, e):
            c = at(buf, q)
            if c < 32 or c > 126:
                return False
        return True

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def frame(buf, w, e):
        """(1, file start, file end, line number, function start) when the line from ``w`` (its
        first non-space) is a frame as ``traceback_event._FRAME`` reads it; (0, ...) when it
        holds no ``File "``; (-1, ...) when it holds one otherwise (left to the reader)."""
        if not has(buf, w, e, file_head):
            return (-1 if find(buf, w, e, file_head) >= 0 else 0), 0, 0, -1, -1
        fs = w + len(file_head)
        fe = fs
        while fe < e and at(buf, fe) != 34:
            fe += 1
        if fe == e or fe == fs:
            return -1, 0, 0, -1, -1
        r = fe + 1
        ln = -1
        if has(buf, r, e, line_head):
            d = r + len(line_head)
            r = d
            ln = 0
            while r < e and is_digit(at(buf, r)):
                ln = ln * 10 + (at(buf, r) - 48)
                r += 1
            if r == d or r - d > 18:
                return -1, 0, 0, -1, -1
        if r == e:
            return 1, fs, fe, ln, -1
        if has(buf, r, e, in_head) and r + len(in_head) < e:
            return 1, fs, fe, ln, r + len(in_head)
        return -1, 0, 0, -1, -1

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def same(buf, p, e, word):
        """Whether ``p:e`` is ``word``."""
        return e - p == len(word) and has(buf, p, e, word)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def typed(buf, p, e):
        """Whether ``p:e`` holds a word of ``typed_words``."""
        for k in range(len(typed_off) - 1):
            o = typed_off[k]
            ln = typed_off[k + 1] - o
            for q in range(p, e - ln + 1):
                hit = True
                for j in range(ln):
                    if at(buf, q + j) != typed_words[o + j]:
                        hit = False
                        break
                if hit:
                    return True
        return False

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def executor_file(buf, p, e):
        """Whether the file ``p:e`` holds ``executor_path`` (a ``\\`` read as ``/``)."""
        for q in range(p, e - len(executor_path) + 1):
            hit = True
            for j in range(len(executor_path)):
                c = at(buf, q + j)
                if c != executor_path[j] and not (c == 92 and executor_path[j] == 47):
                    hit = False
                    break
            if hit:
                return True
        return False

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def carets(buf, w, e):
        """Whether the line from ``w`` (its first non-space) is ``^``/``~`` markers."""
        c = at(buf, w)
        if c != 94 and c != 126:
            return False
        for q in range(w, e):
            c = at(buf, q)
            if c != 94 and c != 126 and c != 32:
                return False
        return True

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def exception(buf, p, e):
        """(end of the type, start of the message or -1) of an exception line
        (``traceback_event._EXC``), end -1 when ``p:e`` is none."""
        if p == e:
            return -1, -1
        c = at(buf, p)
        if not (is_letter(c) or c == 95):
            return -1, -1
        w = p + 1
        while w < e:
            c = at(buf, w)
            if not (is_letter(c) or is_digit(c) or c == 95 or c == 46):
                break
            w += 1
        if w < e and at(buf, w) != 58:
            return -1, -1
        ends = False
        for k in range(len(suffix_off) - 1):
            o = suffix_off[k]
            ln = suffix_off[k + 1] - o
            if w - ln >= p + 1:   # a first character, then the ending
                same = True
                for j in range(ln):
                    if at(buf, w - ln + j) != suffixes[o + j]:
                        same = False
                        break
                if same:
                    ends = True
                    break
        if not ends:
            return -1, -1
        if w == e:
            return w, -1
        m = w + 1
        if m < e and at(buf, m) == 32:
            m += 1
        return w, m

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def cpp_frame(buf, p, e):
        """1 when ``p:e`` starts as ``log_events.CPP_FRAME`` (``N  0xADDR `` ), 0 when not, -1
        when a byte it depends on is not printable ASCII (``\\d``/``\\s`` of Unicode)."""
        q = p
        while q < e and is_digit(at(buf, q)):
            q += 1
        if q < e and (at(buf, q) < 32 or at(buf, q) > 126):
            return -1
        if q == p or q == e or at(buf, q) != 32:
            return 0
        while q < e and at(buf, q) == 32:
            q += 1
        if q < e and (at(buf, q) < 32 or at(buf, q) > 126):
            return -1
        if not (q + 1 < e and at(buf, q) == 48 and at(buf, q + 1) == 120):
            return 0
        h = q + 2
        while h < e:
            c = at(buf, h)
            if not (is_digit(c) or 97 <= c <= 102 or 65 <= c <= 70):
                break
            h += 1
        if h == q + 2 or h == e:
            return 0
        c = at(buf, h)
        if c < 32 or c > 126:
            return -1
        return 1 if c == 32 else 0

    @numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
    def at_line(line, j, o, q):
        """The other line of block line ``j``, one of ``o:q`` (lines in a row)."""
        return o + (j - line[o])

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def ends_after_exception(buf, s, e, sh):
        """Whether the other line ``s:e`` of shape ``sh`` ends a traceback after its exception
        line: a logger line, or a bare line with text that is no chain message."""
        if sh == COMMON or sh == CPP:
            return True
        if sh != BARE or not printable(buf, s, e) or find(buf, s, e, above) >= 0:
            return False
        for q in range(s, e):
            if at(buf, q) != 32:
                return True
        return False

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def traceback_at(buf, n_lines, line, starts, ends, shape, o, k, ev, fr, f):
        """Read the traceback whose header is other line ``o`` as event ``k``, its frames from
        row ``f``; returns (its last other line, frames after) or (-1, f)."""
        m = len(line)
        f0 = f
        cur = -1   # the last frame while its source line is not read
        saw_assert = False
        q = o + 1
        while q < m and line[q] == line[q - 1] + 1:
            p, e = starts[q], ends[q]
            if shape[q] != BARE or not printable(buf, p, e):
                return -1, f0
            if p < e and at(buf, p) == 32:   # indented: a frame, its source or markers
                w = p
                while w < e and at(buf, w) == 32:
                    w += 1
                if w == e:
                    return -1, f0
                c = at(buf, w)
                if c == 124 or c == 43 or has(buf, w, e, iter_word):   # "|", "+", "iter"
                    return -1, f0
                kind, fs, fe, ln, fn = frame(buf, w, e)
                if kind < 0:
                    return -1, f0
                saw_assert = saw_assert or find(buf, w, e, adp_source) >= 0
                if kind == 1:
                    if f == fr.shape[1]:
                        return -1, f0
                    fr[0, f] = k
                    fr[1, f] = line[q]
                    fr[2, f] = fs
                    fr[3, f] = fe
                    fr[4, f] = ln
                    fr[5, f] = fn
                    fr[6, f] = -1
                    fr[7, f] = -1
                    cur = f
                    f += 1
                elif cur >= 0 and not carets(buf, w, e):
                    t = e
                    while at(buf, t - 1) == 32:
                        t -= 1
                    fr[6, cur] = w
                    fr[7, cur] = t
                    cur = -1
                q += 1
                continue
            te, ms = exception(buf, p, e)
            if te < 0:
                return -1, f0
            j = line[q] + 1   # the line after: it must end the traceback
            if j >= n_lines:
                return -1, f0
            if q + 1 < m and line[q + 1] == j and not ends_after_exception(
                    buf, starts[q + 1], ends[q + 1], shape[q + 1]):
                return -1, f0
            inner = f - 1 if f > f0 else -1
            adp = saw_assert
            if inner >= 0 and fr[5, inner] >= 0 and same(buf, fr[5, inner], ends[at_line(
                    line, fr[1, inner], o, q)], adp_function) and same(buf, p, te, assertion):
                adp = True
            exe = -1
            for g in range(f - 1, f0 - 1, -1):
                if executor_file(buf, fr[2, g], fr[3, g]):
                    exe = g
                    break
            ev[0, k] = line[o]
            ev[1, k] = line[q]
            ev[2, k] = ADP_ASSERT if adp else TRACEBACK
            ev[3, k] = te
            ev[4, k] = ms
            ev[5, k] = 1 if typed(buf, p, e) else 0
            ev[6, k] = inner
            ev[7, k] = exe
            return q, f
        return -1, f0

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def backtrace_at(buf, n_lines, line, starts, ends, shape, boff, o, k, ev):
        """Read the C++ backtrace whose first frame is other line ``o`` as event ``k``; returns
        its last other line, or -1."""
        m = len(line)
        q = o + 1
        while q < m and line[q] == line[q - 1] + 1 and shape[q] == BARE \
                and cpp_frame(buf, starts[q], ends[q]) == 1:
            q += 1
        j = line[q - 1] + 1
        if j >= n_lines:
            return -1
        if q < m and line[q] == j:   # an other line (else an iteration line: it ends there)
            sh = shape[q]
            if sh == OTHER:
                return -1
            b = starts[q] + (boff[q] if sh != BARE else 0)
            if cpp_frame(buf, b, ends[q]) != 0:
                return -1
        ev[0, k] = line[o]
        ev[1, k] = line[q - 1]
        ev[2, k] = CPP_BACKTRACE
        ev[3, k] = -1
        ev[4, k] = -1
        ev[5, k] = 0
        ev[6, k] = -1
        ev[7, k] = -1
        return q - 1

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def events(buf, n_lines, line, starts, ends, shape, boff, ev, fr, out):
        """The whole tracebacks and C++ backtraces among the other lines (``line``: their
        indices in the block of ``n_lines`` lines, in order; ``starts``/``ends``/``shape``/
        ``boff`` as the scan gave them) into ``ev`` (``EV_ROWS`` rows) and ``fr`` (``FR_ROWS``);
        ``out``: events, frames."""
        bytes_digest  # noqa: B018 (a closure cell: keys numba's cache to byte_tests)
        m = len(line)
        k = 0
        f = 0
        o = 0
        while o < m and k < ev.shape[1]:
            p, e = starts[o], ends[o]
            last = -1
            if shape[o] == BARE:
                if e - p == len(header) and has(buf, p, e, header):
                    last, f = traceback_at(buf, n_lines, line, starts, ends, shape, o, k, ev,
                                           fr, f)
                elif cpp_frame(buf, p, e) == 1:
                    last = backtrace_at(buf, n_lines, line, starts, ends, shape, boff, o, k,
                                        ev)
            if last >= 0:
                k += 1
                o = last + 1
            else:
                o += 1
        out[0] = k
        out[1] = f
        return k

    return events


events = _kernel_for(BYTES_DIGEST)


_P8, _P64 = types.CPointer(types.uint8), types.CPointer(types.int64)
#: C signature of the entry point (``loader`` calls it through ctypes).
EVENTS_SIG = types.int64(_P8, types.int64, types.int64, types.int64, _P64, _P64, _P64, _P8,
                         _P64, _P64, types.int64, _P64, types.int64, _P64)


def events_c_for(bytes_digest):
    """:func:`events` over raw pointers, for the byte tests of ``bytes_digest`` (a ``cfunc``
    compiles when defined: made by ``scan_kernel.ENTRY_POINTS`` on first use)."""

    @numba.cfunc(EVENTS_SIG, cache=True, nogil=True, error_model="numpy")
    def events_c(buf, n, n_lines, m, line, starts, ends, shape, boff, ev, cap_ev, fr, cap_fr,
                 out):
        """:func:`events` of ``m`` other lines; ``ev``/``fr`` of ``cap_ev``/``cap_fr`` rows."""
        bytes_digest  # noqa: B018 (a closure cell: keys numba's cache to byte_tests)
        return events(numba.carray(buf, (n,)), n_lines, numba.carray(line, (m,)),
                      numba.carray(starts, (m,)), numba.carray(ends, (m,)),
                      numba.carray(shape, (m,)), numba.carray(boff, (m,)),
                      numba.carray(ev, (EV_ROWS, cap_ev)), numba.carray(fr, (FR_ROWS, cap_fr)),
                      numba.carray(out, (2,)))

    return events_c
