"""What the explorer enumerates: a configuration space, a bound, and the KV-capacity outcomes.

A :class:`ConfigSpace` lists the values of each run-configuration dimension the pad code reads
(serving mode, ``pp_size``, the overlap loop, the model as upstream's gates see it,
``max_batch_size`` and the cap); every combination is explored by default. A :class:`Bound`
limits one exploration: ranks, requests a rank holds at once, iterations.

Example:
    >>> space = ConfigSpace(disaggregated=(True,), pp_sizes=(1,), overlap=(False,),
    ...                     models=("deepseek_v4",), max_batch_sizes=(1,))
    >>> [(c.model_arch, c.dkv_enabled) for c in space.configs(tp_size=2)]
    [('deepseek_v4', False), ('deepseek_v4', True)]
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Optional

from replay.catalogue import CATALOGUE
from replay.config import RunConfig
from replay.errors import ConfigError

#: A model outside every gate (upstream's gates name model types; this one is in none).
OUTSIDE_GATES_MODEL = "llama"


def gated_models() -> tuple[str, ...]:
    """Every model type a catalogue gate names (sorted), from the gates themselves."""
    names: set[str] = set()
    for policy in CATALOGUE.values():
        for gate in policy.gates().values():
            names |= set(gate.models or ()) | set(gate.models_with_overlap or ())
    return tuple(sorted(names))


@dataclasses.dataclass(frozen=True)
class KvOutcome:
    """One KV-capacity outcome of a rank's dummy allocation in one iteration.

    Fields:
        name: ``fits``, ``refused``, ...
        frame: the frame fields a trace writes for it (traces/FORMAT.md); empty when none.
        step: the ``replay.step.StepInputs`` fields it sets (absent: the field's default).
    """

    name: str
    frame: tuple[tuple[str, object], ...] = ()
    step: tuple[tuple[str, object], ...] = ()


#: The KV-capacity outcomes of a rank that wants a dummy (traces/FORMAT.md): it fits; the
#: precheck ``_has_adp_dummy_kv_capacity`` says it cannot fit; the precheck passes but
#: ``add_dummy_requests`` still refuses it.
KV_OUTCOMES: tuple[KvOutcome, ...] = (
    KvOutcome("fits"),
    KvOutcome("precheck fails", frame=(("kv_precheck_ok", False),),
              step=(("kv_precheck_ok", False),)),
    KvOutcome("refused after the precheck", frame=(("alloc_ok", False),),
              step=(("alloc_ok", False),)),
)


@dataclasses.dataclass(frozen=True)
class Bound:
    """How far one exploration goes.

    Fields:
        ranks: the largest attention-DP group tried (every size from ``min_ranks`` up, smallest
            first: a failure found with fewer ranks is the minimal one).
        requests: real requests a rank holds at once (at most the cap: the router never places a
            request on a rank at the cap).
        iterations: executor iterations per schedule.
        min_ranks: the smallest group tried.
    """

    ranks: int = 2
    requests: int = 2
    iterations: int = 3
    min_ranks: int = 1

    def __post_init__(self) -> None:
        for name in ("ranks", "requests", "iterations", "min_ranks"):
            if getattr(self, name) < 1:
                raise ConfigError(f"the bound's {name} must be at least 1, got {getattr(self, name)}")
        if self.min_ranks > self.ranks:
            raise ConfigError(f"min_ranks {self.min_ranks} exceeds ranks {self.ranks}")

    def describe(self) -> str:
        return (f"{self.ranks} ranks, {self.requests} requests per rank, "
                f"{self.iterations} iterations")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


#: The default bound (``forensics explore`` without ``--ranks/--requests/--iterations``).
DEFAULT_BOUND = Bound(ranks=2, requests=2, iterations=3)


@dataclasses.dataclass(frozen=True)
class ConfigSpace:
    """The run configurations to explore: every combination of the listed values.

    Fields:
        disaggregated: serving modes (True: a KV-cache transceiver).
        pp_sizes: pipeline stages.
        overlap: the overlap loop on/off.
        models: ``model_arch`` values (default: every gated model and one outside the gates).
        max_batch_sizes: per-rank scheduler limits.
        caps: ``max_num_active_requests`` values; None: ``pp_size * max_batch_size`` only.
        dkv: ``dkv_enabled`` values (both pads return at once in versions that know it).
    """

    disaggregated: tuple[bool, ...] = (True, False)
    pp_sizes: tuple[int, ...] = (1, 2)
    overlap: tuple[bool, ...] = (True, False)
    models: Optional[tuple[str, ...]] = None
    max_batch_sizes: tuple[int, ...] = (1, 2)
    caps: Optional[tuple[int, ...]] = None
    dkv: tuple[bool, ...] = (False, True)

    def model_values(self) -> tuple[str, ...]:
        return self.models if self.models is not None else gated_models() + (OUTSIDE_GATES_MODEL,)

    def configs(self, tp_size: int) -> list[RunConfig]:
        """Every configuration of the space for a group of ``tp_size`` ranks."""
        out = []
        for dis, pp, ov, model, mbs, dkv in itertools.product(
                self.disaggregated, self.pp_sizes, self.overlap, self.model_values(),
                self.max_batch_sizes, self.dkv):
            for cap in (self.caps or (None,)):
                out.append(RunConfig(tp_size=tp_size, pp_size=pp, max_batch_size=mbs,
                                     max_num_active_requests=cap, disaggregated=dis,
                                     overlap_scheduler=ov, model_arch=model, dkv_enabled=dkv))
        return out

    def size(self) -> int:
        return len(self.configs(1))

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["models"] = list(self.model_values())
        return d


__all__ = ["Bound", "ConfigSpace", "DEFAULT_BOUND", "KV_OUTCOMES", "KvOutcome",
           "OUTSIDE_GATES_MODEL", "gated_models"]
