"""When each request was first seen on its rank, and which requests are new: the one place of the rule.

A request is new on its rank at the first iteration it appears there (the executor fetched it
then), except at the run's first frame, where whether it was just fetched is unknown. The replay
(``replay.frames``: ``new_real``, ``max_first_seen``, ``req_first``) and the per-frame
reconstruction (``forensics.reconstruct.frame_state``: ``new``) both read it from here; the
windows of a streamed run carry the ids seen before them in a :class:`SeenBefore`.

Example (ids 7 and 9 on rank 0; the run starts at iteration 10):
    >>> import numpy as np
    >>> rank, rid, it = np.array([0, 0, 0]), np.array([7, 7, 9]), np.array([10, 11, 11])
    >>> first = first_seen(rank, rid, it, 1)
    >>> first.tolist(), new_on_rank(first, it, 10).tolist()
    ([10, 10, 11], [False, False, True])
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: Rows per slice of the row-wise passes (bounded temporaries).
ROW_SLICE = 1 << 20


class SeenBefore:
    """The first iteration each (rank, request id) was seen in the windows read so far.

    Memory is per distinct request (an hour of a 32-rank fleet has a few hundred thousand),
    not per request row: one sorted array of keys ``id * R + rank`` and their first iteration
    while every id is in ``[0, 2**62 / R)`` (the usual counted-up ids: one search for a whole
    window), else per rank a sorted array of ids and their first iteration.
    """

    def __init__(self, R: int):
        self.R = R
        self.keys: np.ndarray | None = np.zeros(0, np.int64)
        self.key_first = np.zeros(0, np.int64)
        self.ids: list[np.ndarray] = []
        self.first: list[np.ndarray] = []

    def update(self, rank: np.ndarray, rid: np.ndarray, first: np.ndarray) -> np.ndarray:
        """``first`` (first seen within this window, per row) with every id seen in an earlier
        window given its earlier iteration; this window's new ids are remembered."""
        if not rid.size:
            return first
        out = first.astype(np.int64)
        if self.keys is not None and (int(rid.min()) < 0
                                      or int(rid.max()) >= (2 ** 62) // max(self.R, 1)):
            self._by_rank()   # an id outside the keys' range: per rank from now on
        if self.keys is not None:
            rows = None   # a rank outside [0, R) is neither looked up nor remembered
            if int(rank.min()) < 0 or int(rank.max()) >= self.R:
                rows = np.flatnonzero((rank >= 0) & (rank < self.R))
                rank, rid = rank[rows], rid[rows]
            key = rid.astype(np.int64) * self.R
            key += rank
            got = out if rows is None else out[rows]
            known = self.keys
            hit = np.zeros(key.size, bool)
            if known.size:
                at = np.minimum(np.searchsorted(known, key), known.size - 1)
                hit = known[at] == key
                got[hit] = self.key_first[at[hit]]
            new_keys, j = np.unique(key[~hit], return_index=True)
            if new_keys.size:   # sorted merge: one copy, no sort of what is already known
                at = np.searchsorted(known, new_keys)
                self.keys = np.insert(known, at, new_keys)
                self.key_first = np.insert(self.key_first, at, got[~hit][j])
            if rows is not None:
                out[rows] = got
        else:
            self._update_by_rank(rank, rid, out)
        return out.astype(first.dtype) if first.dtype != out.dtype and \
            out.max() <= np.iinfo(first.dtype).max and out.min() >= np.iinfo(first.dtype).min else out

    def _by_rank(self) -> None:
        """The keys as per-rank sorted ids (sorted by key is sorted by id within a rank)."""
        keys, R = self.keys, self.R
        rank = keys % R
        self.ids = [keys[rank == r] // R for r in range(R)]
        self.first = [self.key_first[rank == r] for r in range(R)]
        self.keys, self.key_first = None, np.zeros(0, np.int64)

    def _update_by_rank(self, rank: np.ndarray, rid: np.ndarray, out: np.ndarray) -> None:
        order = np.argsort(rank, kind="stable")
        bounds = np.searchsorted(rank[order], np.arange(len(self.ids) + 1))
        for r in range(len(self.ids)):
            rows = order[bounds[r]:bounds[r + 1]]
            if not rows.size:
                continue
            ids, known = rid[rows], self.ids[r]
            hit = np.zeros(rows.size, bool)
            if known.size:
                at = np.minimum(np.searchsorted(known, ids), known.size - 1)
                hit = known[at] == ids
                out[rows[hit]] = self.first[r][at[hit]]
            new_ids, j = np.unique(ids[~hit], return_index=True)
            if new_ids.size:   # sorted merge: one copy, no sort of what is already known
                at = np.searchsorted(known, new_ids)
                self.ids[r] = np.insert(known, at, new_ids)
                self.first[r] = np.insert(self.first[r], at, out[rows[~hit]][j])


def first_seen(rank: np.ndarray, rid: np.ndarray, it: np.ndarray, R: int,
               seen: SeenBefore | None = None) -> np.ndarray:
    """The first iteration each (rank, request id) appears, for every request row; with
    ``seen`` (the windows before), an id seen there keeps its earlier iteration and this
    window's new ids are remembered (``SeenBefore.update``, on the distinct ids only)."""
    if not rid.size:
        return np.zeros(0, np.int32)
    # int32 when every iteration fits (4 bytes a request, not 8); the values are the same.
    dtype = np.int32 if it.min() >= np.iinfo(np.int32).min and it.max() <= np.iinfo(np.int32).max \
        else np.int64
    # Request ids are normally unique across ranks: key by the ids alone (no key array), and
    # fall back to (rank, id) keys only when some id appears on two ranks. Ids are normally
    # dense too (counted up): then an id's code is its offset from the smallest, no hashing
    # (measured on fleet-1h 32x20000: first_seen 0.6 -> 0.25 s CPU over its 10 windows).
    dense = _dense_codes(rid)
    if dense is not None:
        codes, lo, span = dense
        owner = np.full(span, -1, np.int64)
        owner[codes] = rank
        if _owned(owner, codes, rank):
            return _first_dense(codes, lo, owner, it, dtype, seen)
    codes, uniques = pd.factorize(rid, sort=False)
    owner = np.full(len(uniques), -1, np.int64)
    owner[codes] = rank
    if not _owned(owner, codes, rank):
        del codes, uniques, owner
        if rid.min() >= 0 and rid.max() < (2 ** 62) // max(R, 1):
            key = rid * R
            key += rank
            codes, uniques = pd.factorize(key, sort=False)
            del key
        else:
            codes = pd.DataFrame({"k1": rank, "k2": rid}).groupby(
                ["k1", "k2"], sort=False).ngroup().to_numpy()
            uniques = np.zeros(int(codes.max()) + 1, np.int64)
        owner = np.empty(len(uniques), np.int64)
        owner[codes] = rank
        uniques = np.empty(len(uniques), np.int64)
        uniques[codes] = rid
    # Hashed keys (O(n), no sort), then a per-key minimum: memory is one row array of codes.
    first = np.full(len(uniques), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, codes, it)
    if seen is not None:
        first = seen.update(owner, np.asarray(uniques, np.int64), first)
    if dtype is np.int32 and (first.min() < np.iinfo(np.int32).min or first.max() > np.iinfo(np.int32).max):
        dtype = np.int64
    return first.astype(dtype)[codes]


def _dense_codes(rid: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """``(rid - smallest id, smallest id, span)`` when the ids span no more values than there
    are rows (a table over the span is then no larger than the rows), else None."""
    lo, hi = int(rid.min()), int(rid.max())
    if hi - lo >= rid.size:
        return None
    return rid.astype(np.int64, copy=False) - np.int64(lo), lo, hi - lo + 1


def _first_dense(codes: np.ndarray, lo: int, owner: np.ndarray, it: np.ndarray, dtype,
                 seen: SeenBefore | None) -> np.ndarray:
    """:func:`first_seen` of rows whose codes are their ids' offsets (``_dense_codes``), each
    id on one rank (``owner``)."""
    big = np.iinfo(np.int64).max
    first = np.full(owner.size, big, np.int64)
    np.minimum.at(first, codes, it)
    used = np.flatnonzero(first != big)
    got = first[used]
    if seen is not None:
        got = seen.update(owner[used], used + np.int64(lo), got)
    if dtype is np.int32 and (got.min() < np.iinfo(np.int32).min
                              or got.max() > np.iinfo(np.int32).max):
        dtype = np.int64
    out = np.zeros(owner.size, dtype)
    out[used] = got
    return out[codes]


def _owned(owner: np.ndarray, codes: np.ndarray, rank: np.ndarray) -> bool:
    """True when every row's rank is its id's recorded owner (each id on one rank only)."""
    for a in range(0, codes.size, ROW_SLICE):
        if not (owner[codes[a:a + ROW_SLICE]] == rank[a:a + ROW_SLICE]).all():
            return False
    return True


def new_on_rank(first: np.ndarray, it: np.ndarray, first_iter: int) -> np.ndarray:
    """Per request row, whether it is new on its rank: first seen at this iteration
    (``first``, from :func:`first_seen`), and this is not the run's first iteration
    ``first_iter`` (at the first frame nothing counts as new: whether it was fetched then is
    unknown)."""
    return (first == it) & (it != first_iter)


__all__ = ["ROW_SLICE", "SeenBefore", "first_seen", "new_on_rank"]
