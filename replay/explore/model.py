"""The explorer's abstract state and each rank's environment moves, as tables of step inputs.

An abstract **rank state** is what a rank carries from one iteration to the next that can change
a later decision: its real requests as a multiset of ``(class, after_dummy)`` tokens (request
renaming: ids do not matter, only classes, and whether the request was appended after a carried
dummy, which decides ``carried_last``), its carried dummy (0: none, else the id of the reason
the dummy leaked, see :class:`Reasons`) and whether it handled responses in the previous
iteration (2 at the start: nothing held yet). The **fleet state** is the sorted tuple of rank
states (rank permutation), the previous ``can_queue`` and the dummy role carried.

A rank's **move** (:class:`Move`) in one iteration: each held request completes or moves to a
class (``replay.explore.classes`` says which), arrivals join, and the KV outcome of a dummy
allocation (``replay.explore.space.KV_OUTCOMES``). :class:`Tables` turns every move of a rank
state into the ``replay.step.StepInputs`` columns of its frame, once per (rank state, previous
``can_queue``), so a whole BFS level is decided with one batched ``decide``.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
from typing import Optional

import numpy as np

from replay.config import RunConfig
from replay.explore.classes import StateClass, arrival_state, classes_for
from replay.explore.space import KV_OUTCOMES, KvOutcome
from replay.policy import Policy, Predicate
from replay.states import (ALL_STATES, CONTEXT_INTENT_STATES, CONTEXT_ONLY_STATES,
                           GENERATION_ONLY_STATES, RequestState)
from replay.step import INTENT_CONTEXT, INTENT_GENERATION, INTENT_NONE

#: ``RankState.processed`` at the start of a schedule (the engine's first frame: nothing is new).
START = 2

#: A rank state: (tokens, dummy, processed); tokens a sorted tuple of (class, after_dummy).
RankState = tuple


@dataclasses.dataclass(frozen=True)
class Move:
    """One rank's environment move in one iteration.

    Fields:
        fates: per held token (sorted order): the class it moves to, or -1 when it completed.
        arrivals: classes of the requests fetched this iteration (sorted).
        kv: index into the KV outcomes.
    """

    fates: tuple[int, ...]
    arrivals: tuple[int, ...]
    kv: int


class Reasons:
    """Interned reasons a rank scheduled 0 (a failure's cause): the classes it held, or a KV
    outcome. Id 0 is "no reason" (no zero-batch rank)."""

    def __init__(self) -> None:
        self.labels: list[str] = ["-"]
        self._ids: dict[str, int] = {"-": 0}

    def id(self, label: str) -> int:
        if label not in self._ids:
            self._ids[label] = len(self.labels)
            self.labels.append(label)
        return self._ids[label]


_INT_FIELDS = ("n_real", "window_real", "new_real", "intent", "arrived", "reason",
               "state", "dummy", "kv")
_BOOL_FIELDS = ("all_before_ctx", "ctx_new", "gen_new", "carried", "carried_last")


@dataclasses.dataclass(frozen=True)
class _Block:
    """The moves of one ``(tokens, carries a dummy, processed, previous can_queue)`` and their
    frame features (reasons as labels), the same in every table of one key."""

    moves: tuple[Move, ...]
    frames: tuple
    cols: dict
    reasons: tuple[str, ...]


#: Move blocks per table key, most recently used last (every table of one key reads them: a
#: configuration space's searches that sum the same class masks enumerate each move once).
_BLOCKS: "collections.OrderedDict[tuple, dict]" = collections.OrderedDict()
_BLOCKS_KEPT = 32


def _blocks_for(key: tuple) -> dict:
    got = _BLOCKS.get(key)
    if got is None:
        got = _BLOCKS[key] = {}
        while len(_BLOCKS) > _BLOCKS_KEPT:
            _BLOCKS.popitem(last=False)
    else:
        _BLOCKS.move_to_end(key)
    return got


class Tables:
    """Rank states, their moves and each move's frame features, for one config (the pad count
    ``sched_real{k}`` once per policy ``k``: a differential run decides both on one table).

    Global ids: rank states are interned (``state_id``); every move of every (rank state,
    previous can_queue) gets a global *choice* id whose features live in numpy columns
    (``col(name)``), rebuilt when tables grew.
    """

    def __init__(self, policies: tuple[Policy, ...], config: RunConfig, requests: int,
                 kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES,
                 reasons: Optional[Reasons] = None):
        self.policies = policies
        self.config = config
        self.kv = kv_outcomes
        self.limit = max(0, min(requests, config.cap))
        self.classes: tuple[StateClass, ...] = classes_for(config.disaggregated)
        self.reasons = reasons or Reasons()
        col = {int(s): i for i, s in enumerate(ALL_STATES)}
        reps = [col[int(c.representative)] for c in self.classes]
        smask = Predicate.SCHEDULER.mask(config)
        #: Every version's pad count, per class.
        self.c_counts = [np.array([bool(p.mask(config)[i]) for i in reps]) for p in Predicate]
        #: Per policy: the classes its pad predicate counts.
        self.c_sched = [np.array([bool(p.predicate(config).mask(config)[i]) for i in reps])
                        for p in policies]
        self.c_window = np.array([c.in_window for c in self.classes])
        self.c_intent_sched = np.array([bool(smask[i]) for i in reps])
        self.c_intent_ctx = np.array([bool(smask[col[int(c.representative)]])
                                      and c.representative in CONTEXT_INTENT_STATES
                                      for c in self.classes])
        self.c_before = np.array([int(c.representative) < int(RequestState.CONTEXT_INIT)
                                  for c in self.classes])
        dis = config.disaggregated
        self.c_ctx_only = np.array([arrival_state(c, dis) in CONTEXT_ONLY_STATES and dis
                                    for c in self.classes])
        self.c_gen_only = np.array([arrival_state(c, dis) in GENERATION_ONLY_STATES and dis
                                    for c in self.classes])
        self.arrival_classes = [c.index for c in self.classes if c.arrival]
        # The same per-class facts as Python lists: a move's few classes are summed in Python
        # (numpy's per-call cost dominates on a handful of elements).
        self._l_sched = [m.tolist() for m in self.c_sched]
        self._l_masks = [m.tolist() for m in self.c_sched + self.c_counts]
        self._l_window = self.c_window.tolist()
        self._l_intent_ctx = self.c_intent_ctx.tolist()
        self._l_intent_sched = self.c_intent_sched.tolist()
        self._l_before = self.c_before.tolist()
        self._l_ctx_only = self.c_ctx_only.tolist()
        self._l_gen_only = self.c_gen_only.tolist()
        key = (self.config.disaggregated, self.limit, self.kv,
               tuple(tuple(m.tolist()) for m in self.c_sched + self.c_counts),
               tuple(self._l_intent_sched))
        #: Move blocks shared with every table of the same key in this process (rank states
        #: interned per table, so ids stay numbered as this table's search meets them).
        self._blocks = _blocks_for(key)
        self.states: list[RankState] = []
        self._state_ids: dict[RankState, int] = {}
        self._moves_of: dict[tuple[int, bool], tuple[int, int]] = {}
        self.moves: list[Move] = []
        self.frames: list[tuple[tuple[int, int, bool], ...]] = []  # (class, after, new) per move
        self._cols: dict[str, list] = {k: [] for k in _INT_FIELDS + _BOOL_FIELDS}
        self._cols.update({f"sched_real{k}": [] for k in range(len(policies))})
        self._arrays: dict[str, np.ndarray] = {}
        self._n_arrays = -1
        self._next: dict[tuple[int, int, int], int] = {}
        #: ``replay.explore.search``'s next-state lookup table (-1: not computed yet).
        self.next_lut = np.full(0, -1, np.int64)

    # ------------------------------------------------------------------ states
    def state_id(self, state: RankState) -> int:
        sid = self._state_ids.get(state)
        if sid is None:
            sid = self._state_ids[state] = len(self.states)
            self.states.append(state)
        return sid

    def initial(self) -> int:
        return self.state_id(((), 0, START))

    # ------------------------------------------------------------------ moves
    def moves_of(self, sid: int, can_queue_prev: bool) -> tuple[int, int]:
        """``[first, last)`` global choice ids of a rank state's moves."""
        key = (sid, bool(can_queue_prev))
        got = self._moves_of.get(key)
        if got is None:
            state = self.states[sid]
            tokens, dummy, processed = state
            bkey = (tokens, dummy > 0, processed, bool(can_queue_prev))
            block = self._blocks.get(bkey)
            if block is None:
                block = self._blocks[bkey] = self._block(state, bool(can_queue_prev))
            first = len(self.moves)
            n = len(block.moves)
            self.moves.extend(block.moves)
            self.frames.extend(block.frames)
            cols = self._cols
            for name, values in block.cols.items():
                cols[name].extend(values)
            cols["state"].extend([sid] * n)
            cols["dummy"].extend([dummy] * n)
            intern = self.reasons.id  # in move order: ids are numbered as the search meets them
            cols["reason"].extend([intern(label) for label in block.reasons])
            got = self._moves_of[key] = (first, len(self.moves))
        return got

    def _enumerate(self, state: RankState, can_queue_prev: bool):
        tokens, _dummy, processed = state
        options = []
        for cls, _after in tokens:
            c = self.classes[cls]
            targets = ([cls] if c.in_window and not can_queue_prev
                       else [o.index for o in self.classes if c.may_become(o)])
            options.append(([-1] if processed == 1 else []) + targets)
        fate_lists = []
        for fates in itertools.product(*options):
            # Equal tokens are interchangeable (request renaming): keep one order of their fates.
            if all(fates[i] <= fates[i + 1] for i in range(len(fates) - 1)
                   if tokens[i] == tokens[i + 1]):
                fate_lists.append(fates)
        for fates in fate_lists:
            room = self.limit - sum(1 for f in fates if f >= 0)
            for k in range(room + 1):
                for arrivals in itertools.combinations_with_replacement(self.arrival_classes, k):
                    classes = [f for f in fates if f >= 0] + list(arrivals)
                    for kv in range(len(self.kv) if self._may_allocate(classes) else 1):
                        yield Move(fates=tuple(fates), arrivals=arrivals, kv=kv)

    def _may_allocate(self, classes: list[int]) -> bool:
        """Whether a rank holding ``classes`` may ask for a dummy: some pad count of some version
        (every ``Predicate``, and each explored policy's) is 0 there (pad step), or nothing of it
        is in the window (post-schedule pad). Elsewhere no version allocates a dummy, a KV
        outcome is never observed, and only "fits" is enumerated."""
        window = self._l_window
        if not any(window[c] for c in classes):
            return True
        return any(not any(mask[c] for c in classes) for mask in self._l_masks)

    def _block(self, state: RankState, can_queue_prev: bool) -> "_Block":
        """Every move of a rank state and its features, but for the columns naming the state
        itself (``state``, ``dummy``) and the reason ids (labels here)."""
        tokens, dummy, processed = state
        start = processed == START
        carried = dummy > 0
        names = ([f"sched_real{k}" for k in range(len(self._l_sched))]
                 + [n for n in _INT_FIELDS + _BOOL_FIELDS if n not in ("state", "dummy", "reason")])
        cols: dict[str, list] = {n: [] for n in names}
        moves, frames, reasons = [], [], []
        for move in self._enumerate(state, can_queue_prev):
            frame = [(f, a, False) for (c, a), f in zip(tokens, move.fates) if f >= 0]
            frame += [(c, int(carried), not start) for c in move.arrivals]
            classes = [c for c, _, _ in frame]
            news = [c for c, _, n in frame if n]
            cols["n_real"].append(len(frame))
            for k, mask in enumerate(self._l_sched):
                cols[f"sched_real{k}"].append(sum(mask[c] for c in classes))
            window = self._l_window
            cols["window_real"].append(sum(window[c] for c in classes))
            cols["new_real"].append(len(news))
            intent = (INTENT_CONTEXT if any(self._l_intent_ctx[c] for c in classes) else
                      INTENT_GENERATION if any(self._l_intent_sched[c] for c in classes)
                      else INTENT_NONE)
            cols["intent"].append(intent)
            cols["arrived"].append(len(move.arrivals))
            reasons.append(self._reason(classes))
            cols["all_before_ctx"].append(bool(classes) and all(self._l_before[c] for c in classes))
            cols["ctx_new"].append(any(self._l_ctx_only[c] for c in news))
            cols["gen_new"].append(any(self._l_gen_only[c] for c in news))
            cols["carried"].append(carried)
            cols["carried_last"].append(carried and not any(a for _, a, _ in frame))
            cols["kv"].append(move.kv)
            moves.append(move)
            frames.append(tuple(frame))
        return _Block(moves=tuple(moves), frames=tuple(frames), cols=cols, reasons=tuple(reasons))

    def _reason(self, classes: list[int]) -> str:
        """Why a rank holding ``classes`` might schedule 0 without a dummy: the classes the
        (first) policy's pad count takes that the scheduler window refuses; else what it held."""
        counted = sorted({c for c in classes if self._l_sched[0][c] and not self._l_window[c]})
        if counted:
            return ",".join(self.classes[c].label for c in counted)
        held = sorted(set(classes))
        return "only " + ",".join(self.classes[c].label for c in held) if held else "no request"

    def col(self, name: str) -> np.ndarray:
        """A feature column over every choice id (numpy; rebuilt after the tables grew)."""
        if self._n_arrays != len(self.moves):
            self._arrays = {k: np.array(v, dtype=bool if k in _BOOL_FIELDS else np.int64)
                            for k, v in self._cols.items()}
            self._n_arrays = len(self.moves)
        return self._arrays[name]

    def kv_fields(self) -> dict[str, np.ndarray]:
        """``{StepInputs field: value per KV outcome index}`` for every field an outcome sets
        (an outcome that does not set it leaves the field's default, True)."""
        names = sorted({name for o in self.kv for name, _ in o.step})
        return {name: np.array([dict(o.step).get(name, True) for o in self.kv]) for name in names}

    # ------------------------------------------------------------------ successors
    def next_state(self, choice: int, dummy_after: int, processed: int) -> int:
        """The rank state after a move: ``dummy_after`` 0 (no dummy alive), -1 (the carried one
        survived) or a reason id (a dummy created this iteration leaked for that reason)."""
        key = (choice, dummy_after, processed)
        got = self._next.get(key)
        if got is None:
            frame = self.frames[choice]
            _tokens, dummy, _p = self.states[self._cols["state"][choice]]
            if dummy_after == 0:
                tokens = tuple(sorted((c, 0) for c, _, _ in frame))
                new_dummy = 0
            elif dummy_after < 0:
                tokens = tuple(sorted((c, a) for c, a, _ in frame))
                new_dummy = dummy
            else:
                tokens = tuple(sorted((c, 0) for c, _, _ in frame))
                new_dummy = dummy_after
            got = self._next[key] = self.state_id((tokens, new_dummy, processed))
        return got

    def frame_states(self, choice: int) -> list[tuple[RequestState, bool]]:
        """The frame of a move as ``(state, after_dummy)`` per request, for hooks and traces."""
        dis = self.config.disaggregated
        return [(arrival_state(self.classes[c], dis) if new or self.states[
                    self._cols["state"][choice]][2] == START else self.classes[c].representative,
                 bool(a)) for c, a, new in self.frames[choice]]


__all__ = ["Move", "RankState", "Reasons", "START", "Tables"]
