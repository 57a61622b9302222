"""``identify --explore``: which catalogue entry decides as a build's real code on every schedule.

One differential exploration (``explore(spec, against=every entry)``) decides the real code once
per schedule and every entry beside it; an entry drops out of a path at its first divergence
(the search keeps, per state, the set of entries still agreeing). The entries with no divergence
anywhere up to the bound are named; for the others the smallest divergence is the evidence.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from replay.catalogue import policy_names
from replay.explore.explorer import Progress, explore
from replay.explore.result import ExploreResult, Witness, plural
from replay.explore.space import DEFAULT_BOUND, Bound, ConfigSpace


@dataclasses.dataclass(frozen=True)
class ExploredIdentification:
    """Which entries agree with a build on every schedule up to the bound.

    Fields:
        spec: the build explored.
        agreeing: the entries with no divergence (oldest first).
        first_divergence: per other entry, its smallest divergence.
        result: the exploration itself (counts, bound).
    """

    spec: str
    agreeing: tuple[str, ...]
    first_divergence: dict[str, Witness]
    result: ExploreResult

    @property
    def ok(self) -> bool:
        return bool(self.agreeing)

    def summary(self) -> list[str]:
        r = self.result
        head = (f"{self.spec}: {r.schedules} schedules up to {r.bound.describe()} over "
                f"{r.configs} configurations ({r.seconds:.1f} s)")
        if self.agreeing:
            lines = [head, "agrees on every schedule with: " + ", ".join(self.agreeing)]
        else:
            lines = [head, "no catalogue entry agrees on every schedule"]
        for name, w in self.first_divergence.items():
            lines.append(f"  {name}: first divergence {w.cause} -- {plural(w.ranks, 'rank')}, "
                         f"{plural(w.iterations, 'iteration')}, {plural(w.requests, 'request')} "
                         f"({w.config_text()})")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "ok": self.ok, "agreeing": list(self.agreeing),
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
    res = explore(spec, space, bound, against=names, progress=progress, check=False)
    first: dict[str, Witness] = {}
    for w in res.witnesses:  # smallest first
        if w.against is not None and w.against not in first:
            first[w.against] = w
    agreeing = tuple(n for n in names if n not in first)
    ordered = {n: first[n] for n in names if n in first}
    return ExploredIdentification(spec=res.policy, agreeing=agreeing, first_divergence=ordered,
                                  result=res)


__all__ = ["ExploredIdentification", "identify_by_exploration"]
