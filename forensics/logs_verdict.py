"""What a post-mortem without request-state traces concludes about a logged crash.

:func:`judge_logs_only` matches the crash signature only against the catalogue versions possible
under the run facts the logs show (:mod:`forensics.run_facts`), looks for the NVBug 6438685
pattern in the iteration lines (:func:`chain_in_logs`: a fleet-wide skip with the crashing rank
busy, then the crash) and names, per serving path still possible, the builds that close the leak.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from forensics.logs_only import LogsOnlyFindings, ranks_text
from forensics.open_paths import clean_builds, path_label
from forensics.run_facts import RunFacts
from forensics.signature_policies import policies_for


@dataclasses.dataclass(frozen=True)
class ChainInLogs:
    """The NVBug 6438685 pattern as the iteration lines show it: a fleet-wide skip with the
    crashing rank busy (padded or working) and another rank at batch 0, then the crash.

    Fields:
        skip_iter: the last such skip before the crash.
        zero_ranks: ranks at batch 0 in it.
        crash_rank, crash_iter: the logged crash.
        forwarded: the crashing rank forwarded a dummy right after ``skip_iter`` (V5 tokens),
            None when the lines do not log dummy tokens.
    """

    skip_iter: int
    zero_ranks: tuple[int, ...]
    crash_rank: int
    crash_iter: int
    forwarded: Optional[bool]

    def text(self) -> str:
        fw = {True: f"; rank {self.crash_rank} forwarded a dummy right after it (V5 tokens)",
              False: f"; rank {self.crash_rank} forwarded no dummy right after it (V5 tokens)",
              None: ""}[self.forwarded]
        gap = self.crash_iter - self.skip_iter
        return (f"fleet-wide skip at iteration {self.skip_iter} (rank"
                f"{'s' if len(self.zero_ranks) > 1 else ''} {ranks_text(self.zero_ranks)} at batch 0 "
                f"while rank {self.crash_rank} was busy){fw}, then the crash on rank "
                f"{self.crash_rank} {gap} iteration{'s' if gap != 1 else ''} later")


def chain_in_logs(lo: LogsOnlyFindings, crash_rank: Optional[int],
                  crash_iter: Optional[int]) -> Optional[ChainInLogs]:
    """The skip before the crash that could have left a dummy on the crashing rank, or None."""
    if crash_rank is None or crash_iter is None:
        return None
    before = [s for s in lo.fleet_skips if s.iter < crash_iter and crash_rank in s.busy_ranks]
    if not before:
        return None
    s = before[-1]
    fw = None
    if lo.dummy_tokens_logged:
        fw = (s.iter + 1, crash_rank) in set(lo.dummy_forwarded_in_skips)
    return ChainInLogs(skip_iter=s.iter, zero_ranks=s.zero_ranks, crash_rank=crash_rank,
                       crash_iter=crash_iter, forwarded=fw)


@dataclasses.dataclass(frozen=True)
class LogsOnlyVerdict:
    """What a post-mortem without traces concludes about a logged crash.

    Fields:
        facts: the run's configuration and era as the logs show them.
        policies: catalogue versions that produce the signature on a configuration and in an
            era the facts allow.
        reason: why those (per version, the paths).
        chain: the NVBug 6438685 pattern in the iteration lines, or None.
        survivors: per path still possible (``"disaggregated, pp_size 1"``), the catalogue
            builds that close the leak there.
        explained: the logs alone explain the crash (pattern seen, a version produces it).
    """

    facts: RunFacts
    policies: tuple[str, ...]
    reason: str
    chain: Optional[ChainInLogs]
    survivors: tuple[tuple[str, tuple[str, ...]], ...]
    explained: bool

    def survivors_text(self) -> str:
        parts = []
        for label, names in self.survivors:
            parts.append(f"on {label}: " + (", ".join(names) if names else
                                            "no catalogue build (tolerant-17278 and later only warn)"))
        return "; ".join(parts)

    def unknown(self) -> list[str]:
        return [f.name for f in self.facts.facts if f.value is None
                and f.name in ("serving mode", "pp_size", "overlap")]

    def to_json(self) -> dict:
        return {"facts": self.facts.to_json(), "policies": list(self.policies),
                "reason": self.reason,
                "chain": None if self.chain is None else {**dataclasses.asdict(self.chain),
                                                          "text": self.chain.text()},
                "survivors": [{"path": p, "builds": list(b)} for p, b in self.survivors],
                "explained": self.explained}


def judge_logs_only(sig, lo: LogsOnlyFindings, facts: RunFacts, policies) -> LogsOnlyVerdict:
    """Match a logged crash signature only against versions possible under ``facts``, look for
    the NVBug chain in the iteration lines, and name the builds that survive on each path."""
    configs = facts.configs(lo.fleet_size)
    allowed = [p for p in policies if facts.era_allows(p)]
    where: dict[str, list[str]] = {}
    alloc = lo.alloc_failures > 0
    for cfg in configs:
        got, _ = policies_for(sig.kind, allowed, cfg, alloc_failures=alloc)
        for n in got:
            where.setdefault(n, []).append(path_label(cfg))
    order = [p.name for p in policies]
    names = sorted(where, key=order.index)
    every = len(configs)
    reason = "; ".join(f"{n} on {'every path left open' if len(where[n]) == every and every > 1 else ' or '.join(where[n])}"
                       for n in names) or "no catalogue version produces it under what the logs show"
    dropped = [p.name for p in policies if p not in allowed]
    if dropped:
        reason += (f" (left out by the line format {', '.join(facts.line_formats)}: "
                   f"{', '.join(dropped)})")
    chain = chain_in_logs(lo, sig.rank, sig.iter) if sig.kind.name == "ENTRY_ASSERT" else None
    survivors = []
    seen = set()
    for cfg in configs:
        label = path_label(cfg)
        if label in seen:
            continue
        seen.add(label)
        # What to move to is any version, not only those of the crashed build's era.
        survivors.append((label, tuple(a.policy + (f" ({a.condition})" if a.condition else "")
                                       for a in clean_builds(policies, cfg))))
    return LogsOnlyVerdict(facts=facts, policies=tuple(names), reason=reason, chain=chain,
                           survivors=tuple(survivors),
                           explained=bool(chain is not None and names))




__all__ = ["ChainInLogs", "LogsOnlyVerdict", "chain_in_logs", "judge_logs_only"]
