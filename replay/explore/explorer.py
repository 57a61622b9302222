"""``explore``: every schedule of a configuration space up to a bound, under one policy (or two).

For each configuration of the space and each rank count of the bound (smallest first), a
:class:`~replay.explore.search.Search` runs a BFS over abstract states; every mechanism found is
kept with its smallest witness over the whole space (fewest ranks, then iterations, then
requests; the first configuration in the space's order on a tie). Configurations a catalogue
policy cannot tell apart (same predicate, gates, cap, loop...) share one search. A witness is
turned into a v2 trace and replayed by the engine (``replay.explore.witness.confirm``).

Example:
    >>> from replay.explore import Bound, ConfigSpace, explore
    >>> space = ConfigSpace(disaggregated=(True,), pp_sizes=(1,), overlap=(False,),
    ...                     models=("llama",), max_batch_sizes=(1,))
    >>> res = explore("prefix-2026", space, Bound(ranks=2, requests=2, iterations=3))
    >>> [(w.kind, w.cause, w.size) for w in res.witnesses if w.kind == "crash"][-1]
    ('crash', 'GENERATION_TO_COMPLETE', (2, 3, 2))
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional, Sequence

from replay.config import RunConfig
from replay.explore.model import Reasons
from replay.explore.result import ExploreResult, Witness, describe_key
from replay.explore.search import Found, Search
from replay.explore.space import DEFAULT_BOUND, KV_OUTCOMES, Bound, ConfigSpace, KvOutcome
from replay.explore.witness import confirm, schedule_records
from replay.policy import Policy
from replay.resolve import resolve_policy

#: ``progress(configs done, configs in all, schedules so far)``.
Progress = Callable[[int, int, int], None]


def behaviour_key(policy: Policy, config: RunConfig) -> tuple:
    """What a catalogue policy's decisions depend on under ``config`` (configurations with one
    key are explored once). A hooked policy (real code) reads the configuration itself: every
    configuration is its own key."""
    if policy.pad_hook is not None:
        return (policy.name, config)
    return (policy.predicate(config), policy.uses_forward_intent(config),
            policy.alloc_failure_for(config), policy.rolls_back(config), policy.postpads(config),
            policy.prechecks(config), policy.pads_run(config), policy.gated(config),
            policy.cap, policy.entry_check, policy.dummy_role, config.cap, config.max_batch_size,
            config.disaggregated, config.overlap_scheduler, config.encoder_decoder,
            config.enable_attention_dp, config.expected_multiplier)


def explore(policy: str | Policy, space: ConfigSpace = ConfigSpace(), bound: Bound = DEFAULT_BOUND,
            *, against: str | Policy | Sequence[str | Policy] | None = None,
            kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES,
            progress: Optional[Progress] = None, canonical: bool = True, memo: bool = True,
            check: bool = True) -> ExploreResult:
    """Explore every schedule of ``space`` up to ``bound`` under ``policy``.

    Args:
        policy: a catalogue name, ``trtllm:PATH[@REV]``, ``py:...`` or a Policy.
        space, bound: what to enumerate.
        against: differential mode: the reference policy (or several, compared in one search);
            the result's witnesses are then the first divergences (per reference, field and
            values), not failures.
        kv_outcomes: the KV outcomes to enumerate per rank and iteration.
        progress: called after each configuration.
        canonical, memo: the symmetry and visited-state reductions (for checks).
        check: replay each witness's trace with the engine (``Witness.confirmed``).

    Returns:
        :class:`~replay.explore.result.ExploreResult`; Ctrl-C stops the search and returns what
        was found so far (``interrupted``).
    """
    pol = resolve_policy(policy)
    if against is None:
        refs: list[Policy] = []
    elif isinstance(against, (str, Policy)):
        refs = [resolve_policy(against)]
    else:
        refs = [resolve_policy(a) for a in against]
    policies = (pol, *refs)
    result = ExploreResult(policy=pol.name, against=", ".join(r.name for r in refs) or None,
                           space=space, bound=bound)
    reasons = Reasons()
    best: dict[tuple, tuple[Found, Search]] = {}
    counts: dict[tuple, int] = {}
    shared: dict[tuple, dict[tuple, Found]] = {}
    configs = space.configs(tp_size=1)
    result.configs = len(configs)
    start = time.perf_counter()
    try:
        for n, config in enumerate(configs):
            key = tuple(behaviour_key(p, config) for p in policies)
            found = shared.get(key)
            if found is None:
                search = Search(policies, config, bound.requests, kv_outcomes, reasons,
                                canonical=canonical, memo=memo)
                found = shared[key] = {}
                result.searches += 1
                try:
                    for ranks in range(bound.min_ranks, bound.ranks + 1):
                        search.run(ranks, bound.iterations, found)
                finally:  # an interrupted search still counts what it found
                    result.schedules += search.stats.transitions
                    result.rank_iterations += search.stats.rank_iterations
                    result.states += search.stats.states
                    for k, f in found.items():
                        if k not in best or f.size < best[k][0].size:
                            best[k] = (f, search)
            for k in found:
                counts[k] = counts.get(k, 0) + 1
            if progress is not None:
                progress(n + 1, len(configs), result.schedules)
    except KeyboardInterrupt:
        result.interrupted = True
    result.seconds = time.perf_counter() - start
    build = pol.name
    for k, (f, search) in sorted(best.items(), key=lambda kv: (kv[1][0].size, str(kv[0]))):
        if refs and k[0] != "diverge":
            continue  # differential mode reports divergences only
        label = reasons.labels[k[1]] if k[0] != "diverge" else ""
        kind, cause, description, slug = describe_key(k, label)
        ref_name = refs[k[1] - 1].name if k[0] == "diverge" else None
        if ref_name is not None and len(refs) > 1:
            slug = f"{ref_name}--{slug}"
        records = schedule_records(search, f, build)
        confirmed = None
        if check and not refs:
            confirmed = confirm(records, pol, k[0])
        result.witnesses.append(Witness(
            kind=kind, cause=cause, description=description,
            config=dataclasses.replace(search.config, tp_size=f.ranks), ranks=f.ranks,
            iterations=f.iterations, requests=f.requests, records=tuple(records),
            configs=counts.get(k, 1), confirmed=confirmed, slug=slug, against=ref_name))
    return result


__all__ = ["Progress", "behaviour_key", "explore"]
