"""Breadth-first search over abstract fleet states, one batched ``decide`` per level.

Per number of ranks (smallest first) and per iteration, every move of every rank of every state
in the frontier is decided at once: the moves' frame features (``replay.explore.model.Tables``)
are gathered into ``(N, R)`` ``StepInputs`` and handed to ``replay.step.decide``, the engine's
own step function; a policy with a ``pad_hook`` (``trtllm:`` real code through the lockstep
stand-in, ``py:`` candidates) has its pad step decided by the hook for each distinct fleet frame
first (``replay.walk.hook_outcomes``, cached). Reductions:

* **rank permutation**: a fleet state is its sorted tuple of rank states, and ranks holding the
  same rank state choose their moves as a multiset (one order of equal choices);
* **request renaming**: a rank's requests are a multiset of classes (``replay.explore.model``);
* **visited states**: a state reached at an earlier level is not expanded again; within a level
  the transition with the fewest requests so far is kept, so BFS order yields witnesses with the
  fewest ranks, then iterations, then requests.

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
from replay.walk import hook_outcomes
from replay.explore.mechanisms import (KIND_CRASH, KIND_ERROR, KIND_HANG, KIND_LEAK, KIND_WASTE,
                                       DIVERGENCE_FIELDS, crash_kind_of_message)
from replay.explore.model import Reasons, Tables
from replay.explore.space import KV_OUTCOMES, KvOutcome
from replay.policy import FrameView, Policy
from replay.states import RequestState
from replay.step import (CRASH_ALLOC_NONE, CRASH_ASSERT, PadDecision, StepInputs, StepOutputs,
                         decide, expected_step)

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
    """Counts of one search: transitions decided (schedules' steps), rank-iterations, states."""

    transitions: int = 0
    rank_iterations: int = 0
    states: int = 0
    levels: int = 0


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
    """

    def __init__(self, policies: tuple[Policy, ...], config: RunConfig, requests: int,
                 kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES, reasons: Optional[Reasons] = None,
                 canonical: bool = True, memo: bool = True):
        self.policies = policies
        self.config = config
        self.requests = requests
        self.kv = kv_outcomes
        self.reasons = reasons or Reasons()
        self.canonical = canonical
        self.memo = memo
        self.stats = SearchStats()
        self._hook_cache: dict = {}
        self._request_cache: dict = {}
        self._view_of: dict = {}
        self._view_index: dict = {}
        self._views: list = []
        self._tables: dict[int, Tables] = {}
        self.hook_messages: dict = {}
        self._gathered_for: Optional[np.ndarray] = None
        self._gathered: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ the search
    def run(self, ranks: int, iterations: int, found: dict[tuple, Found],
            stop: Callable[[], bool] = lambda: False) -> None:
        """Explore ``ranks`` ranks for up to ``iterations`` iterations; add to ``found`` every
        mechanism (key) not in it yet, at its minimal size for this rank count."""
        tables = self.tables(ranks)
        init = tables.initial()
        refs = len(self.policies) - 1
        f_sids = np.full((1, ranks), init, np.int64)
        f_cq = np.ones(1, bool)
        f_role = np.zeros(1, np.int64)               # bit k: policy k's dummy role is context
        f_agree = np.full(1, (1 << refs) - 1, np.int64)  # bit k-1: policy k agrees so far
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
            outs = self.decide_rows(tables, G, f_role[P])
            inp, out, _ = outs[0]
            req = f_req[P] + self.at(tables, "arrived", G).sum(axis=1)
            alive, agree = self._record(tables, G, P, outs, f_agree[P], req, depth, parents,
                                        found, ranks)
            # Successors of the transitions that neither crashed nor lost every reference (none
            # after the last iteration: those states would never be expanded).
            if not alive.any() or depth == iterations - 1:
                break
            nxt = self.successors(tables, G, inp, out)
            role = np.zeros(len(G), np.int64)
            for k, (_, _, r) in enumerate(outs):
                role |= r.astype(np.int64) << k
            cq = out.can_queue[:, 0]
            if not alive.all():
                k = np.flatnonzero(alive)
                G, P, req, nxt, cq, role, agree = G[k], P[k], req[k], nxt[k], cq[k], role[k], agree[k]
            if self.canonical:
                nxt = np.sort(nxt, axis=1)
            extra = (((role << refs) | agree) << 1) | cq.astype(np.int64)
            rows = np.concatenate([nxt, extra[:, None]], axis=1)
            if self.memo:
                keys = _level_keys(rows, packed)
                order = np.lexsort((req, keys))
                keys_s = keys[order]
                first = np.ones(len(order), bool)
                first[1:] = keys_s[1:] != keys_s[:-1]
                pick = order[first]
                if packed:  # the level keys are the rows themselves, packed: one int per state
                    seen = keys[pick].tolist()
                else:
                    seen = [tuple(r) for r in rows[pick].tolist()]
                fresh = np.fromiter((r not in visited for r in seen), bool, len(seen))
                visited.update(r for r, f in zip(seen, fresh.tolist()) if f)
                pick = pick[fresh]
            else:
                pick = np.arange(len(rows))
            parents.append((P[pick], G[pick]))
            f_sids, f_cq, f_role, f_agree, f_req = nxt[pick], cq[pick], role[pick], agree[pick], req[pick]
            self.stats.states += len(pick)

    def at(self, tables: Tables, name: str, G: np.ndarray) -> np.ndarray:
        """``tables.col(name)[G]``, gathered once per level (the transitions ``G``)."""
        if self._gathered_for is not G:
            self._gathered_for = G
            self._gathered = {}
        got = self._gathered.get(name)
        if got is None:
            got = self._gathered[name] = tables.col(name)[G]
        return got

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
        ctx = self.at(tables, "ctx_new", G).any(axis=1)
        gen = self.at(tables, "gen_new", G).any(axis=1)
        kv_fields = tables.kv_fields()
        outs = []
        decided: dict = {}  # decision key -> the first policy deciding so (decided once)
        for k, pol in enumerate(self.policies):
            before = (role_in >> k) & 1
            key = decision_key(pol, tables.config) if pol.pad_hook is None else ("hook", k)
            j = decided.get(key)
            if j is not None and np.array_equal(before, (role_in >> j) & 1):
                outs.append(outs[j])
                continue
            decided.setdefault(key, k)
            role = _role_table(pol)[before * 4 + ctx * 2 + gen]
            inp = _inputs(functools.partial(self.at, tables), G, k, role, kv_fields)
            pad = (self._hook_pads(pol, tables.config, tables, G, inp, role)
                   if pol.pad_hook is not None else None)
            outs.append((inp, decide(pol, tables.config, inp, pad=pad), role))
        return outs

    def successors(self, tables: Tables, G: np.ndarray, inp: StepInputs,
                   o: StepOutputs) -> np.ndarray:
        """``(N, R)`` rank-state ids after the transitions (in ``G``'s rank order)."""
        leak_cause = self._leak_cause(tables, G, o)
        fresh = (o.padded | o.postpadded) & ~inp.carried
        dummy_after = np.where(~o.survives, 0, np.where(fresh, leak_cause[:, None], -1))
        return _next_states(tables, G, dummy_after, o.processed_prev.astype(np.int64))

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

    # ------------------------------------------------------------------ hooks
    def _hook_pads(self, pol: Policy, cfg: RunConfig, tables: Tables, G: np.ndarray,
                   inp: StepInputs, role: np.ndarray) -> PadDecision:
        """The hook's pad decision for every transition (cached per distinct fleet frame)."""
        _, expected, _ = expected_step(pol, cfg, inp)
        n, R = G.shape
        res = {f: np.zeros((n, R), bool) for f in ("padded", "role_context", "alloc_failed",
                                                   "crash", "surplus")}
        # What the hook sees, rank by rank (requests, expected, KV, new): identical fleet frames
        # are decided once, and so are fleet frames that differ only in the order of their
        # ranks (the search already takes the code to be rank-symmetric: a fleet state is its
        # sorted tuple of rank states); the hook sees the ranks in sorted order.
        view = self._view_ids(tables, pol)[G]
        perm = np.lexsort((expected, view), axis=1)
        back = np.argsort(perm, axis=1)
        view = np.take_along_axis(view, perm, axis=1)
        expected = np.take_along_axis(np.asarray(expected, np.int64), perm, axis=1)
        code = np.concatenate([view, expected, role[:, None].astype(np.int64)], axis=1)
        uniq, inv = _unique_rows(code)
        outcome_rows = []
        for u in uniq.tolist():
            key = (tuple(u), id(pol))
            got = self._hook_cache.get(key)
            if got is None:
                views = [FrameView(iter=0, rank=r, requests=self._views[u[r]][0],
                                   expected=int(u[R + r]), config=cfg,
                                   alloc_ok=self._views[u[r]][1], new_requests=self._views[u[r]][2],
                                   kv_precheck_ok=self._views[u[r]][3])
                         for r in range(R)]
                got = self._hook_cache[key] = hook_outcomes(pol, views, bool(u[-1]))
            outcome_rows.append(got)
        table = {f: np.array([[getattr_outcome(oc, f) for oc in row] for row in outcome_rows], bool)
                 for f in res}
        for f in res:
            res[f] = np.asfortranarray(np.take_along_axis(table[f][inv], back, axis=1))
        for t in np.flatnonzero(res["crash"].any(axis=1)).tolist():
            for r in range(R):
                if res["crash"][t, r]:
                    msg = outcome_rows[inv[t]][int(back[t, r])].crash
                    self.hook_messages[(tuple(int(x) for x in G[t]), r)] = msg
        return PadDecision(**res)

    def _view_ids(self, tables: Tables, pol: Policy) -> np.ndarray:
        """Per choice id: the id of what a hook sees of the rank (requests, KV, new), interned."""
        have = self._view_of.setdefault(id(tables), [])
        fields = tables.kv_fields()
        carried = tables.col("carried")
        kv = tables.col("kv")
        new = tables.col("new_real")
        for choice in range(len(have), len(tables.moves)):
            content = (self._requests(tables, choice, bool(carried[choice])),
                       bool(fields["alloc_ok"][kv[choice]]) if "alloc_ok" in fields else True,
                       int(new[choice]),
                       bool(fields["kv_precheck_ok"][kv[choice]]) if "kv_precheck_ok" in fields
                       else True)
            vid = self._view_index.get(content)
            if vid is None:
                vid = self._view_index[content] = len(self._views)
                self._views.append(content)
            have.append(vid)
        return np.asarray(have, np.int64)

    def _requests(self, tables: Tables, choice: int, carried: bool) -> tuple:
        """A move's ``active_requests`` as a hook sees them: ``(id, state, is_dummy)`` in list
        order, a carried dummy before the requests appended after it."""
        key = (id(tables), choice, carried)
        got = self._request_cache.get(key)
        if got is None:
            states = tables.frame_states(choice)
            before = [(i + 1, int(s), False) for i, (s, after) in enumerate(states) if not after]
            after = [(i + 1, int(s), False) for i, (s, after) in enumerate(states) if after]
            dummy = [(0, int(RequestState.GENERATION_IN_PROGRESS), True)] if carried else []
            got = self._request_cache[key] = tuple(before + dummy + after)
        return got

    # ------------------------------------------------------------------ failures
    def _leak_cause(self, tables: Tables, G: np.ndarray, o: StepOutputs) -> np.ndarray:
        """Per transition: the smallest reason among the ranks that scheduled 0."""
        kv_reason = np.array([self.reasons.id(f"KV {k.name}") for k in self.kv])
        reason = np.where(o.alloc_failed, kv_reason[self.at(tables, "kv", G)],
                          self.at(tables, "reason", G))
        zero = o.batch == 0
        big = np.iinfo(np.int64).max
        cause = np.where(zero, reason, big).min(axis=1)
        return np.where(cause == big, 0, cause)

    def _record(self, tables, G, P, outs, agree_in, req, depth, parents, found, ranks):
        """Note every mechanism (divergence) first seen here. Returns the mask of transitions to
        continue from and, per transition, the references still agreeing (a bitmask)."""
        inp, out, _ = outs[0]
        kinds = self._crash_kinds(out, G)
        crash = (kinds > 0).any(axis=1)
        carried_cause = np.where(inp.carried, self.at(tables, "dummy", G), 0)
        kv_reason = np.array([self.reasons.id(f"KV {k.name}") for k in self.kv])
        frame_reason = self.at(tables, "reason", G)
        big = np.iinfo(np.int64).max
        events = []
        for kind in (KIND_CRASH, KIND_HANG, KIND_ERROR):
            on = kinds == kind
            hit = on.any(axis=1)
            if not hit.any():
                continue
            cause = {KIND_CRASH: np.where(carried_cause > 0, carried_cause, frame_reason),
                     KIND_HANG: kv_reason[self.at(tables, "kv", G)],
                     KIND_ERROR: frame_reason}[kind]
            events.append((kind, hit, np.where(on, cause, big).min(axis=1)))
        ok = ~crash
        leak = (out.survives & ~inp.carried).any(axis=1) & ok
        if leak.any():
            events.append((KIND_LEAK, leak, self._leak_cause(tables, G, out)))
        waste = out.surplus.any(axis=1) & ok
        if waste.any():
            events.append((KIND_WASTE, waste, np.where(out.surplus & (carried_cause > 0),
                                                        carried_cause, big).min(axis=1)))
        for kind, hit, cause in events:
            cause = np.where(cause == big, 0, cause)
            seen = np.flatnonzero(np.bincount(cause[hit])).tolist()  # reason ids are small
            pairs = [((kind, c), hit & (cause == c)) for c in seen if (kind, c) not in found]
            self._note(found, pairs, req, G, P, depth, parents, ranks)
        agree = agree_in.copy()
        differences: dict = {}  # per distinct decision (policies deciding alike share one)
        for k in range(1, len(outs)):
            live = ((agree_in >> (k - 1)) & 1).astype(bool)
            first = differences.get(id(outs[k]))
            if first is None:
                first = differences[id(outs[k])] = _first_difference(
                    outs[0][1], outs[k][1], kinds, self._crash_kinds(outs[k][1], G))
            diverged, dkeys = _divergence(first, live)
            agree &= ~(diverged.astype(np.int64) << (k - 1))
            self._note(found, [(("diverge", k) + key, m) for key, m in dkeys], req, G, P, depth,
                       parents, ranks)
        alive = ok & (agree != 0) if len(outs) > 1 else ok
        return alive, agree

    def _crash_kinds(self, out: StepOutputs, G: np.ndarray) -> np.ndarray:
        """``(N, R)`` KIND_* of each rank's crash (0: none)."""
        kinds = np.where(out.crash_kind == CRASH_ASSERT, KIND_CRASH,
                         np.where(out.crash_kind == CRASH_ALLOC_NONE, KIND_HANG, 0))
        hooked = out.crash & (kinds == 0)
        if hooked.any():
            for t, r in zip(*np.nonzero(hooked)):
                msg = self.hook_messages.get((tuple(G[t].tolist()), int(r)), "")
                kinds[t, r] = crash_kind_of_message(msg)
        return kinds

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


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` (the inverse flat) of non-negative int
    rows, through one packed int per row when the columns' ranges fit in 62 bits."""
    if not len(rows):
        return rows, np.zeros(0, np.int64)
    span = rows.max(axis=0) + 1
    if rows.min() < 0 or float(np.prod(span.astype(float))) >= 2.0 ** 62:
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    packed = np.zeros(len(rows), np.int64)
    for c in range(rows.shape[1]):
        packed = packed * int(span[c]) + rows[:, c]
    _, first, inv = np.unique(packed, return_index=True, return_inverse=True)
    return rows[first], inv.reshape(-1)


def getattr_outcome(outcome, field: str) -> bool:
    """A ``PadOutcome`` as the ``PadDecision`` field ``field``."""
    if field == "role_context":
        return bool(outcome.padded) and outcome.role == "context"
    if field == "crash":
        return outcome.crash is not None
    if field == "surplus":
        return bool(outcome.surplus_warning)
    return bool(getattr(outcome, field))


def _role_table(policy: Policy) -> np.ndarray:
    """``context_after(previous, context_arrived, generation_arrived)`` as an 8-entry lookup."""
    return np.array([policy.dummy_role.context_after(bool(p), bool(c), bool(g))
                     for p in (0, 1) for c in (0, 1) for g in (0, 1)], bool)


def _inputs(at: Callable[[str, np.ndarray], np.ndarray], G: np.ndarray, k: int, role: np.ndarray,
            kv_fields: dict[str, np.ndarray]) -> StepInputs:
    """``(N, R)`` step inputs of the transitions ``G`` for policy ``k`` (``at(name, G)``: a
    table column gathered at ``G``)."""
    shape = G.shape
    kv = at("kv", G)
    extra = {name: values[kv] for name, values in kv_fields.items()}
    alloc = extra.pop("alloc_ok", np.ones(shape, bool, order="F"))
    minus = np.full(shape, -1, np.int64, order="F")
    role_col = np.empty(shape, bool, order="F")
    role_col[:] = role[:, None]
    return StepInputs(n_real=at("n_real", G), sched_real=at(f"sched_real{k}", G),
                      window_real=at("window_real", G), new_real=at("new_real", G),
                      all_before_ctx=at("all_before_ctx", G), alloc_ok=alloc.astype(bool),
                      real_batch=minus, expected_recorded=minus, recorded_counts=minus,
                      carried=at("carried", G), carried_last=at("carried_last", G),
                      intent=at("intent", G).astype(np.int8),
                      role_context=role_col, **extra)


def _take(out: StepOutputs, k: np.ndarray) -> StepOutputs:
    return StepOutputs(**{f.name: getattr(out, f.name)[k] for f in dataclasses.fields(out)})


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
    (:func:`_level_keys`): then a row's key is the same at every level, and the visited states
    are kept as those ints."""
    return width * _ID_BITS <= 62 and extra_bits <= _ID_BITS


def _level_keys(rows: np.ndarray, packed: bool) -> np.ndarray:
    """One int per distinct row of ``rows`` (equal rows, equal ints): the rows packed (the same
    at every level) when ``packed`` (:func:`_packs`), else within one level."""
    if packed:
        key = np.zeros(len(rows), np.int64)
        for r in range(rows.shape[1]):
            key = (key << _ID_BITS) | rows[:, r]
        return key
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)


def _first_difference(a: StepOutputs, b: StepOutputs, kinds_a: np.ndarray,
                      kinds_b: np.ndarray) -> tuple:
    """Per transition, where two policies first decide differently: ``(field index, a value,
    b value, field names)``, the index -1 where they agree (the first differing field, the
    first rank differing)."""
    n = len(kinds_a)
    first_field = np.full(n, -1)
    va = np.zeros(n, np.int64)
    vb = np.zeros(n, np.int64)
    cols = [("crash", kinds_a, kinds_b)] + [(f, getattr(a, f), getattr(b, f))
                                            for f in DIVERGENCE_FIELDS if f != "crash"]
    for i, (name, x, y) in enumerate(cols):
        x = np.asarray(x).astype(np.int64)
        y = np.asarray(y).astype(np.int64)
        diff = x != y
        row = diff.any(axis=1) & (first_field < 0)
        if row.any():
            idx = np.flatnonzero(row)
            r = np.argmax(diff[idx], axis=1)
            va[idx] = x[idx, r]
            vb[idx] = y[idx, r]
            first_field[idx] = i
    return first_field, va, vb, [c[0] for c in cols]


def _divergence(first: tuple, live: np.ndarray):
    """Transitions (among ``live``) where two policies decide differently, and the divergence
    keys ``(field, a value, b value)`` of the first differing field (``_first_difference``)."""
    first_field, va, vb, names = first
    diverged = (first_field >= 0) & live
    keys = []
    if diverged.any():
        combo = np.stack([first_field, va, vb], axis=1)[diverged]
        for f, x, y in np.unique(combo, axis=0).tolist():
            mask = diverged & (first_field == f) & (va == x) & (vb == y)
            keys.append(((names[f], x, y), mask))
    return diverged, keys


def decision_key(policy: Policy, config: RunConfig) -> tuple:
    """Everything a catalogue policy's step decision reads of the policy under ``config``
    (``replay.step.decide``, the pad count, the dummy role): policies with one key decide every
    transition alike."""
    return (policy.predicate(config), policy.uses_forward_intent(config),
            policy.alloc_failure_for(config), policy.rolls_back(config), policy.postpads(config),
            policy.prechecks(config), policy.pads_run(config), policy.gated(config),
            policy.cap, policy.entry_check, policy.dummy_role)


__all__ = ["Found", "Search", "SearchStats", "decision_key"]
