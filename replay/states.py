"""Request states of TensorRT-LLM's ``LlmRequestState`` and the scheduler windows (domain doc §2-3).

Values are the C++ enum's ints as Python reads them through ``request.state_value``. Enum order is
chronological, which is why the windows below are half-open integer ranges.
"""
from __future__ import annotations

import enum

import numpy as np


class RequestState(enum.IntEnum):
    """``LlmRequestState`` with its int values (2025-2026 builds)."""

    DISAGG_TRANS_ERROR = -1
    UNKNOWN = 0
    ENCODER_INIT = 1
    # Gen-first mode on the context server (added 2026; value from secondary sources).
    DISAGG_CONTEXT_WAIT_SCHEDULER = 7
    DISAGG_GENERATION_INIT = 8
    DISAGG_GENERATION_TRANS_IN_PROGRESS = 9
    CONTEXT_INIT = 10
    DISAGG_CONTEXT_INIT_AND_TRANS = 11
    DISAGG_GENERATION_TRANS_COMPLETE = 12
    GENERATION_IN_PROGRESS = 13
    GENERATION_TO_COMPLETE = 14
    GENERATION_COMPLETE = 20
    DISAGG_CONTEXT_TRANS_IN_PROGRESS = 21
    DISAGG_CONTEXT_COMPLETE = 22
    DISAGG_GENERATION_WAIT_TOKENS = 23


#: Every known state, in a fixed order used as the column order of state histograms.
ALL_STATES: tuple[RequestState, ...] = tuple(sorted(RequestState, key=int))
#: Column index of each state value in a histogram (see :func:`state_index`).
STATE_INDEX: dict[int, int] = {int(s): i for i, s in enumerate(ALL_STATES)}
NUM_STATES = len(ALL_STATES)

#: State a generation pad dummy is assumed to hold (domain doc §7: inside the window).
GENERATION_DUMMY_STATE = RequestState.GENERATION_IN_PROGRESS
#: State a context pad dummy is assumed to hold.
CONTEXT_DUMMY_STATE = RequestState.CONTEXT_INIT
#: ``ATTENTION_DP_DUMMY_REQUEST_ID`` (value inferred, domain doc §7).
DUMMY_REQUEST_ID = 0


class UnknownStateError(ValueError):
    """A state name or value that ``LlmRequestState`` does not have."""


#: Numbering of the int values of 2025-2026 builds (the values above; ``CONTEXT_INIT`` = 10).
CURRENT_NUMBERING = "context-init-10"
#: An older ``llmRequest.h`` numbering (``CONTEXT_INIT`` = 2, ``DISAGG_GENERATION_INIT`` = 7,
#: ``DISAGG_GENERATION_TRANS_IN_PROGRESS`` = 10): read with today's table its ints decode
#: silently wrong (domain doc §10).
LEGACY_NUMBERING = "context-init-2"
#: Known numberings: name -> {state name: int value}.
NUMBERINGS: dict[str, dict[str, int]] = {
    CURRENT_NUMBERING: {s.name: int(s) for s in RequestState},
    LEGACY_NUMBERING: {
        "UNKNOWN": 0, "ENCODER_INIT": 1, "CONTEXT_INIT": 2, "DISAGG_GENERATION_TRANS_COMPLETE": 3,
        "GENERATION_IN_PROGRESS": 4, "GENERATION_TO_COMPLETE": 5, "GENERATION_COMPLETE": 6,
        "DISAGG_GENERATION_INIT": 7, "DISAGG_CONTEXT_TRANS_IN_PROGRESS": 8,
        "DISAGG_CONTEXT_COMPLETE": 9, "DISAGG_GENERATION_TRANS_IN_PROGRESS": 10,
        "DISAGG_CONTEXT_INIT_AND_TRANS": 11,
    },
}


def numbering_decoder(spec: object) -> dict[int, int]:
    """``{declared int: today's int}`` for a numbering given by name (:data:`NUMBERINGS`) or as
    an object ``{state name: int}`` (what the recorder reads from the live enum).

    Raises:
        UnknownStateError: an unknown numbering name, a state name this tool does not know, a
            non-int value, or two names with one value.
    """
    if isinstance(spec, str):
        if spec not in NUMBERINGS:
            raise UnknownStateError(f"unknown state_numbering {spec!r} (known: "
                                    + ", ".join(NUMBERINGS) + ", or an object {NAME: int})")
        table = NUMBERINGS[spec]
    elif isinstance(spec, dict) and spec:
        table = spec
    else:
        raise UnknownStateError(f"state_numbering must be a numbering name or an object "
                                f"{{NAME: int}}, got {spec!r}")
    out: dict[int, int] = {}
    for name, value in table.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise UnknownStateError(f"state_numbering: {name} must map to an int, got {value!r}")
        try:
            state = RequestState[str(name).rsplit(".", 1)[-1].upper()]
        except KeyError:
            raise UnknownStateError(f"state_numbering: unknown state name {name!r}") from None
        if value in out and out[value] != int(state):
            raise UnknownStateError(f"state_numbering: value {value} is given to two states")
        out[value] = int(state)
    return out


def parse_state(value: object) -> RequestState:
    """Accept a state as its name (any case, optional ``LlmRequestState.`` prefix) or its int."""
    if isinstance(value, bool):
        raise UnknownStateError(f"unknown request state {value!r}")
    if isinstance(value, (int, np.integer)):
        try:
            return RequestState(int(value))
        except ValueError:
            raise UnknownStateError(f"unknown request state value {int(value)}") from None
    if isinstance(value, str):
        name = value.strip()
        if "." in name:
            name = name.rsplit(".", 1)[1]
        try:
            return RequestState[name.upper()]
        except KeyError:
            if name.lstrip("-").isdigit():
                return parse_state(int(name))
            raise UnknownStateError(f"unknown request state {value!r}") from None
    raise UnknownStateError(f"unknown request state {value!r}")


def _index_by_int16() -> np.ndarray:
    """:func:`state_index` of every int16 value, indexed by the value's bits as uint16."""
    out = np.full(1 << 16, -1, np.int16)
    for v, i in STATE_INDEX.items():
        out[np.array(v, np.int16).view(np.uint16)] = i
    return out


#: ``state_index`` of int16 codes (how the replay holds them) is one lookup in this table.
_INDEX_BY_INT16 = _index_by_int16()


def state_index(values: np.ndarray) -> np.ndarray:
    """Map an array of state ints to histogram column indices (vectorised; -1 for unknown)."""
    if isinstance(values, np.ndarray) and values.dtype == np.int16:
        return _INDEX_BY_INT16[values.view(np.uint16)]
    lut = np.full(32, -1, dtype=np.int16)
    for v, i in STATE_INDEX.items():
        lut[v + 1] = i  # shift by one so DISAGG_TRANS_ERROR (-1) lands at 0
    v = np.asarray(values, dtype=np.int64) + 1
    out = np.full(v.shape, -1, dtype=np.int16)
    ok = (v >= 0) & (v < lut.size)
    out[ok] = lut[v[ok]]
    return out


class Window:
    """A half-open ``[start, end)`` range of state values, as the C++ schedulers test them."""

    def __init__(self, start: RequestState, end: RequestState):
        self.start = RequestState(start)
        self.end = RequestState(end)

    def __contains__(self, state: object) -> bool:
        return int(self.start) <= int(state) < int(self.end)  # type: ignore[arg-type]

    def mask(self) -> np.ndarray:
        """Boolean mask over histogram columns (``ALL_STATES`` order)."""
        return np.array([s in self for s in ALL_STATES], dtype=bool)

    def __repr__(self) -> str:
        return f"[{self.start.name}, {self.end.name})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and (self.start, self.end) == (other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))


#: Micro-batch scheduler window: {10, 11, 12, 13}.
MICRO_BATCH_WINDOW = Window(RequestState.CONTEXT_INIT, RequestState.GENERATION_TO_COMPLETE)
#: Encoder-decoder models start the micro-batch window at ENCODER_INIT.
ENCODER_DECODER_WINDOW = Window(RequestState.ENCODER_INIT, RequestState.GENERATION_TO_COMPLETE)
#: Capacity scheduler window (before PR #18457 narrowed one path).
CAPACITY_WINDOW = Window(RequestState.CONTEXT_INIT, RequestState.GENERATION_COMPLETE)
#: States ``scheduler.is_request_in_schedulable_state`` refuses outright (PR #16921).
NOT_SCHEDULABLE_STATES = frozenset({
    RequestState.DISAGG_CONTEXT_WAIT_SCHEDULER,
    RequestState.DISAGG_GENERATION_INIT,
    RequestState.DISAGG_GENERATION_TRANS_IN_PROGRESS,
})


#: First-seen states read as a context-only request (a context server's arrivals): traces carry no
#: request type, so ``_update_adp_dummy_role``'s input is inferred from them (domain doc §10).
CONTEXT_ONLY_STATES = frozenset({
    RequestState.DISAGG_CONTEXT_WAIT_SCHEDULER, RequestState.CONTEXT_INIT,
    RequestState.DISAGG_CONTEXT_INIT_AND_TRANS, RequestState.DISAGG_CONTEXT_TRANS_IN_PROGRESS,
    RequestState.DISAGG_CONTEXT_COMPLETE,
})
#: First-seen states read as a generation-only request (a generation server's arrivals).
GENERATION_ONLY_STATES = frozenset({
    RequestState.DISAGG_GENERATION_INIT, RequestState.DISAGG_GENERATION_TRANS_IN_PROGRESS,
    RequestState.DISAGG_GENERATION_TRANS_COMPLETE, RequestState.DISAGG_GENERATION_WAIT_TOKENS,
})
#: States the forward intent calls context work (PR #16921).
CONTEXT_INTENT_STATES = frozenset({RequestState.CONTEXT_INIT, RequestState.ENCODER_INIT})


def micro_batch_window(encoder_decoder: bool = False) -> Window:
    """The micro-batch scheduler's window for a model kind."""
    return ENCODER_DECODER_WINDOW if encoder_decoder else MICRO_BATCH_WINDOW


def states_mask(states) -> np.ndarray:
    """Boolean mask over histogram columns selecting the given states."""
    wanted = {int(s) for s in states}
    return np.array([int(s) in wanted for s in ALL_STATES], dtype=bool)
