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


def state_index(values: np.ndarray) -> np.ndarray:
    """Map an array of state ints to histogram column indices (vectorised; -1 for unknown)."""
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


def micro_batch_window(encoder_decoder: bool = False) -> Window:
    """The micro-batch scheduler's window for a model kind."""
    return ENCODER_DECODER_WINDOW if encoder_decoder else MICRO_BATCH_WINDOW


def states_mask(states) -> np.ndarray:
    """Boolean mask over histogram columns selecting the given states."""
    wanted = {int(s) for s in states}
    return np.array([int(s) in wanted for s in ALL_STATES], dtype=bool)
