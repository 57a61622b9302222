"""The stand-in executor's ``dist``: collectives computed over the replayed ranks.

Collectives (``dist.tp_allgather``, ``dist.tp_allreduce``: the non-overlap "forward intent" of
PR #16921) are computed over the replayed ranks: the engine runs every rank of an iteration in
lockstep (``replay.lockstep.run_fleet``, :class:`Exchange`). One frame alone (``pad_hook(view)``)
cannot see its peers: there ``tp_allgather`` returns the local value for every rank and
``tp_allreduce`` combines the local value with a peer holding generation work
(:data:`PEER_FORWARD_INTENT`) when ``expected > 0``, with nothing otherwise.
"""
from __future__ import annotations

import enum
import types
from typing import Any, Optional

from replay.config import RunConfig


class ADPForwardIntent(enum.IntEnum):
    """The all-reduced "forward intent" of the non-overlap newest path (MAX: context wins)."""

    NONE = 0
    GENERATION = 1
    CONTEXT = 2


#: What ``dist.tp_allreduce`` assumes the peers contribute (see module docstring).
PEER_FORWARD_INTENT = ADPForwardIntent.GENERATION


class ReduceOp(enum.Enum):
    """The reduction operators the pad code passes to ``dist.tp_allreduce``."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


def _reduce(values: list[Any], op: Any) -> Any:
    """All-reduce of ints (or equal-length lists of ints) by the op's name (SUM by default)."""
    name = str(getattr(op, "name", op) or "SUM").upper()
    fn = max if "MAX" in name else min if "MIN" in name else sum
    if values and isinstance(values[0], (list, tuple)):
        return [fn(int(v[i]) for v in values) for i in range(len(values[0]))]
    return fn(int(v) for v in values)


class Exchange:
    """The collectives of one iteration, computed over every replayed rank (lockstep).

    The ranks' pad methods run one after the other; a collective's result needs every rank's
    contribution. :func:`replay.lockstep.run_fleet` therefore runs the fleet in passes: pass
    ``p`` answers the first ``p`` collectives with the contributions the ranks made in earlier
    passes (every rank's k-th call, in call order, as upstream's ranks meet in the same
    collective) and gives a provisional local answer to later ones; it stops when a pass made no
    call beyond the answered ones. A rank that never reaches a collective the others enter (it
    raised first) contributes nothing to it (upstream would hang or abort there; the replay
    stops on the crash anyway).
    """

    def __init__(self, num_ranks: int, answers: list[list[Any]]):
        self.answers = answers
        self.calls: list[list[Any]] = [[] for _ in range(num_ranks)]

    def call(self, rank: int, kind: str, value: Any, op: Any = None) -> Any:
        k = len(self.calls[rank])
        self.calls[rank].append(value)
        if k < len(self.answers):
            contrib = [v for v in self.answers[k] if v is not None]
            return list(self.answers[k]) if kind == "allgather" else _reduce(contrib, op)
        return [value] * len(self.calls) if kind == "allgather" else value


class StandinDist:
    """``dist``: sizes and rank of this frame; collectives over the fleet (:class:`Exchange`)
    in a lockstep replay, else as described in the module docstring."""

    def __init__(self, config: RunConfig, rank: int, peers_busy: bool = True,
                 exchange: Optional[Exchange] = None):
        self.exchange = exchange
        self.peer_intent = PEER_FORWARD_INTENT if peers_busy else ADPForwardIntent.NONE
        self.tp_size = config.tp_size
        self.pp_size = config.pp_size
        self.rank = rank
        self.tp_rank = rank
        self.pp_rank = 0
        self.has_pp = config.pp_size > 1
        self.world_size = config.tp_size * config.pp_size
        self.mapping = types.SimpleNamespace(enable_attention_dp=config.enable_attention_dp,
                                             tp_size=config.tp_size, pp_size=config.pp_size)

    def tp_allgather(self, value: Any) -> list[Any]:
        if self.exchange is not None:
            return self.exchange.call(self.rank, "allgather", value)
        return [value] * self.tp_size

    def tp_allreduce(self, value: Any, op: Any = None) -> Any:
        if self.exchange is not None:
            return self.exchange.call(self.rank, "allreduce", value, op)
        return max(int(value), int(self.peer_intent))

    allgather = tp_allgather
    allreduce = tp_allreduce
