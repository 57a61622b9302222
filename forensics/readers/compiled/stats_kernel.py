"""The compiled IterationStats scanner of :func:`forensics.readers.json_scan.stats` (imports
numba: imported only to compile it; its entry point is
:func:`forensics.readers.compiled.json_kernel.stats_c`). The conventions and measurements of
:mod:`~forensics.readers.compiled.json_kernel` (``_nrt=False``, inlined helpers) hold here.

Why a line's *skeleton*: stats lines repeat one layout (the same keys, punctuation and
whitespace; only the values change), and reading each key token by token (its name looked up,
whitespace skipped around ``:`` and ``,``, objects opened and closed) cost most of the scanner's
time. So every line the token-by-token reader takes leaves its skeleton (where its values start
and end, and their slots), and the next line is first read against it: each span between two
values compared with the skeleton line's bytes a word at a time, each value read by
:func:`leaf_value` as that reader reads it. Equal spans are the same tokens, so the line reads
as the token-by-token reader would read it; on any difference (a span, a value that is an
object, a value that reader would refuse) the line's output is dropped and it is read token by
token, which then gives the skeleton of the lines after it.
"""
import numba
import numpy as np

from forensics.readers.compiled import json_tokens
from forensics.readers.compiled.cache_digest import source_digest
from forensics.readers.compiled.json_tokens import (K_FLOAT, K_INT, copy_bytes, false_b,
                                                    json_number, literal, name_here,
                                                    next_member, null_b, plain_string_end,
                                                    same_bytes, same_span, skip_ws,
                                                    string_end, true_b)
from forensics.readers.json_scan import (BAD_LINE, BAD_VALUE, FULL, NEW_OBJECT, OK,
                                         UNKNOWN_KEY)

#: The source of the tokens :func:`stats` inlines (see json_kernel.TOKENS_DIGEST).
TOKENS_DIGEST = source_digest((json_tokens,))
#: :func:`leaf_value`'s status for a value it leaves to its caller: an object (or a value
#: where the template has an object other than null).
NOT_LEAF = -1


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def copy_key(dotted, dotted_offs, slot, out, k):
    """Append slot ``slot``'s dotted name to ``out`` at ``k``; returns the new end."""
    a = dotted_offs[slot]
    return copy_bytes(out, k, dotted, a, dotted_offs[slot + 1] - a)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def leaf_value(buf, q, n, slot, obj, c, cfloat, row, col_lo, col_hi, col_lim, ts_slot, dotted,
               dotted_offs, coli, colf, colv, kbytes, koff, fval, ts_bytes, ts_valid, fix, where,
               e, klen, nfix, tlen, wmask):
    """The value at ``q`` (not whitespace) of slot ``slot`` (``obj``: an object there; ``c``
    its typed column or -1, ``cfloat`` a float one) written to row ``row`` by the rules of
    :func:`stats`: (status, position after, fields entries, key bytes, fix-ups, timestamp
    bytes, typed columns written as bits). ``NOT_LEAF`` for an object, or anything but null
    where the template has an object (the caller reads it); ``BAD_VALUE`` for what the scanner
    declines."""
    c0 = buf[q]
    if (48 <= c0 <= 57 or c0 == 45) and not obj:
        ok, k, iv, fv, w = json_number(buf, q, n)
        if not ok:
            return BAD_VALUE, q, e, klen, nfix, tlen, wmask
        typed = False
        if k == K_INT:
            fv = float(iv)      # correctly rounded, as Python's float(int)
            if c >= 0:
                if cfloat:
                    colf[c, row] = fv
                    typed = True
                elif col_lo[c] <= iv <= col_hi[c]:
                    coli[c, row] = iv
                    typed = True
        elif k == K_FLOAT:
            if c >= 0:
                if cfloat:
                    colf[c, row] = fv
                    typed = True
                elif fv == np.floor(fv) and -col_lim[c] <= fv < col_lim[c]:
                    coli[c, row] = np.int64(fv)
                    typed = True
        else:                   # K_FTEXT: the caller reads the text
            if c >= 0 and not cfloat:
                return BAD_VALUE, q, e, klen, nfix, tlen, wmask   # whole or not: the text's
            fix[0, nfix] = -1 - (c * coli.shape[1] + row) if c >= 0 else e
            fix[1, nfix] = q
            fix[2, nfix] = w
            nfix += 1
            typed = c >= 0
        if typed:
            colv[c, row] = True
            wmask |= np.int64(1) << c
        else:
            klen = copy_key(dotted, dotted_offs, slot, kbytes, klen)
            koff[e + 1] = klen
            fval[e] = fv
            e += 1
        return OK, w, e, klen, nfix, tlen, wmask
    if c0 == 123:
        return NOT_LEAF, q, e, klen, nfix, tlen, wmask
    if literal(buf, q, n, null_b):
        return OK, q + 4, e, klen, nfix, tlen, wmask
    if obj:
        return NOT_LEAF, q, e, klen, nfix, tlen, wmask
    if c0 == 34:
        w, high = string_end(buf, q + 1, n)
        if w < 0:
            return BAD_VALUE, q, e, klen, nfix, tlen, wmask
        if high:
            where[36] = 1
        if slot == ts_slot:
            tlen = copy_bytes(ts_bytes, tlen, buf, q + 1, w - q - 1)
            ts_valid[row] = True
        return OK, w + 1, e, klen, nfix, tlen, wmask
    if literal(buf, q, n, true_b):
        fv = 1.0
        w = q + 4
    elif literal(buf, q, n, false_b):
        fv = 0.0
        w = q + 5
    else:
        return BAD_VALUE, q, e, klen, nfix, tlen, wmask
    klen = copy_key(dotted, dotted_offs, slot, kbytes, klen)
    koff[e + 1] = klen
    fval[e] = fv
    return OK, w, e + 1, klen, nfix, tlen, wmask


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def clear_row(coli, colf, colv, row, wmask):
    """Row ``row`` of the typed columns whose bit is not set in ``wmask`` as a line without
    them (0, not valid): the rows' arrays are reused, and writing only these (a line has most
    columns) spares ~40 scattered stores a row."""
    for c in range(coli.shape[0]):
        if not (wmask >> c) & 1:
            coli[c, row] = 0
            colf[c, row] = 0.0
            colv[c, row] = False


def _stats_for(tokens_digest):
    """:func:`stats` for the tokens of ``tokens_digest`` (see ``TOKENS_DIGEST``)."""

    @numba.njit(cache=True, nogil=True, _nrt=False)
    def stats(buf, words, names, offs, nw, nwo, nwl, parent, is_obj, next_sib, first_child,
              col_of, col_float, col_lo, col_hi, col_lim, ts_slot, dotted, dotted_offs, coli, colf,
              colv, kbytes, koff, fval, foff, ts_bytes, ts_off, ts_valid, fix, skel, where):
        """Read every line of ``buf`` as one IterationStats object of the template straight into
        the ``stats`` columns; returns (status, lines). ``where[0]`` is the line of a non-zero
        status, ``where[1]`` the ``fields`` entries and ``where[2]`` the fix-ups written,
        ``where[3:35]`` the scanner's stack of open objects, ``where[36]`` is set when a string
        value holds a byte >= 0x80 (keys are ASCII names; such a byte anywhere else declines).
        ``skel`` (6 rows of at least as many items as slots) holds the skeleton of the last line
        read token by token: each value's start, end, slot, whether the slot is an object, its
        typed column (-1 none) and whether that is a float column.

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
        e = 0                   # fields entries
        nfix = 0
        tlen = 0
        klen = 0
        foff[0] = 0
        koff[0] = 0
        ts_off[0] = 0
        sk_n = -1               # values in the skeleton (-1: none yet)
        sk_start = 0            # the skeleton line's first byte and the byte after its newline
        sk_end = 0
        while p < n:
            if row >= cap:
                where[0] = row
                return FULL, row
            ts_valid[row] = False
            wmask = 0
            if sk_n >= 0:       # the line against the skeleton first
                e0, klen0, nfix0, tlen0 = e, klen, nfix, tlen
                q = p
                b = sk_start
                same = True
                for i in range(sk_n):
                    m = skel[0, i] - b
                    if not same_span(buf, q, b, m):
                        same = False
                        break
                    status, q, e, klen, nfix, tlen, wmask = leaf_value(
                        buf, q + m, n, skel[2, i], skel[3, i], skel[4, i], skel[5, i], row,
                        col_lo, col_hi, col_lim, ts_slot, dotted, dotted_offs, coli, colf, colv,
                        kbytes, koff, fval, ts_bytes, ts_valid, fix, where, e, klen, nfix, tlen,
                        wmask)
                    if status != OK:
                        same = False
                        break
                    b = skel[1, i]
                if same and same_span(buf, q, b, sk_end - b):
                    clear_row(coli, colf, colv, row, wmask)
                    row += 1
                    foff[row] = e
                    ts_off[row] = tlen
                    p = q + sk_end - b
                    continue
                e, klen, nfix, tlen = e0, klen0, nfix0, tlen0
                clear_row(coli, colf, colv, row, 0)   # what it wrote, as no value
                ts_valid[row] = False
                wmask = 0
            q = skip_ws(buf, p, n)
            if q >= n or buf[q] != 123:
                where[0] = row
                return BAD_LINE, row
            q = skip_ws(buf, q + 1, n)
            depth = 0
            stack_parent[0] = -1
            stack_last[0] = -1
            closed = False
            nv = 0
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
                obj = is_obj[slot]
                c = col_of[slot]
                cfloat = c >= 0 and col_float[c]
                status, w, e, klen, nfix, tlen, wmask = leaf_value(
                    buf, q, n, slot, obj, c, cfloat, row, col_lo, col_hi, col_lim, ts_slot,
                    dotted, dotted_offs, coli, colf, colv, kbytes, koff, fval, ts_bytes,
                    ts_valid, fix, where, e, klen, nfix, tlen, wmask)
                if status == OK:
                    skel[0, nv] = q
                    skel[1, nv] = w
                    skel[2, nv] = slot
                    skel[3, nv] = obj
                    skel[4, nv] = c
                    skel[5, nv] = cfloat
                    nv += 1
                    q = w
                elif status != NOT_LEAF:
                    where[0] = row
                    return status, row
                elif buf[q] != 123:
                    where[0] = row
                    return BAD_VALUE, row       # a value other than null for an object
                else:
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
            clear_row(coli, colf, colv, row, wmask)
            sk_n = nv
            sk_start = p
            sk_end = q + 1
            row += 1
            foff[row] = e
            ts_off[row] = tlen
            p = q + 1
        where[1] = e
        where[2] = nfix
        return OK, row

    return stats


stats = _stats_for(TOKENS_DIGEST)
