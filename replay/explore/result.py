"""What an exploration found: witnesses per mechanism (or divergence), and the counts."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from replay.config import RunConfig
from replay.explore.mechanisms import KIND_NAMES, KIND_SLUGS, describe_kind
from replay.explore.space import Bound, ConfigSpace
from replay.step import REMOVAL_PATH_NAMES


@dataclasses.dataclass(frozen=True)
class Witness:
    """The minimal schedule showing one failure mechanism, or one divergence.

    Fields:
        kind: ``leak``, ``wasted capacity``, ``crash``, ``hang in a collective``, ...; or
            ``divergence``.
        cause: what the zero-batch rank held / the KV outcome (a failure); for a divergence
            ``field: A value vs B value`` on the first differing rank.
        description: one sentence.
        config: the run configuration of the schedule.
        ranks, iterations, requests: its size.
        records: the schedule as v2 trace records.
        configs: how many configurations of the space show it.
        confirmed: the engine's replay of ``records`` shows it too (None: not checked).
        slug: a file-name stem.
        against: the reference policy of a divergence (None: a failure).
    """

    kind: str
    cause: str
    description: str
    config: RunConfig
    ranks: int
    iterations: int
    requests: int
    records: tuple[dict, ...]
    configs: int = 1
    confirmed: Optional[bool] = None
    slug: str = ""
    against: Optional[str] = None

    @property
    def size(self) -> tuple[int, int, int]:
        return (self.ranks, self.iterations, self.requests)

    def config_text(self) -> str:
        c = self.config
        return (f"{'disaggregated' if c.disaggregated else 'aggregated'}, pp_size {c.pp_size}, "
                f"{'overlap' if c.overlap_scheduler else 'no overlap'}, model {c.model_arch}, "
                f"max_batch_size {c.max_batch_size}, cap {c.cap}"
                + (", dkv" if c.dkv_enabled else ""))

    def summary(self) -> str:
        return (f"{self.description} -- minimal witness: {plural(self.ranks, 'rank')}, "
                f"{plural(self.iterations, 'iteration')}, {plural(self.requests, 'request')} "
                f"({self.config_text()}; seen in {plural(self.configs, 'configuration')})")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "cause": self.cause, "description": self.description,
                "config": self.config.to_record(), "ranks": self.ranks,
                "iterations": self.iterations, "requests": self.requests,
                "configs": self.configs, "confirmed": self.confirmed, "slug": self.slug,
                "against": self.against,
                "records": list(self.records)}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def describe_key(key: tuple, label: str) -> tuple[str, str, str, str]:
    """``(kind, cause, description, slug)`` of a search key (failure or divergence)."""
    if key[0] == "diverge":
        _, _ref, field, a, b = key
        show = {"crash": lambda v: KIND_NAMES.get(v, "none"),
                "removed_path": lambda v: REMOVAL_PATH_NAMES[v] or "none"}.get(field, str)
        cause = f"{field}: {show(a)} vs {show(b)}"
        return ("divergence", cause, f"divergence on {cause}",
                f"diverge-{field}-{a}-{b}".replace("_", "-"))
    kind = key[0]
    slug = KIND_SLUGS[kind] + "-" + "".join(ch if ch.isalnum() else "-" for ch in label.lower())
    return KIND_NAMES[kind], label, describe_kind(kind, label), slug.strip("-")


@dataclasses.dataclass
class ExploreResult:
    """The outcome of one exploration.

    Fields:
        policy: the explored policy's name; against: the references' (differential mode),
            comma-separated.
        space, bound: what was explored.
        witnesses: one per mechanism (divergence), smallest first.
        schedules: transitions decided (each one iteration of one schedule prefix), over every
            distinct search the space needs (run now or shared with a policy explored before).
        rank_iterations: rank-iterations replayed by the searches run now (every policy of a
            differential run counted).
        states: distinct abstract states expanded.
        configs: configurations of the space; searches: searches run now (configurations a
            catalogue policy decides alike share one).
        seconds: wall time; interrupted: stopped early (Ctrl-C).
    """

    policy: str
    against: Optional[str]
    space: ConfigSpace
    bound: Bound
    witnesses: list[Witness] = dataclasses.field(default_factory=list)
    schedules: int = 0
    rank_iterations: int = 0
    states: int = 0
    configs: int = 0
    searches: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.witnesses)

    def rate(self) -> float:
        return self.rank_iterations / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> list[str]:
        what = (f"{self.policy} against {self.against}" if self.against else self.policy)
        head = (f"{what}: {self.schedules} schedules ({self.states} abstract states, "
                f"{self.configs} configurations, {self.searches} searches) up to "
                f"{self.bound.describe()} in {self.seconds:.1f} s")
        if self.interrupted:
            head += " (interrupted: what was found so far)"
        if not self.witnesses:
            noun = "divergence" if self.against else "counterexample"
            return [head, f"no {noun} in {self.schedules} schedules up to the bound"]
        lines = [head]
        for w in self.witnesses:
            mark = "" if w.confirmed is not False else " [the engine's replay does not confirm it]"
            vs = f"against {w.against}: " if w.against and "," in (self.against or "") else ""
            lines.append(f"  {vs}{w.summary()}{mark}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "against": self.against, "space": self.space.to_json(),
                "bound": self.bound.to_json(), "failed": self.failed,
                "schedules": self.schedules, "rank_iterations": self.rank_iterations,
                "states": self.states, "configs": self.configs, "searches": self.searches,
                "seconds": round(self.seconds, 3), "interrupted": self.interrupted,
                "witnesses": [w.to_json() for w in self.witnesses]}


__all__ = ["ExploreResult", "Witness", "describe_key", "plural"]
