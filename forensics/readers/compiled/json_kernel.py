"""The compiled JSON Lines scanners of :mod:`forensics.readers.json_scan` (imports numba:
imported only to compile them, once per install: later processes load the entry points'
saved object, :mod:`forensics.readers.compiled.loader`). Module-level functions and constant
arrays, so numba's cache works; the conventions of :mod:`forensics.readers.compiled.scan_kernel`
(``cache``, ``nogil``, ``cfunc`` entry points over raw pointers). The JSON tokens they read
(whitespace, numbers, literals, strings, keys) are :mod:`forensics.readers.compiled.json_tokens`;
the IterationStats scanner behind ``stats_c`` is :mod:`forensics.readers.compiled.stats_kernel`.

``_nrt=False`` (a private numba option): these functions allocate nothing (the caller passes
every array), and without numba's reference counting they ran 2.9x faster on a stats block
(4.05 -> 1.42 ns per byte, same process, best of 15), presumably the reference-count
updates of the arrays passed to each helper call. Helpers are inlined by numba (``inline="always"``):
another ~9 % (1.39 -> 1.27 ns per byte on a trace block, 1.37 -> 1.25 on a stats block).

Every function returns a status: 0 when every line of the block was read with certainty,
else a code > 0 and the caller hands the whole block to the reference reader (per object or
per line). Nothing read from a declined block is used.
"""
import numba
import numpy as np
from numba import types

from forensics.readers.compiled import json_tokens, stats_kernel
from forensics.readers.compiled.cache_digest import source_digest
from forensics.readers.compiled.json_tokens import (MAX_INT_DIGITS, digit_run, json_bool,
                                                    json_int, key_at, literal, load8,
                                                    member_key, next_member, null_b, skip_ws,
                                                    word_is)
from forensics.readers.compiled.stats_kernel import stats
from forensics.readers.json_scan import (BAD_LINE, BAD_VALUE, FULL, OK, SIGNATURES, UNKNOWN_KEY,
                                         word_table)

#: The source of the tokens these scanners inline: the functions that take them in (and the
#: entry points that link those) are closures over it, so numba's cache is keyed to it.
TOKENS_DIGEST = source_digest((json_tokens,))
#: The same for the stats scanner's entry point, which links :mod:`stats_kernel` too.
STATS_DIGEST = source_digest((json_tokens, stats_kernel))

# ---------------------------------------------------------------------------------- trace
# frame keys: 0 kind, 1 iter, 2 rank, 3 requests, then the optional decisions (json_scan
# passes their names and whether each is an int column)
REQ_KEYS = np.frombuffer(b"idstatedummy", dtype=np.uint8).copy()
REQ_OFFS = np.array([0, 2, 7, 12], np.int64)
REQ_W, REQ_WO, REQ_WL = word_table(("id", "state", "dummy"))
frame_b = np.frombuffer(b'"frame"', dtype=np.uint8).copy()
# the common request layout (Python's json.dumps): '{"id": ' digits ', "state": "' name '"}'
REQ_HEAD = np.uint64(int.from_bytes(b'{"id": ', "little"))
REQ_MID = np.uint64(int.from_bytes(b', "state', "little"))
REQ_MID2 = np.uint64(int.from_bytes(b'": "', "little"))


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def plain_request(buf, words, q, n, state_names, state_offs, sw, swo, swl, guess):
    """The request object at ``q`` when it is laid out exactly ``{"id": N, "state": "NAME"}``
    (N a JSON integer >= 0 of at most 18 digits, NAME a known state): (id, index of the state
    name, position after the object); the index is -1 for any other layout, which the caller
    then reads token by token (with the same result for this one)."""
    end = len(words) * 8
    if q + 32 > end or not word_is(words, q, REQ_HEAD, 7):
        return 0, -1, q
    a = q + 7
    v, sig, _, e = digit_run(buf, a, n, 0, 0)
    if e == a or (buf[a] == 48 and e - a > 1) or sig > MAX_INT_DIGITS or e + 24 > end \
            or load8(words, e) != REQ_MID or not word_is(words, e + 8, REQ_MID2, 4):
        return 0, -1, q
    s, w = key_at(buf, words, e + 12, n, state_names, state_offs, sw, swo, swl, guess)
    if s < 0 or w + 1 >= n or buf[w + 1] != 125:
        return 0, -1, q
    return v, s, w + 2


def _frames_for(tokens_digest):
    """:func:`frames` for the tokens of ``tokens_digest`` (see ``TOKENS_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, _nrt=False)
    def frames(buf, words, tp_size, keys, key_offs, kw, kwo, kwl, opt_is_int, state_names,
               state_offs, sw, swo, swl, state_codes, f_iter, f_rank, f_nreq, f_ndummy, opt_val,
               opt_valid, r_id, r_state, r_dummy):
        """Read every line of ``buf`` as a frame record; returns (status, frames, requests).

        A line is taken only when it is ``{...}`` (a ``\\r`` allowed before the newline) with the
        keys ``kind`` (exactly ``"frame"``), ``iter`` (int >= 0), ``rank`` (int in
        ``[0, tp_size)``), ``requests`` (a list of ``{"id": int, "state": known name[, "dummy":
        true|false]}``) and any of the optional decisions (int, or true/false, or null), each key
        at most once, nothing else; JSON whitespace anywhere between tokens.
        """
        tokens_digest  # noqa: B018 (a closure cell: keys numba's cache to the tokens)
        n = len(buf)
        n_keys = len(key_offs) - 1
        n_opt = n_keys - 4
        p = 0
        f = 0
        r = 0
        r_cap = len(r_id)
        guess_state = 0
        while p < n:
            if f >= len(f_iter):
                return FULL, f, r
            q = skip_ws(buf, p, n)
            if q >= n or buf[q] != 123:
                return BAD_LINE, f, r
            q += 1
            seen = 0
            for j in range(n_opt):
                opt_valid[j, f] = False
            guess_key = 0
            nreq = 0
            ndummy = 0
            q = skip_ws(buf, q, n)
            if q < n and buf[q] == 125:
                return BAD_LINE, f, r          # {}: no kind
            while True:
                # "key":
                key, e, q = member_key(buf, words, q, n, keys, key_offs, kw, kwo, kwl, guess_key)
                if e < 0:
                    return BAD_LINE, f, r
                if key < 0:
                    return UNKNOWN_KEY, f, r
                if (seen >> key) & 1:
                    return BAD_LINE, f, r     # a key given twice
                seen |= 1 << key
                guess_key = key + 1
                if q < 0:
                    return BAD_LINE, f, r
                if key == 0:
                    if q + 7 > n:
                        return BAD_LINE, f, r
                    for j in range(7):
                        if buf[q + j] != frame_b[j]:
                            return BAD_VALUE, f, r
                    q += 7
                elif key == 1 or key == 2:
                    ok, v, q = json_int(buf, q, n)
                    if not ok or v < 0 or (key == 2 and v >= tp_size):
                        return BAD_VALUE, f, r
                    if key == 1:
                        f_iter[f] = v
                    else:
                        f_rank[f] = v
                elif key == 3:
                    if q >= n or buf[q] != 91:
                        return BAD_VALUE, f, r
                    q = skip_ws(buf, q + 1, n)
                    if q < n and buf[q] == 93:
                        q += 1
                    else:
                        while True:
                            if r >= r_cap:
                                return FULL, f, r
                            if q >= n or buf[q] != 123:
                                return BAD_VALUE, f, r
                            dummy = False
                            # the common layout first: {"id": N, "state": "NAME"}
                            v, s, e = plain_request(buf, words, q, n, state_names, state_offs,
                                                    sw, swo, swl, guess_state)
                            if s >= 0:
                                r_id[r] = v
                                r_state[r] = state_codes[s]
                                guess_state = s
                                q = e
                            else:
                                q = skip_ws(buf, q + 1, n)
                                rseen = 0
                                guess_rk = 0
                                while True:
                                    rk, e, q = member_key(buf, words, q, n, REQ_KEYS, REQ_OFFS,
                                                          REQ_W, REQ_WO, REQ_WL, guess_rk)
                                    if rk < 0 or (rseen >> rk) & 1:
                                        return BAD_VALUE, f, r
                                    rseen |= 1 << rk
                                    guess_rk = rk + 1
                                    if q < 0:
                                        return BAD_LINE, f, r
                                    if rk == 0:
                                        ok, v, q = json_int(buf, q, n)
                                        if not ok:
                                            return BAD_VALUE, f, r
                                        r_id[r] = v
                                    elif rk == 1:
                                        if q >= n or buf[q] != 34:
                                            return BAD_VALUE, f, r
                                        s, e = key_at(buf, words, q + 1, n, state_names,
                                                      state_offs, sw, swo, swl, guess_state)
                                        if s < 0:
                                            return BAD_VALUE, f, r
                                        guess_state = s
                                        r_state[r] = state_codes[s]
                                        q = e + 1
                                    else:
                                        ok, dummy, q = json_bool(buf, q, n)
                                        if not ok:
                                            return BAD_VALUE, f, r
                                    more, q = next_member(buf, q, n, 125)
                                    if more < 0:
                                        return BAD_LINE, f, r
                                    if more == 0:
                                        break
                                if (rseen & 3) != 3:
                                    return BAD_VALUE, f, r     # id or state missing
                            r_dummy[r] = dummy
                            ndummy += dummy
                            r += 1
                            nreq += 1
                            more, q = next_member(buf, q, n, 93)
                            if more < 0:
                                return BAD_LINE, f, r
                            if more == 0:
                                break
                else:
                    j = key - 4
                    if literal(buf, q, n, null_b):
                        q += 4
                    elif opt_is_int[j]:
                        ok, v, q = json_int(buf, q, n)
                        if not ok:
                            return BAD_VALUE, f, r
                        opt_val[j, f] = v
                        opt_valid[j, f] = True
                    else:
                        ok, v, q = json_bool(buf, q, n)
                        if not ok:
                            return BAD_VALUE, f, r
                        opt_val[j, f] = v
                        opt_valid[j, f] = True
                more, q = next_member(buf, q, n, 125)
                if more < 0:
                    return BAD_LINE, f, r
                if more == 0:
                    break
            if (seen & 15) != 15:
                return BAD_VALUE, f, r            # kind, iter, rank or requests missing
            q = skip_ws(buf, q, n)
            if q < n and buf[q] != 10:
                return BAD_LINE, f, r
            f_nreq[f] = nreq
            f_ndummy[f] = ndummy
            f += 1
            p = q + 1
        return OK, f, r

    return frames


frames = _frames_for(TOKENS_DIGEST)


@numba.njit(cache=True, nogil=True, _nrt=False)
def count_byte(buf, c):
    """How many bytes of ``buf`` equal ``c`` (a loop numba vectorises)."""
    k = 0
    for i in range(len(buf)):
        k += buf[i] == c
    return k




# ------------------------------------------------------------------------ entry points
# cfuncs over raw pointers (no numba runtime needed to call them: the loader saves their
# object code and links it with llvmlite alone). Tables are packed into few arrays: ``slots``
# (9, S + 1) and ``cols`` (3, C) of the stats template, ``keys`` and ``states`` (4, K + 1) of
# the frame scanner; json_scan builds them (the rows are named there).
_ARG_TYPES = {"i": types.int64, "b": types.CPointer(types.uint8),
              "h": types.CPointer(types.int16), "l": types.CPointer(types.int32),
              "q": types.CPointer(types.int64), "Q": types.CPointer(types.uint64),
              "d": types.CPointer(types.float64), "?": types.CPointer(types.boolean)}
STATS_SIG, FRAMES_SIG, COUNT_SIG = (types.int64(*(_ARG_TYPES[c] for c in SIGNATURES[name]))
                                    for name in ("stats", "frames", "count"))


def _stats_c_for(tokens_digest):
    """:func:`stats_c` for the sources of ``tokens_digest`` (see ``STATS_DIGEST``)."""

    @numba.cfunc(STATS_SIG, cache=True, nogil=True, error_model="numpy")
    def stats_c(buf, n, words, names, n_names, name_words, n_name_words, slots, n_slots, cols,
                col_lim, n_cols, dotted, n_dotted, ts_slot, cap, entries, coli, colf, colv, kbytes,
                n_kbytes, koff, fval, foff, ts_bytes, ts_off, ts_valid, fix, skel, where):
        """:func:`stats` over raw pointers; the rows read go to ``where[35]``."""
        tokens_digest  # noqa: B018 (a closure cell: keys numba's cache to the tokens)
        s = numba.carray(slots, (9, n_slots + 1))
        c = numba.carray(cols, (3, n_cols))
        w = numba.carray(where, (37,))
        status, rows = stats(
            numba.carray(buf, (n,)), numba.carray(words, (n // 8,)), numba.carray(names, (n_names,)),
            s[0], numba.carray(name_words, (n_name_words,)), s[7], s[8, :n_slots], s[1, :n_slots],
            s[2, :n_slots], s[3, :n_slots], s[4], s[5, :n_slots], c[0], c[1], c[2],
            numba.carray(col_lim, (n_cols,)), ts_slot, numba.carray(dotted, (n_dotted,)), s[6],
            numba.carray(coli, (n_cols, cap)), numba.carray(colf, (n_cols, cap)),
            numba.carray(colv, (n_cols, cap)), numba.carray(kbytes, (n_kbytes,)),
            numba.carray(koff, (entries + 1,)), numba.carray(fval, (entries,)),
            numba.carray(foff, (cap + 1,)), numba.carray(ts_bytes, (n,)),
            numba.carray(ts_off, (cap + 1,)), numba.carray(ts_valid, (cap,)),
            numba.carray(fix, (3, entries)), numba.carray(skel, (6, n_slots + 1)), w)
        w[35] = rows
        return status

    return stats_c


stats_c = _stats_c_for(STATS_DIGEST)


def _frames_c_for(tokens_digest):
    """:func:`frames_c` for the tokens of ``tokens_digest`` (see ``TOKENS_DIGEST``)."""

    @numba.cfunc(FRAMES_SIG, cache=True, nogil=True, error_model="numpy")
    def frames_c(buf, n, words, tp_size, keys, n_keys_bytes, key_tab, key_words, n_key_words,
                 n_keys, states, n_states_bytes, state_tab, state_words, n_state_words, n_states,
                 cap, r_cap, f_iter, f_rank, f_nreq, f_nd, opt_val, opt_valid, r_id, r_state,
                 r_dummy, out):
        """:func:`frames` over raw pointers; (frames, requests) read go to ``out``."""
        tokens_digest  # noqa: B018 (a closure cell: keys numba's cache to the tokens)
        kt = numba.carray(key_tab, (4, n_keys + 1))
        st = numba.carray(state_tab, (4, n_states + 1))
        n_opt = n_keys - 4
        status, nf, nr = frames(
            numba.carray(buf, (n,)), numba.carray(words, (n // 8,)), tp_size,
            numba.carray(keys, (n_keys_bytes,)), kt[0], numba.carray(key_words, (n_key_words,)),
            kt[1], kt[2, :n_keys], kt[3, :n_opt], numba.carray(states, (n_states_bytes,)), st[0],
            numba.carray(state_words, (n_state_words,)), st[1], st[2, :n_states], st[3, :n_states],
            numba.carray(f_iter, (cap,)), numba.carray(f_rank, (cap,)), numba.carray(f_nreq, (cap,)),
            numba.carray(f_nd, (cap,)), numba.carray(opt_val, (n_opt, cap)),
            numba.carray(opt_valid, (n_opt, cap)), numba.carray(r_id, (r_cap,)),
            numba.carray(r_state, (r_cap,)), numba.carray(r_dummy, (r_cap,)))
        o = numba.carray(out, (2,))
        o[0] = nf
        o[1] = nr
        return status

    return frames_c


frames_c = _frames_c_for(TOKENS_DIGEST)


@numba.cfunc(COUNT_SIG, cache=True, nogil=True, error_model="numpy")
def count_c(buf, n, c):
    """:func:`count_byte` over a raw pointer."""
    return count_byte(numba.carray(buf, (n,)), c)


#: The entry points, by the names json_scan.LIBRARY knows them.
ENTRY_POINTS = {"stats": stats_c, "frames": frames_c, "count": count_c}
