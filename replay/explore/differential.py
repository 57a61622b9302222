"""``identify --explore``: which catalogue entry decides as a build's real code on every schedule.

One differential exploration (``explore(spec, against=every entry)``) decides the real code once
per schedule and every entry beside it; an entry drops out of a path at its first divergence
(the search keeps, per state, the set of entries still agreeing) and out of the search once it
has one (``first_only``: the search is smallest first, so that divergence is its minimal
witness; nothing found later could be smaller). The entries with no divergence anywhere up to
the bound agree; one of them is named (the build's own era first, as ``identify`` does), and
those deciding as it in every configuration (the same step: no bound separates them) are said
to be alike. For the others the smallest divergence is the evidence.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from replay.catalogue import get_policy, policy_names
from replay.explore.explorer import Progress, explore
from replay.explore.result import ExploreResult, Witness, plural
from replay.explore.space import DEFAULT_BOUND, Bound, ConfigSpace
from replay.resolve import resolve_policy
from replay.step import decision_key
from replay.trtllm_source import era_of


@dataclasses.dataclass(frozen=True)
class ExploredIdentification:
    """Which entries agree with a build on every schedule up to the bound.

    Fields:
        spec: the build explored.
        agreeing: the entries with no divergence (oldest first).
        first_divergence: per other entry, its smallest divergence.
        result: the exploration itself (counts, bound).
        named: the agreeing entry named (:func:`name_entry`), or None.
        alike: the other agreeing entries whose step is the named one's in every configuration
            of the space (no schedule of any bound separates them from it).
    """

    spec: str
    agreeing: tuple[str, ...]
    first_divergence: dict[str, Witness]
    result: ExploreResult
    named: Optional[str] = None
    alike: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.agreeing)

    def summary(self) -> list[str]:
        r = self.result
        head = (f"{self.spec}: {r.schedules} schedules up to {r.bound.describe()} over "
                f"{r.configs} configurations ({r.seconds:.1f} s)")
        if self.agreeing:
            lines = [head, "agrees on every schedule with: " + ", ".join(self.agreeing),
                     f"named: {self.named}"]
            if self.alike:
                lines.append(f"  {', '.join(self.alike)}: the same step as {self.named} in every "
                             "configuration (no schedule of any bound tells them apart)")
        else:
            lines = [head, "no catalogue entry agrees on every schedule"]
        for name, w in self.first_divergence.items():
            lines.append(f"  {name}: first divergence {w.cause} -- {plural(w.ranks, 'rank')}, "
                         f"{plural(w.iterations, 'iteration')}, {plural(w.requests, 'request')} "
                         f"({w.config_text()})")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "ok": self.ok, "agreeing": list(self.agreeing),
                "named": self.named, "alike": list(self.alike),
                "first_divergence": {k: w.to_json() for k, w in self.first_divergence.items()},
                "schedules": self.result.schedules, "bound": self.result.bound.to_json(),
                "space": self.result.space.to_json(), "seconds": round(self.result.seconds, 3),
                "interrupted": self.result.interrupted}


def identify_by_exploration(spec: str, space: ConfigSpace = ConfigSpace(),
                            bound: Bound = DEFAULT_BOUND, *,
                            entries: Optional[Sequence[str]] = None,
                            progress: Optional[Progress] = None) -> ExploredIdentification:
    """Explore ``spec`` against every catalogue entry (or ``entries``) at once.

    Args:
        spec: ``trtllm:PATH[@REV]`` (or any policy spec).
        space, bound: what to enumerate.
        entries: the entries to compare (default: the whole catalogue).
    """
    names = list(entries) if entries else policy_names()
    res = explore(spec, space, bound, against=names, progress=progress, check=False,
                  first_only=True)
    first: dict[str, Witness] = {}
    for w in res.witnesses:  # smallest first
        if w.against is not None and w.against not in first:
            first[w.against] = w
    agreeing = tuple(n for n in names if n not in first)
    ordered = {n: first[n] for n in names if n in first}
    named = name_entry(agreeing, era_of(resolve_policy(spec)))
    configs = space.configs(tp_size=1)
    alike = tuple(n for n in agreeing if n != named and all(
        decision_key(get_policy(n), c) == decision_key(get_policy(named), c) for c in configs))
    return ExploredIdentification(spec=res.policy, agreeing=agreeing, first_divergence=ordered,
                                  result=res, named=named, alike=alike)


def name_entry(agreeing: Sequence[str], loop: Optional[str]) -> Optional[str]:
    """The entry to name among those that agree, as ``identify`` picks among its matches: the
    build's own era (``loop``, the entry its loop comes from), then a merged entry over a
    proposal, then the newer one."""
    if not agreeing:
        return None
    order = policy_names()
    return max(agreeing, key=lambda n: (n == loop, get_policy(n).merged, order.index(n)))


__all__ = ["ExploredIdentification", "identify_by_exploration", "name_entry"]
