"""Breadth-first search over abstract fleet states, one batched ``decide`` per level.

Per number of ranks (smallest first) and per iteration, every move of every rank of every state
in the frontier is decided at once: the level's transitions are reduced to their distinct rows
(what every rank's move looks like to the executor, and the roles carried in), and those are
decided by ``replay.explore.decisions.Decider``: the moves' frame features
(``replay.explore.model.Tables``) gathered into ``(N, R)`` ``StepInputs`` and handed to
``replay.step.decide``, the engine's own step function; a policy with a ``pad_hook``
(``trtllm:`` real code through the lockstep stand-in, ``py:`` candidates) has its pad step
decided by the hook for each distinct fleet frame first (``replay.walk.hook_outcomes``,
cached). Reductions:

* **rank permutation**: a fleet state is its sorted tuple of rank states, and ranks holding the
  same rank state choose their moves as a multiset (one order of equal choices);
* **request renaming**: a rank's requests are a multiset of classes (``replay.explore.model``);
* **visited states**: a state reached at an earlier level is not expanded again; within a level
  the transition with the fewest requests so far is kept, so BFS order yields witnesses with the
  fewest ranks, then iterations, then requests.

With ``first_only`` (``identify --explore``) a reference stops being compared once it has a
divergence: the search is smallest first, so that one is its minimal one, and a later one could
only be larger.

``canonical=False, memo=False`` turns both off: the unreduced enumeration of every schedule,
used to check that the reductions change no verdict.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable, Optional

import numpy as np

from replay.config import RunConfig
from replay.explore.decisions import Decider, HookMemo, Level, dummy_after
from replay.explore.model import Reasons, Tables
from replay.explore.space import KV_OUTCOMES, KvOutcome
from replay.policy import Policy
from replay.step import StepInputs, StepOutputs

#: Fleet keys pack sorted rank-state ids in this many bits each (three ranks fit in 62 bits).
_ID_BITS = 20


@dataclasses.dataclass(frozen=True)
class Found:
    """The minimal transition showing one mechanism (or divergence) in one search.

    Fields:
        key: ``(kind, cause reason id)`` or, for a divergence, ``("diverge", field, a, b)``.
        ranks, iterations, requests: the witness's size.
        path: the choice rows from the start, one ``(R,)`` tuple per iteration, in each
            iteration's canonical rank order.
    """

    key: tuple
    ranks: int
    iterations: int
    requests: int
    path: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> tuple[int, int, int]:
        return (self.ranks, self.iterations, self.requests)


@dataclasses.dataclass
class SearchStats:
    """Counts of one search: transitions decided (schedules' steps), rank-iterations, states,
    and the distinct rows actually decided (``replay.explore.decisions``)."""

    transitions: int = 0
    rank_iterations: int = 0
    states: int = 0
    levels: int = 0
    distinct: int = 0


@functools.lru_cache(maxsize=None)
def _combos(k: int, g: int, canonical: bool) -> np.ndarray:
    """``(M, g)`` move indices for ``g`` ranks sharing a state with ``k`` moves each."""
    it = (itertools.combinations_with_replacement(range(k), g) if canonical
          else itertools.product(range(k), repeat=g))
    out = np.array(list(it), dtype=np.int64)
    return out.reshape(-1, g)


@functools.lru_cache(maxsize=4096)
def _joint_local(shape: tuple[tuple[int, int], ...], canonical: bool) -> np.ndarray:
    """Every joint move of a fleet state as ``(M, R)`` move indices within each rank's range:
    ``shape`` is per rank ``(moves, group)`` (ranks of one group hold one rank state; the
    canonical enumeration takes their moves as a multiset)."""
    blocks = []
    if canonical:
        r = 0
        while r < len(shape):
            k, grp = shape[r]
            g = 1
            while r + g < len(shape) and shape[r + g][1] == grp:
                g += 1
            blocks.append(_combos(k, g, True))
            r += g
    else:
        blocks = [np.arange(k, dtype=np.int64)[:, None] for k, _ in shape]
    out = blocks[0]
    for blk in blocks[1:]:
        out = np.concatenate([np.repeat(out, len(blk), axis=0),
                              np.tile(blk, (len(out), 1))], axis=1)
    out.setflags(write=False)
    return out


def _joint(ranges: list[tuple[int, int]], sids: tuple[int, ...], canonical: bool) -> np.ndarray:
    """Every joint move of one fleet state, ``(M, R)`` global choice ids (``sids`` sorted)."""
    group = [0] * len(sids)
    for r in range(1, len(sids)):
        group[r] = group[r - 1] + (sids[r] != sids[r - 1])
    shape = tuple((b - a, g) for (a, b), g in zip(ranges, group))
    return _joint_local(shape, canonical) + np.array([a for a, _ in ranges], np.int64)


class Search:
    """One exploration of one configuration under one policy (two in differential mode).

    Args:
        policies: the policy explored, or ``(policy, reference)`` for differential mode.
        config: the configuration (``tp_size`` is set per rank count).
        requests: requests a rank holds at once.
        kv_outcomes: the KV outcomes enumerated.
        reasons: interned failure reasons shared across searches (ids stay comparable).
        canonical, memo: the reductions (both on by default).
        first_only: stop comparing a reference at its first divergence (module docstring).
        hooks: hook outcomes shared with searches the hooks cannot tell apart
            (``replay.explore.decisions.HookMemo``).
    """

    def __init__(self, policies: tuple[Policy, ...], config: RunConfig, requests: int,
                 kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES, reasons: Optional[Reasons] = None,
                 canonical: bool = True, memo: bool = True, first_only: bool = False,
                 hooks: Optional[HookMemo] = None):
        self.policies = policies
        self.config = config
        self.requests = requests
        self.kv = kv_outcomes
        self.reasons = reasons or Reasons()
        self.canonical = canonical
        self.memo = memo
        self.first_only = first_only
        self.stats = SearchStats()
        self.decider = Decider(policies, self.reasons, hooks)
        self._tables: dict[int, Tables] = {}

    # ------------------------------------------------------------------ the search
    def run(self, ranks: int, iterations: int, found: dict[tuple, Found],
            stop: Callable[[], bool] = lambda: False) -> None:
        """Explore ``ranks`` ranks for up to ``iterations`` iterations; add to ``found`` every
        mechanism (key) not in it yet, at its minimal size for this rank count."""
        tables = self.tables(ranks)
        init = tables.initial()
        refs = len(self.policies) - 1
        compared = (1 << refs) - 1                   # bit k-1: reference k is compared
        if self.first_only:
            compared &= ~self._diverged(found)
        if refs and not compared:
            return
        f_sids = np.full((1, ranks), init, np.int64)
        f_cq = np.ones(1, bool)
        f_role = np.zeros(1, np.int64)               # bit k: policy k's dummy role is context
        f_agree = np.full(1, compared, np.int64)     # bit k-1: policy k agrees so far
        f_req = np.zeros(1, np.int64)
        parents: list[tuple[np.ndarray, np.ndarray]] = []   # per level: (parent index, choices)
        visited: set = set()
        # Rank-state ids stay below 1 << _ID_BITS (_next_states); the extra column holds the
        # roles (refs + 1 bits), the agreeing references (refs bits) and can_queue.
        packed = _packs(ranks + 1, 2 * refs + 2)
        for depth in range(iterations):
            if not len(f_sids) or stop():
                break
            G, P = self._transitions(tables, f_sids, f_cq)
            if not len(G):
                break
            self.stats.transitions += len(G)
            self.stats.rank_iterations += len(G) * ranks * len(self.policies)
            self.stats.levels = max(self.stats.levels, depth + 1)
            role_in = f_role[P]
            first, inv = self.decider.distinct(tables, G, role_in)
            self.stats.distinct += len(first)
            level = self.decider.level(tables, G[first], role_in[first],
                                       [k for k in range(1, refs + 1) if compared >> (k - 1) & 1])
            req = f_req[P] + tables.col("arrived")[G].sum(axis=1)
            alive, agree = self._record(level, inv, G, P, f_agree[P], req, depth, parents,
                                        found, ranks)
            if self.first_only and refs:
                # A reference's first divergence is found: nothing later can be smaller.
                compared &= ~self._diverged(found)
                agree &= compared
                alive &= agree != 0
            # Successors of the transitions that neither crashed nor lost every reference (none
            # after the last iteration: those states would never be expanded).
            if not alive.any() or depth == iterations - 1:
                break
            k = np.flatnonzero(alive)
            G, P, req, agree, inv = G[k], P[k], req[k], agree[k], inv[k]
            nxt = _next_states(tables, G, level.dummy_after[inv], level.processed[inv])
            role = level.role[inv] & ((compared << 1) | 1)
            cq = level.can_queue[inv]
            if self.canonical:
                nxt = np.sort(nxt, axis=1)
            extra = (((role << refs) | agree) << 1) | cq.astype(np.int64)
            rows = np.concatenate([nxt, extra[:, None]], axis=1)
            if self.memo:
                pick, seen = _fewest_requests(rows, req, packed)
                fresh = np.fromiter((r not in visited for r in seen), bool, len(seen))
                visited.update(r for r, f in zip(seen, fresh.tolist()) if f)
                pick = pick[fresh]
            else:
                pick = np.arange(len(rows))
            parents.append((P[pick], G[pick]))
            f_sids, f_cq, f_role, f_agree, f_req = nxt[pick], cq[pick], role[pick], agree[pick], req[pick]
            self.stats.states += len(pick)

    @staticmethod
    def _diverged(found: dict) -> int:
        """The references (bit k-1: reference k) with a divergence in ``found``."""
        bits = 0
        for key in found:
            if key[0] == "diverge":
                bits |= 1 << (key[1] - 1)
        return bits

    def tables(self, ranks: int) -> Tables:
        """The move tables of this search's configuration for ``ranks`` ranks (kept: a
        witness's choice ids refer to them)."""
        if ranks not in self._tables:
            self._tables[ranks] = Tables(self.policies, dataclasses.replace(self.config, tp_size=ranks),
                                         self.requests, self.kv, self.reasons)
        return self._tables[ranks]

    def decide_rows(self, tables: Tables, G: np.ndarray, role_in: np.ndarray) -> list:
        """Every policy's ``(inputs, outputs, role)`` for the transitions ``G`` (``(N, R)``
        choice ids) from states whose carried dummy roles are ``role_in`` (bit k: policy k's)."""
        return self.decider.decide_rows(tables, G, role_in)

    def successors(self, tables: Tables, G: np.ndarray, inp: StepInputs,
                   o: StepOutputs) -> np.ndarray:
        """``(N, R)`` rank-state ids after the transitions (in ``G``'s rank order)."""
        after = dummy_after(inp, o, self.decider.leak_cause(tables, G, o))
        return _next_states(tables, G, after, o.processed_prev.astype(np.int64))

    # ------------------------------------------------------------------ transitions
    def _transitions(self, tables: Tables, f_sids: np.ndarray, f_cq: np.ndarray):
        blocks = []
        moves_of = tables.moves_of
        canonical = self.canonical
        for row, cq in zip(f_sids.tolist(), f_cq.tolist()):
            blocks.append(_joint([moves_of(s, cq) for s in row], tuple(row), canonical))
        owners = np.repeat(np.arange(len(blocks), dtype=np.int64), [len(b) for b in blocks])
        # Column-major: the fleet reductions over the rank axis (all-gathers) run per column.
        return np.asfortranarray(np.concatenate(blocks)), owners

    # ------------------------------------------------------------------ failures
    def _record(self, level: Level, inv, G, P, agree_in, req, depth, parents, found, ranks):
        """Note every mechanism (divergence) first seen here (``level`` holds the distinct
        rows' facts, ``inv`` each transition's row). Returns the mask of transitions to continue
        from and, per transition, the references still agreeing (a bitmask)."""
        big = np.iinfo(np.int64).max
        for kind, hit, cause in level.events:
            cause = np.where(cause == big, 0, cause)
            seen = np.flatnonzero(np.bincount(cause[hit])).tolist()  # reason ids are small
            pairs = [((kind, c), (hit & (cause == c))[inv]) for c in seen
                     if (kind, c) not in found]
            self._note(found, pairs, req, G, P, depth, parents, ranks)
        agree = agree_in.copy()
        for k, (first_field, va, vb) in level.diffs.items():
            row_diverged = first_field >= 0
            if not row_diverged.any():
                continue
            live = ((agree_in >> (k - 1)) & 1).astype(bool)
            diverged = row_diverged[inv] & live
            agree &= ~(diverged.astype(np.int64) << (k - 1))
            combo = np.stack([first_field, va, vb], axis=1)
            pairs = []
            for f, x, y in np.unique(combo[row_diverged], axis=0).tolist():
                key = ("diverge", k, level.names[f], x, y)
                if key not in found:
                    match = row_diverged & (first_field == f) & (va == x) & (vb == y)
                    pairs.append((key, match[inv] & live))
            self._note(found, [(key, m) for key, m in pairs if m.any()], req, G, P, depth,
                       parents, ranks)
        ok = level.ok[inv]
        alive = ok & (agree != 0) if len(self.policies) > 1 else ok
        return alive, agree

    def _note(self, found, pairs, req, G, P, depth, parents, ranks) -> None:
        for key, mask in pairs:
            if key in found:
                continue
            idx = np.flatnonzero(mask)
            best = int(idx[np.argmin(req[idx])])
            rows = [tuple(int(x) for x in G[best])]
            j = int(P[best])
            for Pl, Gl in reversed(parents):
                rows.append(tuple(int(x) for x in Gl[j]))
                j = int(Pl[j])
            found[key] = Found(key=key, ranks=ranks, iterations=depth + 1,
                               requests=int(req[best]), path=tuple(reversed(rows)))


#: Reasons a carried dummy can leak for, in a next-state lookup row (more: computed directly).
_LUT_REASONS = 64


def _next_states(tables: Tables, G: np.ndarray, dummy_after: np.ndarray,
                 processed: np.ndarray) -> np.ndarray:
    """``(N, R)`` rank-state ids after the transitions, through a lookup table per
    ``(choice, dummy after, processed)`` filled once per triple (``Tables.next_state``)."""
    width = 2 * (_LUT_REASONS + 1)
    if dummy_after.max(initial=0) >= _LUT_REASONS:
        return np.vectorize(tables.next_state, otypes=[np.int64])(G, dummy_after, processed)
    code = G * width + (dummy_after + 1) * 2 + processed
    lut = tables.next_lut
    if lut.size < len(tables.moves) * width:
        grown = np.full(len(tables.moves) * width * 2, -1, np.int64)
        grown[:lut.size] = lut
        lut = tables.next_lut = grown
    ids = lut[code]
    missing = ids < 0
    if missing.any():
        for u in np.unique(code[missing]).tolist():
            choice, rest = divmod(u, width)
            d, proc = divmod(rest, 2)
            lut[u] = tables.next_state(choice, d - 1, proc)
        ids = lut[code]
    if len(tables.states) >= 1 << _ID_BITS:
        raise OverflowError("more rank states than the explorer's fleet keys can hold")
    return ids


def _packs(width: int, extra_bits: int) -> bool:
    """Whether fleet rows of ``width`` ids (the last one ``extra_bits`` wide) pack into one int64
    (:func:`_fewest_requests`): then a row's key is the same at every level, and the visited
    states are kept as those ints."""
    return width * _ID_BITS <= 62 and extra_bits <= _ID_BITS


def _fewest_requests(rows: np.ndarray, req: np.ndarray, packed: bool) -> tuple[np.ndarray, list]:
    """Per distinct fleet row of ``rows``, the transition with the fewest requests (the first
    one on a tie), in the rows' lexicographic order; and each picked row's visited-set key: the
    row packed into one int (the same at every level) when ``packed`` (:func:`_packs`), else its
    tuple."""
    if packed:
        key = np.zeros(len(rows), np.int64)
        for r in range(rows.shape[1]):
            key = (key << _ID_BITS) | rows[:, r]
        order = np.lexsort((req, key))
        keys_s = key[order]
        first = np.ones(len(order), bool)
        first[1:] = keys_s[1:] != keys_s[:-1]
        pick = order[first]
        return pick, key[pick].tolist()
    # Too wide for one int: the rank-state ids packed (while they fit) and the extra column as
    # a second key; lexsort's order is the rows' lexicographic order either way.
    ids, extra = rows[:, :-1], rows[:, -1]
    if ids.shape[1] * _ID_BITS <= 62:
        head = np.zeros(len(rows), np.int64)
        for r in range(ids.shape[1]):
            head = (head << _ID_BITS) | ids[:, r]
        cols = [head, extra]
    else:
        cols = [rows[:, c] for c in range(rows.shape[1])]
    order = np.lexsort([req] + cols[::-1])
    first = np.ones(len(order), bool)
    for col in cols:
        s = col[order]
        first[1:] &= s[1:] == s[:-1]
    first = ~first
    first[0] = True
    pick = order[first]
    return pick, [tuple(r) for r in rows[pick].tolist()]


__all__ = ["Found", "Search", "SearchStats"]
