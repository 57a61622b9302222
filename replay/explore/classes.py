"""The abstract request states of the explorer: the classes the executor's code treats differently.

Two request states are in one class when every pad predicate of every version
(:class:`replay.policy.Predicate` masks), the micro-batch scheduler window, the forward intent's
context test and the "before CONTEXT_INIT" test of the dummy role all treat them alike: no
executor version the replay models can tell them apart at pad entry. The classes are computed
from those masks (nothing is listed by hand), so a predicate added to ``Predicate`` refines them.

What the environment may do with a request, per iteration (the explorer's model of the world
around the pad code; domain doc §2-4):

* a request **arrives** in an initial state: ``CONTEXT_INIT`` (aggregated, context server),
  ``DISAGG_CONTEXT_WAIT_SCHEDULER`` (gen-first context server), ``DISAGG_GENERATION_INIT``
  (generation server); only ``CONTEXT_INIT`` without a transceiver (no ``DISAGG_*`` state);
* it **moves** forward in enum order (the enum is chronological) to any class holding a later
  state, never past the scheduler window in one iteration from below it (it is scheduled on the
  way); a request in the scheduler window advances only by a forward pass, so only after an
  iteration whose ``can_queue`` was True (this is why ``GENERATION_TO_COMPLETE`` is reached only
  after a forward, §3);
* it **completes** (leaves ``active_requests``) only after an iteration in which its rank handled
  responses (``processed_prev``: the overlap loop's timing, §4).

Example:
    >>> [c.label for c in classes_for(disaggregated=True)]  # doctest: +NORMALIZE_WHITESPACE
    ['DISAGG_CONTEXT_WAIT_SCHEDULER', 'DISAGG_GENERATION_INIT', 'CONTEXT_INIT',
     'GENERATION_IN_PROGRESS', 'GENERATION_TO_COMPLETE']
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from replay.config import RunConfig
from replay.policy import Predicate
from replay.states import (ALL_STATES, CONTEXT_INTENT_STATES, GENERATION_DUMMY_STATE,
                           RequestState, micro_batch_window, states_mask)

#: States a fetched request starts in (domain doc §2): aggregated and context-server arrivals,
#: gen-first context-server arrivals, generation-server arrivals.
ARRIVAL_STATES = (RequestState.CONTEXT_INIT, RequestState.DISAGG_CONTEXT_WAIT_SCHEDULER,
                  RequestState.DISAGG_GENERATION_INIT)


@dataclasses.dataclass(frozen=True)
class StateClass:
    """One abstract request state.

    Fields:
        index: position in the explorer's class table (its order: lowest state first).
        states: the ``RequestState`` members the executor cannot tell apart.
        representative: the state a witness trace writes for the class.
        in_window: the micro-batch scheduler takes it (it advances only by a forward pass).
        arrival: a fetched request may start in it.
    """

    index: int
    states: tuple[RequestState, ...]
    representative: RequestState
    in_window: bool
    arrival: bool

    @property
    def label(self) -> str:
        return self.representative.name

    def may_become(self, other: "StateClass") -> bool:
        """Enum order is chronological: some state of ``other`` is not before some state here;
        and a request below the scheduler window reaches the states after it only through the
        window (it is scheduled first), so not in one iteration."""
        window = micro_batch_window(False)
        below = all(int(s) < int(window.start) for s in self.states)
        past = all(int(s) >= int(window.end) for s in other.states)
        if below and past:
            return False
        return max(int(s) for s in other.states) >= min(int(s) for s in self.states)


def _signatures() -> dict[RequestState, tuple[bool, ...]]:
    """Each state's column of every mask the pad code reads (an encoder-decoder window aside)."""
    cfg = RunConfig(tp_size=1)
    cols = [p.mask(cfg) for p in Predicate]
    cols.append(micro_batch_window(False).mask())
    cols.append(states_mask(CONTEXT_INTENT_STATES))
    cols.append(np.array([int(s) < int(RequestState.CONTEXT_INIT) for s in ALL_STATES]))
    return {s: tuple(bool(c[i]) for c in cols) for i, s in enumerate(ALL_STATES)}


def _allowed(state: RequestState, disaggregated: bool) -> bool:
    return disaggregated or not state.name.startswith("DISAGG_")


@functools.lru_cache(maxsize=None)
def classes_for(disaggregated: bool) -> tuple[StateClass, ...]:
    """The classes a request can be in for a serving mode: reachable from an arrival state.

    A class's states are the reachable states of one signature; its representative is the
    dummy's own state when the class holds it, else the arrival state it holds, else its
    lowest state.
    """
    sig = _signatures()
    arrivals = [s for s in ARRIVAL_STATES if _allowed(s, disaggregated)]
    first = min(int(s) for s in arrivals)
    reach = [s for s in ALL_STATES if _allowed(s, disaggregated) and int(s) >= first]
    groups: dict[tuple[bool, ...], list[RequestState]] = {}
    for s in reach:
        groups.setdefault(sig[s], []).append(s)
    window = micro_batch_window(False)
    out = []
    for states in sorted(groups.values(), key=lambda g: int(g[0])):
        arr = [s for s in states if s in arrivals]
        rep = (GENERATION_DUMMY_STATE if GENERATION_DUMMY_STATE in states
               else arr[0] if arr else states[0])
        out.append(StateClass(index=len(out), states=tuple(states), representative=rep,
                              in_window=rep in window, arrival=bool(arr)))
    return tuple(out)


def arrival_state(cls: StateClass, disaggregated: bool) -> RequestState:
    """The state a request arriving in ``cls`` is written with."""
    arr = [s for s in ARRIVAL_STATES if _allowed(s, disaggregated) and s in cls.states]
    return arr[0] if arr else cls.representative


__all__ = ["ARRIVAL_STATES", "StateClass", "arrival_state", "classes_for"]
