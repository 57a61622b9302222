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

import concurrent.futures
import dataclasses
import multiprocessing
import os
import time
from typing import Callable, Optional, Sequence

from replay.config import RunConfig
from replay.explore.decisions import HookMemo
from replay.explore.mechanisms import KIND_OF
from replay.explore.model import Reasons
from replay.explore.result import ExploreResult, Witness, describe_key
from replay.explore.search import Search
from replay.explore.space import (
    DEFAULT_BOUND,
    KV_OUTCOMES,
    Bound,
    ConfigSpace,
    KvOutcome,
)
from replay.explore.witness import confirm, run_record, schedule_records
from replay.policy import Policy
from replay.resolve import resolve_policy
from replay.step import decision_key

#: ``progress(configs done, configs in all, schedules so far)``.
Progress = Callable[[int, int, int], None]


def behaviour_key(policy: Policy, config: RunConfig) -> tuple:
    """What a policy's decisions depend on under ``config`` (configurations with one key are
    explored once): a catalogue policy's step and loop; a hooked policy (real code) adds what
    its code can tell of the configuration (``Policy.config_seen``: for a ``trtllm:`` build the
    stand-in's sizes and the flags the code names, so a build that reads no model gate decides
    every model alike)."""
    loop = (decision_key(policy, config), config.cap, config.max_batch_size,
            config.disaggregated, config.overlap_scheduler, config.encoder_decoder,
            config.enable_attention_dp, config.expected_multiplier)
    if policy.pad_hook is not None:
        return (policy.name, policy.config_seen(config)) + loop
    return loop


def hook_group(policies: Sequence[Policy], config: RunConfig) -> Optional[tuple]:
    """Searches with one value here ask their hooks the same questions and get the same answers
    (what each hook can tell of the configuration): they run in one process and share the hook
    outcomes (``replay.explore.decisions.HookMemo``). None without a hook."""
    if all(p.pad_hook is None for p in policies):
        return None
    return tuple((p.name, p.config_seen(config)) if p.pad_hook is not None else None
                 for p in policies)


@dataclasses.dataclass(frozen=True)
class SearchJob:
    """One search: a configuration under the explored policy (and references), all rank counts.

    Fields:
        policies: the policies (``Policy`` objects, or specs a worker resolves again: a hooked
            policy's code cannot be pickled).
        config, bound, kv_outcomes, canonical, memo, first_only: as in :func:`explore`.
        build: the ``build`` label of the witness traces.
    """

    policies: tuple
    config: RunConfig
    bound: Bound
    kv_outcomes: tuple[KvOutcome, ...]
    canonical: bool
    memo: bool
    build: str
    first_only: bool = False


@dataclasses.dataclass
class SearchOutcome:
    """What one search found: ``{key: (Found, records)}`` with reason ids replaced by their
    labels (``(kind, label)``; a divergence key as the search wrote it), and its counts."""

    found: dict
    transitions: int = 0
    rank_iterations: int = 0
    states: int = 0
    interrupted: bool = False


def run_job(job: SearchJob, policies: Optional[tuple[Policy, ...]] = None,
            hooks: Optional[HookMemo] = None) -> SearchOutcome:
    """Run one search (in this process or a worker) and build its witnesses' traces
    (``policies``: the job's, already resolved; ``hooks``: hook outcomes shared with other
    searches of its :func:`hook_group`)."""
    if policies is None:
        policies = tuple(resolve_policy(p) for p in job.policies)
    search = Search(policies, job.config, job.bound.requests, job.kv_outcomes, Reasons(),
                    canonical=job.canonical, memo=job.memo, first_only=job.first_only,
                    hooks=hooks)
    found: dict = {}
    out = SearchOutcome(found={})
    try:
        for ranks in range(job.bound.min_ranks, job.bound.ranks + 1):
            search.run(ranks, job.bound.iterations, found)
    except KeyboardInterrupt:
        out.interrupted = True
    out.transitions = search.stats.transitions
    out.rank_iterations = search.stats.rank_iterations
    out.states = search.stats.states
    for k, f in found.items():
        key = k if k[0] == "diverge" else (k[0], search.reasons.labels[k[1]])
        out.found[key] = (f, schedule_records(search, f, job.build))
    return out


def run_bundle(jobs: list[SearchJob]) -> list[SearchOutcome]:
    """Run searches of one :func:`hook_group` in turn, their policies resolved once and their
    hook outcomes shared; stops after an interrupted one."""
    policies = tuple(resolve_policy(p) for p in jobs[0].policies)
    hooks = HookMemo()
    out = []
    for job in jobs:
        out.append(run_job(job, policies, hooks))
        if out[-1].interrupted:
            break
    return out


def _portable(policy: Policy, spec) -> object:
    """What a worker can rebuild the policy from: its spec for a hooked policy."""
    if policy.pad_hook is None:
        return policy
    return spec if isinstance(spec, str) else None


def default_workers() -> int:
    """Worker processes for the searches: the usable cores (searches are independent)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def explore(policy: str | Policy, space: ConfigSpace = ConfigSpace(), bound: Bound = DEFAULT_BOUND,
            *, against: str | Policy | Sequence[str | Policy] | None = None,
            kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES,
            progress: Optional[Progress] = None, canonical: bool = True, memo: bool = True,
            check: bool = True, workers: Optional[int] = None,
            cache: Optional[dict] = None, first_only: bool = False) -> ExploreResult:
    """Explore every schedule of ``space`` up to ``bound`` under ``policy``.

    Args:
        policy: a catalogue name, ``trtllm:PATH[@REV]``, ``py:...`` or a Policy.
        space, bound: what to enumerate.
        against: differential mode: the reference policy (or several, compared in one search);
            the result's witnesses are then the first divergences (per reference, field and
            values), not failures.
        kv_outcomes: the KV outcomes to enumerate per rank and iteration.
        progress: called after each search.
        canonical, memo: the symmetry and visited-state reductions (for checks).
        check: replay each witness's trace with the engine (``Witness.confirmed``).
        workers: processes running searches (default: the usable cores; 1: in this process).
        cache: searches already run, by behaviour key (several policies explored in a row
            share the configurations they decide alike).
        first_only: differential mode: per reference and configuration, only its first
            divergences (``identify --explore``: a reference is no longer decided once it
            diverged; ``configs`` then counts the configurations where a divergence is first).

    Returns:
        :class:`~replay.explore.result.ExploreResult`; Ctrl-C stops the search and returns what
        was found so far (``interrupted``).
    """
    pol = resolve_policy(policy)
    if against is None:
        ref_specs: list = []
    elif isinstance(against, (str, Policy)):
        ref_specs = [against]
    else:
        ref_specs = list(against)
    refs = [resolve_policy(a) for a in ref_specs]
    policies = (pol, *refs)
    result = ExploreResult(policy=pol.name, against=", ".join(r.name for r in refs) or None,
                           space=space, bound=bound)
    configs = space.configs(tp_size=1)
    result.configs = len(configs)
    keys = [(tuple(behaviour_key(p, c) for p in policies), bound, kv_outcomes, canonical, memo,
             first_only) for c in configs]
    cache = {} if cache is None else cache
    portable = tuple(_portable(p, s) for p, s in zip(policies, (policy, *ref_specs)))
    jobs = {}
    bundles: dict = {}  # hook group -> the keys of its jobs
    for key, config in zip(keys, configs):
        if key not in cache and key not in jobs:
            group = hook_group(policies, config)
            bundles.setdefault(key if group is None else group, []).append(key)
            jobs[key] = SearchJob(policies=portable if None not in portable else policies,
                                  config=config, bound=bound, kv_outcomes=kv_outcomes,
                                  canonical=canonical, memo=memo, build=pol.name,
                                  first_only=first_only)
    n_workers = min(workers or default_workers(), max(len(bundles), 1))
    if None in portable:
        n_workers = 1
    start = time.perf_counter()
    done = 0

    def finished(key, outcome: SearchOutcome) -> None:
        nonlocal done
        cache[key] = outcome
        result.searches += 1
        result.rank_iterations += outcome.rank_iterations  # replayed now (the rate)
        result.interrupted |= outcome.interrupted
        done += 1
        if progress is not None:
            progress(done, len(jobs), sum(cache[k].transitions for k in jobs if k in cache))

    # The largest bundles first: the pool's workers finish together.
    order = sorted(bundles.values(), key=len, reverse=True)
    try:
        if n_workers <= 1:
            for bundle in order:
                for key, outcome in zip(bundle, run_bundle([jobs[k] for k in bundle])):
                    finished(key, outcome)
                if result.interrupted:
                    break
        else:
            _run_pool(jobs, order, n_workers, finished)
    except KeyboardInterrupt:
        result.interrupted = True
    result.seconds = time.perf_counter() - start
    for key in dict.fromkeys(keys):  # every distinct search the space needs, run now or before
        if key in cache:
            result.schedules += cache[key].transitions
            result.states += cache[key].states
    best: dict = {}
    counts: dict = {}
    for key, config in zip(keys, configs):
        outcome = cache.get(key)
        if outcome is None:
            continue
        for k, (f, records) in outcome.found.items():
            counts[k] = counts.get(k, 0) + 1
            if k not in best or f.size < best[k][0].size:
                best[k] = (f, records, config)
    for k, (f, records, config) in sorted(best.items(), key=lambda kv: (kv[1][0].size, str(kv[0]))):
        if refs and k[0] != "diverge":
            continue  # differential mode reports divergences only
        kind, cause, description, slug = describe_key(k, k[1] if k[0] != "diverge" else "")
        ref_name = refs[k[1] - 1].name if k[0] == "diverge" else None
        if ref_name is not None and len(refs) > 1:
            slug = f"{ref_name}--{slug}"
        # A search shared by configurations that decide alike ran under the first of them: the
        # run record names the configuration the witness is reported for, so a witness does not
        # depend on which configuration a process happened to explore first.
        witness_config = dataclasses.replace(config, tp_size=f.ranks)
        records = [run_record(witness_config, pol.name) if r.get("kind") == "run" else r
                   for r in records]
        confirmed = confirm(records, pol, KIND_OF[kind]) if check and not refs else None
        result.witnesses.append(Witness(
            kind=kind, cause=cause, description=description,
            config=witness_config, ranks=f.ranks,
            iterations=f.iterations, requests=f.requests, records=tuple(records),
            configs=counts.get(k, 1), confirmed=confirmed, slug=slug, against=ref_name))
    return result


def _run_pool(jobs: dict, bundles: list[list], n_workers: int, finished) -> None:
    """Run the bundles of jobs in ``n_workers`` processes, reporting each job as its bundle
    completes."""
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    with concurrent.futures.ProcessPoolExecutor(n_workers, mp_context=ctx) as pool:
        futures = {pool.submit(run_bundle, [jobs[k] for k in bundle]): bundle
                   for bundle in bundles}
        reported: set = set()

        def report(fut) -> None:
            reported.add(fut)
            for key, outcome in zip(futures[fut], fut.result()):
                finished(key, outcome)
        try:
            for fut in concurrent.futures.as_completed(futures):
                report(fut)
        except KeyboardInterrupt:
            for fut in futures:
                fut.cancel()
            for fut in futures:
                if (fut not in reported and fut.done() and not fut.cancelled()
                        and fut.exception() is None):
                    report(fut)
            raise


__all__ = ["Progress", "SearchJob", "SearchOutcome", "behaviour_key", "default_workers",
           "explore", "hook_group", "run_bundle", "run_job"]
