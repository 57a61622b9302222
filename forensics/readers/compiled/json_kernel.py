"""The compiled JSON Lines scanners of :mod:`forensics.readers.json_scan` (imports numba:
imported only to compile them, once per install: later processes load the entry points'
saved object, :mod:`forensics.readers.compiled.loader`). Module-level functions and constant
arrays, so numba's cache works; the conventions of :mod:`forensics.readers.compiled.scan_kernel`
(``cache``, ``nogil``, ``cfunc`` entry points over raw pointers). The JSON tokens they read
(whitespace, numbers, literals, strings, keys) are :mod:`forensics.readers.compiled.json_tokens`.

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

from forensics.readers.compiled import json_tokens
from forensics.readers.compiled.cache_digest import source_digest
from forensics.readers.compiled.json_tokens import (K_FLOAT, K_INT, MAX_INT_DIGITS, copy_bytes,
                                                    digit_run, false_b, json_bool, json_int,
                                                    json_number, key_at, literal, load8,
                                                    member_key, name_here, next_member, null_b,
                                                    plain_string_end, same_bytes, skip_ws,
                                                    string_end, true_b, word_is)
from forensics.readers.json_scan import (
    BAD_LINE,
    BAD_VALUE,
    FULL,
    NEW_OBJECT,
    OK,
    SIGNATURES,
    UNKNOWN_KEY,
    word_table,
)

#: The source of the tokens these scanners inline: the functions that take them in (and the
#: entry points that link those) are closures over it, so numba's cache is keyed to it.
TOKENS_DIGEST = source_digest((json_tokens,))

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


# ---------------------------------------------------------------------------------- stats
@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def copy_key(dotted, dotted_offs, slot, out, k):
    """Append slot ``slot``'s dotted name to ``out`` at ``k``; returns the new end."""
    a = dotted_offs[slot]
    return copy_bytes(out, k, dotted, a, dotted_offs[slot + 1] - a)


def _stats_for(tokens_digest):
    """:func:`stats` for the tokens of ``tokens_digest`` (see ``TOKENS_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, _nrt=False)
    def stats(buf, words, names, offs, nw, nwo, nwl, parent, is_obj, next_sib, first_child,
              col_of, col_float, col_lo, col_hi, col_lim, ts_slot, dotted, dotted_offs, coli, colf,
              colv, kbytes, koff, fval, foff, ts_bytes, ts_off, ts_valid, fix, where):
        """Read every line of ``buf`` as one IterationStats object of the template straight into
        the ``stats`` columns; returns (status, lines). ``where[0]`` is the line of a non-zero
        status, ``where[1]`` the ``fields`` entries and ``where[2]`` the fix-ups written,
        ``where[3:35]`` the scanner's stack of open objects, ``where[36]`` is set when a string
        value holds a byte >= 0x80 (keys are ASCII names; such a byte anywhere else declines).

        The template is a tree of slots in depth-first key order: ``names``/``offs`` the key,
        ``parent`` the enclosing object's slot (-1: the line's object), ``is_obj``, ``next_sib``
        and ``first_child`` (index ``slot + 1``; 0 for the line's object; -1 none). A line is taken
        when it is ``{...}`` (whitespace around tokens allowed) whose keys are template keys in
        template order (a subset: absent is absent), each value a strict JSON number, true,
        false, null, a string without escapes or control characters, or an object where the
        template has one (null there too); no lists. ``UNKNOWN_KEY`` names a line with a key the
        template lacks, ``NEW_OBJECT`` one with an object where the template has a leaf (the caller
        learns them and runs again); other codes decline the block.

        Output, the rules of ``stats_json.stats_row``: a leaf whose slot has a typed column
        (``col_of``; ``col_float``, else an int column of ``[col_lo, col_hi]``, a whole float
        within ``±col_lim``) and whose value fits it goes to ``coli``/``colf`` (``colv`` True; 0
        and False where it does not); any other number or bool (as 1/0) is a ``fields`` entry in key
        order (its slot's dotted name, ``dotted[dotted_offs[slot]:dotted_offs[slot + 1]]``,
        copied to ``kbytes`` with offsets ``koff``; ``fval`` its value; ``foff`` each row's first
        entry). The
        top-level string ``timestamp`` (slot ``ts_slot``) is copied to ``ts_bytes`` (offsets
        ``ts_off``, ``ts_valid``). A decimal that is not one correctly rounded operation is a
        fix-up: ``fix[0]`` its destination (a ``fields`` entry, or ``-1 - (column * cap + row)``),
        ``fix[1:3]`` its text span, for the caller's ``float()``; in an int column it declines.
        """
        tokens_digest  # noqa: B018 (a closure cell: keys numba's cache to the tokens)
        n = len(buf)
        stack_parent = where[3:19]
        stack_last = where[19:35]
        p = 0
        row = 0
        cap = coli.shape[1]
        n_cols = coli.shape[0]
        e = 0                   # fields entries
        nfix = 0
        tlen = 0
        klen = 0
        foff[0] = 0
        koff[0] = 0
        ts_off[0] = 0
        while p < n:
            if row >= cap:
                where[0] = row
                return FULL, row
            q = skip_ws(buf, p, n)
            if q >= n or buf[q] != 123:
                where[0] = row
                return BAD_LINE, row
            q = skip_ws(buf, q + 1, n)
            depth = 0
            stack_parent[0] = -1
            stack_last[0] = -1
            closed = False
            ts_valid[row] = False
            for c in range(n_cols):
                coli[c, row] = 0
                colf[c, row] = 0.0
                colv[c, row] = False
            if q < n and buf[q] == 125:            # {}
                q += 1
                closed = True
            while not closed:
                if q >= n or buf[q] != 34:
                    where[0] = row
                    return BAD_LINE, row
                a = q + 1
                par = stack_parent[depth]
                last = stack_last[depth]
                guess = first_child[par + 1] if last < 0 else next_sib[last]
                slot = -1
                if name_here(words, a, nw, nwo, nwl, guess):
                    slot = guess
                    e_key = a + nwl[guess] - 1
                else:
                    e_key = plain_string_end(buf, a, n)
                    if e_key < 0:
                        where[0] = row
                        return BAD_LINE, row
                    m = e_key - a
                    c = first_child[par + 1]
                    while c >= 0:
                        if offs[c + 1] - offs[c] == m and same_bytes(buf, a, names, offs[c], m):
                            slot = c
                            break
                        c = next_sib[c]
                    if slot < 0:
                        where[0] = row
                        return UNKNOWN_KEY, row
                    if slot <= last:
                        where[0] = row
                        return BAD_LINE, row      # another key order, or a key given twice
                stack_last[depth] = slot
                q = skip_ws(buf, e_key + 1, n)
                if q >= n or buf[q] != 58:
                    where[0] = row
                    return BAD_LINE, row
                q = skip_ws(buf, q + 1, n)
                if q >= n:
                    where[0] = row
                    return BAD_LINE, row
                c0 = buf[q]
                if (48 <= c0 <= 57 or c0 == 45) and not is_obj[slot]:
                    ok, k, iv, fv, w = json_number(buf, q, n)
                    if not ok:
                        where[0] = row
                        return BAD_VALUE, row
                    c = col_of[slot]
                    typed = False
                    if k == K_INT:
                        fv = float(iv)      # correctly rounded, as Python's float(int)
                        if c >= 0:
                            if col_float[c]:
                                colf[c, row] = fv
                                typed = True
                            elif col_lo[c] <= iv <= col_hi[c]:
                                coli[c, row] = iv
                                typed = True
                    elif k == K_FLOAT:
                        if c >= 0:
                            if col_float[c]:
                                colf[c, row] = fv
                                typed = True
                            elif fv == np.floor(fv) and -col_lim[c] <= fv < col_lim[c]:
                                coli[c, row] = np.int64(fv)
                                typed = True
                    else:                   # K_FTEXT: the caller reads the text
                        if c >= 0 and not col_float[c]:
                            where[0] = row
                            return BAD_VALUE, row   # whole or not is the text's to say
                        fix[0, nfix] = -1 - (c * cap + row) if c >= 0 else e
                        fix[1, nfix] = q
                        fix[2, nfix] = w
                        nfix += 1
                        typed = c >= 0
                    if typed:
                        colv[c, row] = True
                    else:
                        klen = copy_key(dotted, dotted_offs, slot, kbytes, klen)
                        koff[e + 1] = klen
                        fval[e] = fv
                        e += 1
                    q = w
                elif c0 == 123:
                    if depth + 1 >= 16:
                        where[0] = row
                        return BAD_VALUE, row
                    if not is_obj[slot]:
                        where[0] = row
                        return NEW_OBJECT, row     # an object where the shape has a leaf
                    depth += 1
                    stack_parent[depth] = slot
                    stack_last[depth] = -1
                    q = skip_ws(buf, q + 1, n)
                    if q < n and buf[q] == 125:
                        q += 1
                        depth -= 1
                    else:
                        continue
                elif literal(buf, q, n, null_b):
                    q += 4
                elif is_obj[slot]:
                    where[0] = row
                    return BAD_VALUE, row
                elif c0 == 34:
                    w, high = string_end(buf, q + 1, n)
                    if w < 0:
                        where[0] = row
                        return BAD_VALUE, row
                    if high:
                        where[36] = 1
                    if slot == ts_slot:
                        tlen = copy_bytes(ts_bytes, tlen, buf, q + 1, w - q - 1)
                        ts_valid[row] = True
                    q = w + 1
                elif literal(buf, q, n, true_b):
                    klen = copy_key(dotted, dotted_offs, slot, kbytes, klen)
                    koff[e + 1] = klen
                    fval[e] = 1.0
                    e += 1
                    q += 4
                elif literal(buf, q, n, false_b):
                    klen = copy_key(dotted, dotted_offs, slot, kbytes, klen)
                    koff[e + 1] = klen
                    fval[e] = 0.0
                    e += 1
                    q += 5
                else:
                    where[0] = row
                    return BAD_VALUE, row
                # after a value: "," and the next key, or "}" closing objects
                while True:
                    more, q = next_member(buf, q, n, 125)
                    if more < 0:
                        where[0] = row
                        return BAD_LINE, row
                    if more == 1:
                        break
                    if depth == 0:
                        closed = True
                        break
                    depth -= 1
            q = skip_ws(buf, q, n)
            if q < n and buf[q] != 10:
                where[0] = row
                return BAD_LINE, row
            row += 1
            foff[row] = e
            ts_off[row] = tlen
            p = q + 1
        where[1] = e
        where[2] = nfix
        return OK, row

    return stats


stats = _stats_for(TOKENS_DIGEST)


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
    """:func:`stats_c` for the tokens of ``tokens_digest`` (see ``TOKENS_DIGEST``)."""

    @numba.cfunc(STATS_SIG, cache=True, nogil=True, error_model="numpy")
    def stats_c(buf, n, words, names, n_names, name_words, n_name_words, slots, n_slots, cols,
                col_lim, n_cols, dotted, n_dotted, ts_slot, cap, entries, coli, colf, colv, kbytes,
                n_kbytes, koff, fval, foff, ts_bytes, ts_off, ts_valid, fix, where):
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
            numba.carray(fix, (3, entries)), w)
        w[35] = rows
        return status

    return stats_c


stats_c = _stats_c_for(TOKENS_DIGEST)


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
