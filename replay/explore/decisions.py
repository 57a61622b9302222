"""What one BFS level's transitions decide: every policy's step, the failures, the divergences.

A transition's decisions depend only on what each rank's move looks like to the executor (the
step inputs of every policy, what a hook sees, the reason a zero batch would be blamed on, the
carried dummy's cause, the KV outcome) and on the dummy roles carried in: its **row**, a tuple of
per-rank *choice classes* (:meth:`Decider.classes`) and the roles. A level of millions of
transitions holds a few thousand distinct rows; :class:`Decider` decides each distinct row once
(``replay.step.decide``, batched; a policy with a ``pad_hook`` through the hook, cached per
distinct fleet frame) and :class:`Level` holds the per-row facts the search scatters back.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from replay.config import RunConfig
from replay.explore.mechanisms import (
    DIVERGENCE_FIELDS,
    KIND_CRASH,
    KIND_ERROR,
    KIND_HANG,
    KIND_LEAK,
    KIND_WASTE,
    crash_kind_of_message,
)
from replay.explore.model import Reasons, Tables
from replay.policy import FrameView, Policy
from replay.states import RequestState
from replay.step import (
    CRASH_ALLOC_NONE,
    CRASH_ASSERT,
    PadDecision,
    StepInputs,
    StepOutputs,
    decide,
    decision_key,
    expected_step,
)
from replay.walk import hook_outcomes

#: Per-choice columns a transition's decisions read (besides each policy's ``sched_real{k}`` and,
#: with a hook, what the hook sees).
CLASS_COLUMNS = ("n_real", "window_real", "new_real", "intent", "reason", "dummy", "kv",
                 "all_before_ctx", "ctx_new", "gen_new", "carried", "carried_last")

_BIG = np.iinfo(np.int64).max
#: The ``PadDecision`` fields a hook's outcome gives.
PAD_FIELDS = ("padded", "role_context", "alloc_failed", "crash", "surplus")


class HookMemo:
    """Hook outcomes per distinct fleet frame, and the interned frames a hook sees, shared by the
    searches of one hook group (``replay.explore.explorer.hook_group``: configurations the hooks
    cannot tell apart) within one process."""

    def __init__(self) -> None:
        self.outcomes: dict = {}
        self.views: list = []
        self.view_index: dict = {}


@dataclasses.dataclass
class Level:
    """What a level's distinct rows decide (one entry per row).

    Fields:
        events: ``(kind, hit, cause)`` per failure kind seen: the rows showing it and the reason
            id blamed (``_BIG`` where none).
        ok: the explored policy did not crash.
        diffs: per compared reference ``k``: ``(field index, a value, b value)`` of its first
            difference with the explored policy (field index -1: they agree).
        names: the fields the indices name.
        dummy_after: per rank: 0 no dummy alive after, -1 the carried one survived, else the
            reason id of a dummy created now that leaked.
        processed: per rank: it handled responses (``processed_prev``).
        role: bit k: policy k's dummy role after the iteration is context.
        can_queue: the explored policy's fleet-wide ``can_queue``.
    """

    events: list
    ok: np.ndarray
    diffs: dict
    names: list
    dummy_after: np.ndarray
    processed: np.ndarray
    role: np.ndarray
    can_queue: np.ndarray


class Decider:
    """Decides transitions for one search's policies (the explored one first, then the
    references) and keeps what is reused across levels: hook outcomes per distinct fleet frame,
    what a hook sees of each choice, the choice classes.

    Args:
        policies: the explored policy, then the references.
        reasons: the search's interned failure reasons.
        hooks: hook outcomes shared with other searches (default: this search's own).
    """

    def __init__(self, policies: tuple[Policy, ...], reasons: Reasons,
                 hooks: Optional[HookMemo] = None):
        self.policies = policies
        self.reasons = reasons
        self.hooked = any(p.pad_hook is not None for p in policies)
        self.hook_messages: dict = {}
        self.hooks = hooks or HookMemo()
        self._request_cache: dict = {}
        self._view_of: dict = {}
        self._class_of: dict = {}
        self._gathered_for: Optional[np.ndarray] = None
        self._gathered: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ rows
    def at(self, tables: Tables, name: str, G: np.ndarray) -> np.ndarray:
        """``tables.col(name)[G]``, gathered once per ``G``."""
        if self._gathered_for is not G:
            self._gathered_for = G
            self._gathered = {}
        got = self._gathered.get(name)
        if got is None:
            got = self._gathered[name] = tables.col(name)[G]
        return got

    def classes(self, tables: Tables) -> np.ndarray:
        """Per choice id: its class, interned; choices of one class look alike to every
        decision of every policy (:data:`CLASS_COLUMNS`, each policy's count, the hook's view)."""
        index, ids, arr = self._class_of.get(id(tables), ({}, [], None))
        n = len(tables.moves)
        if len(ids) < n:
            start = len(ids)
            cols = [tables.col(c)[start:n].astype(np.int64) for c in CLASS_COLUMNS]
            cols += [tables.col(f"sched_real{k}")[start:n] for k in range(len(self.policies))]
            if self.hooked:
                cols.append(self.view_ids(tables)[start:n])
            for row in map(tuple, np.stack(cols, axis=1).tolist()):
                cid = index.get(row)
                if cid is None:
                    cid = index[row] = len(index)
                ids.append(cid)
            arr = None
        if arr is None or len(arr) < n:
            arr = np.asarray(ids, np.int64)
        self._class_of[id(tables)] = (index, ids, arr)
        return arr

    def distinct(self, tables: Tables, G: np.ndarray, role_in: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The distinct rows of the transitions ``G`` (roles in ``role_in``): one transition
        index per distinct row, and each transition's row number."""
        code = np.concatenate([self.classes(tables)[G], role_in[:, None]], axis=1)
        return distinct_rows(code)

    # ------------------------------------------------------------------ deciding
    def decide_rows(self, tables: Tables, G: np.ndarray, role_in: np.ndarray,
                    skip: Sequence[int] = ()) -> list:
        """Every policy's ``(inputs, outputs, role)`` for the transitions ``G`` (``(N, R)``
        choice ids) from states whose carried dummy roles are ``role_in`` (bit k: policy k's);
        None for the policies in ``skip``."""
        ctx = self.at(tables, "ctx_new", G).any(axis=1)
        gen = self.at(tables, "gen_new", G).any(axis=1)
        kv_fields = tables.kv_fields()
        outs: list = []
        decided: dict = {}  # decision key -> the first policy deciding so (decided once)
        for k, pol in enumerate(self.policies):
            if k in skip:
                outs.append(None)
                continue
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

    def level(self, tables: Tables, G: np.ndarray, role_in: np.ndarray,
              compared: Sequence[int]) -> Level:
        """The facts of the (distinct) transitions ``G``: failures of the explored policy, the
        first difference of each reference in ``compared``, what the next state needs."""
        skip = [k for k in range(1, len(self.policies)) if k not in compared]
        outs = self.decide_rows(tables, G, role_in, skip)
        inp, out, _ = outs[0]
        kinds = self.crash_kinds(out, G)
        crash = (kinds > 0).any(axis=1)
        carried_cause = np.where(inp.carried, self.at(tables, "dummy", G), 0)
        kv_reason = self._kv_reasons(tables)[self.at(tables, "kv", G)]
        frame_reason = self.at(tables, "reason", G)
        events = []
        for kind in (KIND_CRASH, KIND_HANG, KIND_ERROR):
            on = kinds == kind
            hit = on.any(axis=1)
            if hit.any():
                cause = {KIND_CRASH: np.where(carried_cause > 0, carried_cause, frame_reason),
                         KIND_HANG: kv_reason, KIND_ERROR: frame_reason}[kind]
                events.append((kind, hit, np.where(on, cause, _BIG).min(axis=1)))
        ok = ~crash
        leak_cause = self.leak_cause(tables, G, out)
        leak = (out.survives & ~inp.carried).any(axis=1) & ok
        if leak.any():
            events.append((KIND_LEAK, leak, leak_cause))
        waste = out.surplus.any(axis=1) & ok
        if waste.any():
            events.append((KIND_WASTE, waste, np.where(out.surplus & (carried_cause > 0),
                                                        carried_cause, _BIG).min(axis=1)))
        diffs: dict = {}
        shared: dict = {}  # per distinct decision (references deciding alike share one)
        names: list = []
        for k in compared:
            got = shared.get(id(outs[k]))
            if got is None:
                got = shared[id(outs[k])] = first_difference(
                    out, outs[k][1], kinds, self.crash_kinds(outs[k][1], G))
            diffs[k] = got[:3]
            names = got[3]
        role = np.zeros(len(G), np.int64)
        for k, o in enumerate(outs):
            if o is not None:
                role |= o[2].astype(np.int64) << k
        return Level(events=events, ok=ok, diffs=diffs, names=names,
                     dummy_after=dummy_after(inp, out, leak_cause),
                     processed=out.processed_prev.astype(np.int64), role=role,
                     can_queue=out.can_queue[:, 0].copy())

    # ------------------------------------------------------------------ failures
    def _kv_reasons(self, tables: Tables) -> np.ndarray:
        return np.array([self.reasons.id(f"KV {k.name}") for k in tables.kv])

    def leak_cause(self, tables: Tables, G: np.ndarray, o: StepOutputs) -> np.ndarray:
        """Per transition: the smallest reason among the ranks that scheduled 0."""
        reason = np.where(o.alloc_failed, self._kv_reasons(tables)[self.at(tables, "kv", G)],
                          self.at(tables, "reason", G))
        cause = np.where(o.batch == 0, reason, _BIG).min(axis=1)
        return np.where(cause == _BIG, 0, cause)

    def crash_kinds(self, out: StepOutputs, G: np.ndarray) -> np.ndarray:
        """``(N, R)`` KIND_* of each rank's crash (0: none)."""
        kinds = np.where(out.crash_kind == CRASH_ASSERT, KIND_CRASH,
                         np.where(out.crash_kind == CRASH_ALLOC_NONE, KIND_HANG, 0))
        hooked = out.crash & (kinds == 0)
        if hooked.any():
            for t, r in zip(*np.nonzero(hooked)):
                msg = self.hook_messages.get((tuple(G[t].tolist()), int(r)), "")
                kinds[t, r] = crash_kind_of_message(msg)
        return kinds

    # ------------------------------------------------------------------ hooks
    def _hook_pads(self, pol: Policy, cfg: RunConfig, tables: Tables, G: np.ndarray,
                   inp: StepInputs, role: np.ndarray) -> PadDecision:
        """The hook's pad decision for every transition (cached per distinct fleet frame)."""
        _, expected, _ = expected_step(pol, cfg, inp)
        n, R = G.shape
        # What the hook sees, rank by rank (requests, expected, KV, new): identical fleet frames
        # are decided once, and so are fleet frames that differ only in the order of their
        # ranks (the search already takes the code to be rank-symmetric: a fleet state is its
        # sorted tuple of rank states); the hook sees the ranks in sorted order.
        view = self.view_ids(tables)[G]
        perm = np.lexsort((expected, view), axis=1)
        back = np.argsort(perm, axis=1)
        view = np.take_along_axis(view, perm, axis=1)
        expected = np.take_along_axis(np.asarray(expected, np.int64), perm, axis=1)
        code = np.concatenate([view, expected, role[:, None].astype(np.int64)], axis=1)
        first, inv = distinct_rows(code)
        outcome_rows = []
        for u in code[first].tolist():
            key = (tuple(u), id(pol))
            got = self.hooks.outcomes.get(key)
            if got is None:
                seen = self.hooks.views
                views = [FrameView(iter=0, rank=r, requests=seen[u[r]][0],
                                   expected=int(u[R + r]), config=cfg,
                                   alloc_ok=seen[u[r]][1], new_requests=seen[u[r]][2],
                                   kv_precheck_ok=seen[u[r]][3])
                         for r in range(R)]
                outcomes = hook_outcomes(pol, views, bool(u[-1]))
                got = self.hooks.outcomes[key] = (outcomes, np.array(
                    [[getattr_outcome(oc, f) for oc in outcomes] for f in PAD_FIELDS], bool))
            outcome_rows.append(got)
        table = (np.stack([row for _, row in outcome_rows])[inv] if outcome_rows
                 else np.zeros((0, len(PAD_FIELDS), R), bool))  # (n, field, rank)
        res = {f: np.asfortranarray(np.take_along_axis(table[:, i, :], back, axis=1))
               for i, f in enumerate(PAD_FIELDS)}
        for t in np.flatnonzero(res["crash"].any(axis=1)).tolist():
            for r in range(R):
                if res["crash"][t, r]:
                    msg = outcome_rows[inv[t]][0][int(back[t, r])].crash
                    self.hook_messages[(tuple(int(x) for x in G[t]), r)] = msg
        return PadDecision(**res)

    def view_ids(self, tables: Tables) -> np.ndarray:
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
            vid = self.hooks.view_index.get(content)
            if vid is None:
                vid = self.hooks.view_index[content] = len(self.hooks.views)
                self.hooks.views.append(content)
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


def dummy_after(inp: StepInputs, o: StepOutputs, leak_cause: np.ndarray) -> np.ndarray:
    """Per rank, the dummy carried into the next iteration: 0 none, -1 the carried one, else the
    reason id of a dummy created now that survived (it leaked for that reason)."""
    fresh = (o.padded | o.postpadded) & ~inp.carried
    return np.where(~o.survives, 0, np.where(fresh, leak_cause[:, None], -1))


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of non-negative int ``rows``: the index of the first occurrence of each
    and, per row, its distinct row's number; through one packed int per row, hashed
    (``pandas.factorize``, no sort), when the columns' ranges fit in 62 bits."""
    if not len(rows):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = rows.max(axis=0) + 1
    if rows.min() < 0 or float(np.prod(span.astype(float))) >= 2.0 ** 62:
        _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        return first, inv.reshape(-1)
    packed = np.zeros(len(rows), np.int64)
    for c in range(rows.shape[1]):
        packed = packed * int(span[c]) + rows[:, c]
    inv, _ = pd.factorize(packed)
    # Numbers are given in order of first occurrence: a row is first where its number exceeds
    # every number before it.
    seen = np.maximum.accumulate(inv)
    first = np.flatnonzero(np.concatenate([[True], inv[1:] > seen[:-1]]))
    return first, inv.astype(np.int64)


def first_difference(a: StepOutputs, b: StepOutputs, kinds_a: np.ndarray,
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


__all__ = ["CLASS_COLUMNS", "Decider", "HookMemo", "Level", "distinct_rows", "dummy_after",
           "first_difference", "getattr_outcome"]
