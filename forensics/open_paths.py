"""Which serving paths of a build stay open to the pad-dummy leak, and which builds to recommend.

A leak needs a rank that offers a zero batch without a dummy: its pad predicate counts a request
the scheduler refuses (a state outside the micro-batch window), no post-schedule padding fills the
empty batch, and no rollback removes the dummies the other ranks padded when the fleet skips
(domain doc §4-7). Whether a build has that gap depends on the run: serving mode (a KV-cache
transceiver or not), pp_size (PR #16921 gates its predicate and rollback on pp_size 1) and the
model (encoder-decoder models have a wider window). The overlap loop does not change the gap.

:func:`path_gap` is the one place that reads the policy's fields for this; it goes through the
catalogue's gates (``Policy.predicate``/``rolls_back`` read ``RunConfig.model_arch``, ``pp_size``,
the overlap loop and the transceiver), and a build that never shipped (``Policy.merged`` False,
PR #16161) is never recommended.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Optional, Sequence

import replay
from forensics.trace_records import dumps_records
from forensics.user_cache import entry_key, read_entry, source_digest, write_entry
from replay.config import RunConfig
from replay.explore import KV_OUTCOMES, Bound, ConfigSpace, explore
from replay.explore.result import plural
from replay.policy import EntryCheck, Policy, model_name
from replay.states import ALL_STATES, micro_batch_window

#: The bound of the exploration behind each path's verdict (``replay.explore``): every schedule
#: of the path's configuration up to it, with the dummy always fitting in the KV cache (a path is
#: open when its pad count leaves a gap, whatever the KV cache does).
PATH_BOUND = Bound(ranks=2, requests=2, iterations=3)


@dataclasses.dataclass(frozen=True)
class PathWitness:
    """The smallest schedule showing a path open (``replay.explore``'s minimal witness).

    Fields:
        kind, cause: the mechanism (``crash``, ``GENERATION_TO_COMPLETE``).
        ranks, iterations, requests: its size.
        records: the schedule as a v2 trace (``forensics replay`` reads it).
        file: where the report wrote it (relative to the report), once written.
    """

    kind: str
    cause: str
    ranks: int
    iterations: int
    requests: int
    records: tuple
    file: str = ""

    def text(self) -> str:
        return (f"{self.kind} in {plural(self.ranks, 'rank')}, "
                f"{plural(self.iterations, 'iteration')}, {plural(self.requests, 'request')}")


@dataclasses.dataclass(frozen=True)
class PathGap:
    """What one build does on one serving path.

    Fields:
        label: the path in words (``"disaggregated, pp_size 1"``).
        open: a dummy can leak on this path.
        gap_states: states the predicate counts but the scheduler refuses.
        outcome: what a leak does there (``"crash at the cap"``, ``"warned, capacity wasted"``,
            ``"silent"``), or ``"closed"``.
        why: one clause saying why.
        witness: for an open path, its minimal witness from exploration (None when the
            exploration found none up to the bound, or was not run).
        evidence: what the exploration says: ``"minimal witness: crash in 2 ranks, ..."`` or
            ``"no counterexample in N schedules up to 2 ranks, ..."``; empty when not run.
    """

    label: str
    open: bool
    gap_states: tuple[str, ...]
    outcome: str
    why: str
    witness: Optional[PathWitness] = None
    evidence: str = ""


def path_label(config: RunConfig) -> str:
    """``"disaggregated, pp_size 1, overlap loop"`` for a configuration."""
    return (f"{'disaggregated' if config.disaggregated else 'aggregated'}, pp_size {config.pp_size}"
            + (", encoder-decoder" if config.encoder_decoder else "")
            + (f", model {config.model_arch}" if config.model_arch else ""))


def gap_states(policy: Policy, config: RunConfig) -> tuple[str, ...]:
    """States the policy's pad predicate counts on this path but the scheduler refuses."""
    counted = policy.predicate(config).mask(config)
    window = micro_batch_window(config.encoder_decoder).mask()
    states = [s.name for s, c, w in zip(ALL_STATES, counted, window) if c and not w]
    # Only states a live request reaches on this path: no DISAGG_* state without a transceiver.
    if not config.disaggregated:
        states = [s for s in states if not s.startswith("DISAGG_")]
    drop = {"UNKNOWN", "DISAGG_TRANS_ERROR", "GENERATION_COMPLETE"}
    if not config.encoder_decoder:
        drop.add("ENCODER_INIT")
    states = [s for s in states if s not in drop]
    # The state that leaks in practice (NVBug 6438685) first.
    return tuple(sorted(states, key=lambda s: s != "GENERATION_TO_COMPLETE"))


def path_gap(policy: Policy, config: RunConfig) -> PathGap:
    """Whether ``policy`` can leak a dummy on the path of ``config``, and what the leak does."""
    label = path_label(config)
    gap = gap_states(policy, config)
    if policy.pad_hook is not None:
        return PathGap(label, False, (), "unknown", "real or candidate code: only the replay tells")
    if not gap:
        return PathGap(label, False, (), "closed", "its predicate counts only states the scheduler takes")
    if policy.rolls_back(config):
        return PathGap(label, False, gap, "closed",
                       "a pending dummy is rolled back when the fleet skips (PR #16921)")
    states = gap[0] + (f" and {len(gap) - 1} more state{'s' if len(gap) > 2 else ''}"
                       if len(gap) > 1 else "")
    if policy.postpad_empty_batch:
        return PathGap(label, True, gap, _outcome(policy),
                       f"counts {states} the scheduler refuses; post-schedule padding fills an "
                       "empty batch only below the cap")
    return PathGap(label, True, gap, _outcome(policy),
                   f"counts {states} the scheduler refuses; no rollback on a skip")


#: Which witness kind shows each outcome of :func:`path_gap`.
_KIND_OF_OUTCOME = {"can crash at the cap (entry assert)": "crash",
                    "leaks are warned about and waste capacity": "wasted capacity",
                    "leaks silently (no cap)": "leak"}


#: Searches already run for some path, by behaviour key: builds that decide a path alike share one.
_SEARCHES: dict = {}


#: The per-user cache area of explored paths (``forensics.user_cache``).
_CACHE_AREA = "explore-paths"


@functools.cache
def _code_digest() -> str:
    """Digest of the code a path's exploration runs (the replay library, catalogue included, and
    this module): a cached result computed by other code is never read back."""
    files = sorted(Path(replay.__file__).parent.rglob("*.py")) + [Path(__file__)]
    return source_digest(files)


@functools.lru_cache(maxsize=256)
def explore_path(policy: Policy, config: RunConfig, outcome: str = "") -> tuple[Optional[PathWitness], int]:
    """Explore one path's configuration under ``policy`` up to :data:`PATH_BOUND`: the minimal
    witness of a dummy leaking (of ``outcome``'s kind where one is found, else the smallest
    failure) and the number of schedules explored.

    The result is kept in the per-user cache (``forensics.user_cache``), keyed by the policy,
    the configuration, the bound, ``outcome`` and the code's digest: a post-mortem run again
    reads it back instead of exploring (measured on the bundled sample: the exploration is most
    of the post-mortem's CPU time)."""
    key = entry_key(_code_digest(), policy, config, PATH_BOUND, outcome)
    cached = read_entry(_CACHE_AREA, key)
    if isinstance(cached, dict):
        try:
            w = cached["witness"]
            witness = None if w is None else PathWitness(
                kind=w["kind"], cause=w["cause"], ranks=w["ranks"], iterations=w["iterations"],
                requests=w["requests"], records=tuple(w["records"]))
            return witness, int(cached["schedules"])
        except (KeyError, TypeError, ValueError):
            pass  # a damaged entry is a miss
    witness, schedules = _explore_path(policy, config, outcome)
    write_entry(_CACHE_AREA, key, {"schedules": schedules, "witness": None if witness is None else
                                   dataclasses.asdict(witness)})
    return witness, schedules


def _explore_path(policy: Policy, config: RunConfig, outcome: str) -> tuple[Optional[PathWitness], int]:
    space = ConfigSpace(disaggregated=(config.disaggregated,), pp_sizes=(config.pp_size,),
                        overlap=(config.overlap_scheduler,), models=(config.model_arch,),
                        max_batch_sizes=(config.max_batch_size,), caps=(config.cap,),
                        dkv=(config.dkv_enabled,))
    res = explore(policy, space, PATH_BOUND, kv_outcomes=KV_OUTCOMES[:1], workers=1, check=False,
                  cache=_SEARCHES)
    want = _KIND_OF_OUTCOME.get(outcome)
    found = [w for w in res.witnesses if w.kind == want] or list(res.witnesses)
    if not found:
        return None, res.schedules
    w = found[0]  # smallest first
    return PathWitness(kind=w.kind, cause=w.cause, ranks=w.ranks, iterations=w.iterations,
                       requests=w.requests, records=w.records), res.schedules


def witness_file(policy: Policy, config: RunConfig) -> str:
    """The report's file name of a path's witness: ``witness-newest--aggregated-pp-size-1.jsonl``."""
    slug = "".join(ch if ch.isalnum() else "-" for ch in path_label(config).lower())
    return f"witness-{policy.name}--{'-'.join(filter(None, slug.split('-')))}.jsonl"


def with_evidence(gap: PathGap, policy: Policy, config: RunConfig) -> PathGap:
    """``gap`` with what exploring its configuration says (a witness when open, "no
    counterexample up to the bound" when nothing leaks)."""
    if policy.pad_hook is not None:
        return gap
    witness, schedules = explore_path(policy, config, gap.outcome)
    if witness is not None:
        witness = dataclasses.replace(witness, file=witness_file(policy, config))
        return dataclasses.replace(gap, witness=witness, evidence="minimal witness: " + witness.text()
                                   + f" (`{witness.file}`)")
    return dataclasses.replace(gap, evidence=f"no counterexample in {schedules} schedules up to "
                                             f"{PATH_BOUND.describe()}")


def _outcome(policy: Policy) -> str:
    if not policy.cap:
        return "leaks silently (no cap)"
    if policy.entry_check is EntryCheck.WARN:
        return "leaks are warned about and waste capacity"
    return "can crash at the cap (entry assert)"


def other_paths(config: RunConfig) -> list[RunConfig]:
    """The neighbouring paths worth naming: the other serving mode and pp_size > 1."""
    out = [dataclasses.replace(config, disaggregated=not config.disaggregated)]
    if config.pp_size == 1:
        out.append(dataclasses.replace(config, pp_size=2, max_num_active_requests=None))
    else:
        out.append(dataclasses.replace(config, pp_size=1, max_num_active_requests=None))
    return out


@dataclasses.dataclass(frozen=True)
class BuildAdvice:
    """One build recommended for this run, and where it stays open."""

    policy: str
    title: str
    prs: tuple[str, ...]
    open_paths: tuple[PathGap, ...]
    #: This run's own path when the build's gap is still there (replayed clean on this traffic,
    #: e.g. post-schedule padding that only works below the cap), else None.
    here: Optional[PathGap] = None
    #: The gate the advice depends on when the run does not name its model
    #: (``"only if the model is DeepSeek-V4"``), else empty.
    condition: str = ""
    #: What exploring this run's path says when it is closed ("no counterexample in N schedules
    #: up to ..."), else empty.
    here_evidence: str = ""

    def text(self) -> str:
        prs = f" (PR {', '.join(self.prs[:2])})" if self.prs else ""
        if self.condition:
            prs += f" ({self.condition})"
        if not self.open_paths:
            return f"{self.policy}{prs}"
        opened = "; ".join(f"{p.label}: {p.outcome}" for p in self.open_paths)
        return f"{self.policy}{prs}, still open on {opened}"


def clean_builds(policies: Sequence[Policy], config: Optional[RunConfig],
                 replayed_clean: Optional[set[str]] = None) -> list[BuildAdvice]:
    """The builds clean for this run's path, each with the neighbouring paths that stay open.

    ``replayed_clean``: the policies whose replay of this run found nothing (traced runs); without
    it (logs only) a build qualifies when its path is closed for ``config``.
    """
    out = []
    for p in policies:
        if not p.merged:  # a proposal that never shipped is no build to move to (PR #16161)
            continue
        condition = ""
        if replayed_clean is not None:
            if p.name not in replayed_clean:
                continue
        elif config is None or p.pad_hook is not None:
            continue
        elif path_gap(p, config).open:
            # A gate that reads the model the logs do not name: closed for the models it names?
            models = [m for m in p.model_dependent(config)
                      if not path_gap(p, dataclasses.replace(config, model_arch=m)).open]
            if not models:
                continue
            condition = "only if the model is " + " or ".join(model_name(m) for m in models)
        opened = tuple(with_evidence(g, p, c) for g, c in
                       ((path_gap(p, c), c) for c in other_paths(config)) if g.open) \
            if config is not None else ()
        here = path_gap(p, config) if config is not None else None
        evidence = with_evidence(here, p, config).evidence \
            if here is not None and not here.open else ""
        out.append(BuildAdvice(p.name, p.title, tuple(p.prs), opened,
                               here if here is not None and here.open and not condition else None,
                               condition, evidence))
    # Closed on this path first, then fewest open paths, then catalogue order (stable sort).
    return sorted(out, key=lambda a: (a.here is not None, len(a.open_paths)))


def witness_files(recommended: Sequence[BuildAdvice]) -> dict[str, bytes]:
    """Every open path's witness trace, by its report file name (JSON Lines)."""
    out = {}
    for advice in recommended:
        for gap in advice.open_paths:
            if gap.witness is not None and gap.witness.file:
                out[gap.witness.file] = dumps_records(gap.witness.records).encode()
    return out


__all__ = ["BuildAdvice", "PATH_BOUND", "PathGap", "PathWitness", "clean_builds", "explore_path",
           "gap_states", "other_paths", "path_gap", "path_label", "with_evidence", "witness_file",
           "witness_files"]
