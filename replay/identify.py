"""Which catalogue policy a TensorRT-LLM build behaves like (issue 12 item 4).

``identify("trtllm:PATH[@REV]")`` replays a battery of small hand-made traces (:func:`battery`,
one per behaviour of the domain doc's §9 and §10, built in code) through the build's real pad
code and through every policy of ``replay.catalogue.CATALOGUE`` (read when called, so a new
entry is compared as soon as it exists), and says behaviour by behaviour which policies decide
exactly as the build does. The build's era is the policy that matches on every behaviour; when
none does, the result names the closest one and the behaviours where nothing matches
(``forensics identify`` exits 1 then).

What "decides as" compares, per behaviour (:class:`Observation`): every (iter, rank)'s pad
decision and dummy role, the post-schedule pad, the surplus warning, ``can_queue``, how each
dummy was removed, the leaks (rank, created, skipped) and where the run stopped (iter, rank).
The crash's *kind* is not compared: real code reports the exception, the catalogue its model.

Each trace's run record names the model (``deepseek_v4`` unless the behaviour is about the
model gate), so gated fixes are compared inside their gate and, in the gate behaviours, outside.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from replay.policy import Policy
from replay.errors import PolicyError
from replay.explore.differential import ExploredIdentification, identify_by_exploration
from replay.explore.space import DEFAULT_BOUND, Bound, ConfigSpace

#: The model the battery's traces name unless a behaviour is about the model gate.
BATTERY_MODEL = "deepseek_v4"


@dataclasses.dataclass(frozen=True)
class Behaviour:
    """One acceptance case as a trace.

    Fields:
        name: stable identifier (``all-await-kv``).
        section: where the domain doc states it (``§9``, ``§10``).
        statement: the behaviour, paraphrased from the doc, and what the trace holds.
        records: the trace (a v1 run record, then frame records).
    """

    name: str
    section: str
    statement: str
    records: tuple[dict, ...]


def _run_record(tp=2, *, mbs=8, cap=None, pp=1, disagg=True, overlap=True, adp=True,
                model: Optional[str] = BATTERY_MODEL, dkv: bool = False) -> dict:
    rec = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": tp, "pp_size": pp,
           "max_batch_size": mbs, "max_num_active_requests": cap or pp * mbs,
           "disaggregated": disagg, "overlap_scheduler": overlap, "build": "identify",
           "enable_attention_dp": adp}
    if model is not None:
        rec["model_arch"] = model
    if dkv:
        rec["dkv_enabled"] = True
    return rec


def _frames(*iterations: list[list[Any]]) -> list[dict]:
    """Frame records from ``iterations[i][rank]`` = list of ``(id, STATE)`` or a dict of extras
    ``{"requests": [...], "alloc_ok": False, "kv_precheck_ok": False, "scheduled": 0}``."""
    out = []
    for it, ranks in enumerate(iterations):
        for rank, entry in enumerate(ranks):
            extra = dict(entry) if isinstance(entry, dict) else {"requests": entry}
            reqs = extra.pop("requests")
            out.append({"kind": "frame", "iter": it, "rank": rank,
                        "requests": [{"id": i, "state": s} for i, s in reqs], **extra})
    return out


def _behaviour(name, section, statement, run, *iterations) -> Behaviour:
    return Behaviour(name, section, statement, (run, *_frames(*iterations)))


G2C, GIP, CTX = "GENERATION_TO_COMPLETE", "GENERATION_IN_PROGRESS", "CONTEXT_INIT"
GINIT, GTRANS = "DISAGG_GENERATION_INIT", "DISAGG_GENERATION_TRANS_IN_PROGRESS"
WAIT = "DISAGG_CONTEXT_WAIT_SCHEDULER"


def battery() -> list[Behaviour]:
    """The traces, one per behaviour of §9 and §10 (two ranks unless stated)."""
    return [
        _behaviour("aggregated-to-complete", "§9",
                   "aggregated, a rank holding one GENERATION_TO_COMPLETE request (expected 1) "
                   "gets no dummy: the aggregated path counts it on purpose",
                   _run_record(disagg=False), [[(1, G2C)], [(2, GIP)]]),
        _behaviour("disagg-to-complete", "§9",
                   "disaggregated, one GENERATION_TO_COMPLETE request, expected 2: the fixed "
                   "predicate pads it, the legacy one counts it and does not",
                   _run_record(), [[(1, G2C)], [(2, GIP), (3, GIP)]]),
        _behaviour("wait-scheduler", "§9",
                   "disaggregated, only DISAGG_CONTEXT_WAIT_SCHEDULER requests: the fixed "
                   "predicate pads, the legacy one counts state 7",
                   _run_record(), [[(1, WAIT)], [(2, GIP)]]),
        _behaviour("generation-init-busy-peer", "§9/§10",
                   "only DISAGG_GENERATION_INIT requests while a peer has work: a dummy in every "
                   "era; its role differs by era (context for a rank awaiting KV in 2026 "
                   "builds, always generation in late 2025)",
                   _run_record(), [[(1, GINIT)], [(2, GIP)]]),
        _behaviour("role-after-arrivals", "§10",
                   "the dummy's role over three iterations: at iter 1 a context-only request "
                   "arrives on rank 0 while rank 1, holding only a new request awaiting KV, pads; "
                   "at iter 2 nothing arrives and rank 1 pads again. Late 2025: generation both "
                   "times; mid 2025: context on the arrival, then generation; 2026 builds "
                   "(_update_adp_dummy_role): context, kept until requests arrive again",
                   _run_record(), [[(1, GIP)], [(2, GIP)]],
                   [[(1, GIP), (3, CTX)], [(4, GINIT)]], [[(1, GIP), (3, GIP)], [(4, GTRANS)]]),
        _behaviour("all-await-kv", "§10",
                   "non-overlap, every rank holds only requests awaiting KV: newest code's "
                   "all-reduced forward intent is NONE and nobody pads before scheduling; the "
                   "post-schedule pad (#17379 on) looks at no request state and pads both empty "
                   "batches; older code pads both in the pad step",
                   _run_record(overlap=False), [[(1, GINIT)], [(2, GTRANS)]]),
        _behaviour("intent-role", "§10",
                   "non-overlap, a context request on one rank, the other awaiting KV: the "
                   "forward intent (context wins) gives the padded rank a context dummy",
                   _run_record(overlap=False), [[(1, CTX), (3, GIP)], [(2, GTRANS)]]),
        _behaviour("schedulable-never-pads", "§9",
                   "a rank with a schedulable request never gets a dummy",
                   _run_record(), [[(1, GIP)], [(2, CTX)]]),
        _behaviour("adp-off-never-pads", "§9", "attention DP disabled never pads",
                   _run_record(adp=False), [[(1, GINIT)], [(2, GIP)]]),
        _behaviour("refused-dummy", "§9",
                   "the dummy allocation returns None: a crash where the result is indexed "
                   "unchecked, no dummy and no crash where it is guarded",
                   _run_record(), [{"requests": [(1, GINIT)], "alloc_ok": False}, [(2, GIP)]]),
        _behaviour("refused-dummy-legacy-path", "§6/§10",
                   "capacity fine, allocation refused: aggregated (the legacy path even in "
                   "newest code), an empty rank while the peer works; the KV-capacity precheck "
                   "passes but add_dummy_requests returns None: indexed unchecked (a crash) "
                   "until #18157 (000515e, 002f3cc), tolerated after (0004396)",
                   _run_record(disagg=False), [{"requests": [], "alloc_ok": False}, [(2, GIP)]]),
        _behaviour("no-capacity-legacy-path", "§10",
                   "precheck fails on the legacy path: aggregated, an empty rank while the peer "
                   "works, and the dummy cannot fit (kv_precheck_ok false): from 000515e the "
                   "precheck runs on every path, skips the pad and the rank schedules 0; "
                   "earlier builds attempt the allocation, get None and index it (a crash); "
                   "#16279's precheck is only on its gated path",
                   _run_record(disagg=False),
                   [{"requests": [], "kv_precheck_ok": False}, [(2, GIP)]]),
        _behaviour("no-capacity-gated-path", "§10",
                   "precheck fails on the fixed path (disaggregated, DeepSeek-V4, pp 1): a rank "
                   "awaiting KV while the peer works and the dummy cannot fit: every build with "
                   "a guarded or prechecked allocation skips the pad, older ones crash",
                   _run_record(), [{"requests": [(1, GINIT)], "kv_precheck_ok": False},
                                   [(2, GIP)]]),
        _behaviour("surplus-at-cap", "§9/§10",
                   "two GENERATION_TO_COMPLETE requests on a rank at the cap (expected 1): the "
                   "entry assert trips, newer code warns and pads; without a cap expected is 2 "
                   "and nothing is wrong",
                   _run_record(mbs=1), [[(1, G2C), (2, G2C)], [(3, GIP)]]),
        _behaviour("busy-and-to-complete", "§9",
                   "one rank busy, one holding only a TO_COMPLETE request: with the fixed "
                   "predicate the second pads, both schedule 1, can_queue holds, the dummy is "
                   "cleared; with the legacy one the fleet skips",
                   _run_record(), [[(1, GIP)], [(2, G2C)]]),
        _behaviour("leak-then-cap", "§1/§10",
                   "NVBug 6438685 in three iterations (cap 1): a dummy leaks over a skip and, "
                   "where expected is capped, the rank at the cap plus its dummy asserts",
                   _run_record(mbs=1, overlap=False),
                   [[(1, GINIT)], [(2, G2C)]], [[(1, GTRANS)], [(2, G2C)]],
                   [[(1, GIP)], [(3, CTX)]]),
        _behaviour("pipeline-parallel-gate", "§10",
                   "as disagg-to-complete with pp_size 2: the gated fixes (#16279, #16921) are "
                   "off, the legacy count applies; the proposed ungated #16161 still pads",
                   _run_record(pp=2, mbs=4), [[(1, G2C)], [(2, GIP), (3, GIP)]]),
        _behaviour("model-gate", "§10",
                   "as disagg-to-complete served by a model outside every gate (llama, overlap "
                   "scheduler): #16279's window and #16921's scheduler-aware count are off",
                   _run_record(model="llama"), [[(1, G2C)], [(2, GIP), (3, GIP)]]),
        _behaviour("model-gate-non-overlap", "§10",
                   "llama without the overlap scheduler: #16279 stays off (DeepSeek-V4 only), "
                   "#16921's count is on for every model there",
                   _run_record(model="llama", overlap=False), [[(1, G2C)], [(2, GIP), (3, GIP)]]),
        _behaviour("rollback-on-skip", "§10",
                   "the fleet skips (a refused dummy leaves a zero batch): a pending dummy is "
                   "rolled back where the build makes it pending, else it leaks",
                   _run_record(mbs=2, overlap=False),
                   [[(1, GINIT)], {"requests": [(2, GINIT)], "alloc_ok": False}],
                   [[(1, GIP)], [(2, GIP)]]),
        _behaviour("post-schedule-pad", "§10",
                   "a rank whose schedulable request did not fit (scheduled 0) gets a "
                   "generation dummy after scheduling (#17379), so the fleet runs",
                   _run_record(), [{"requests": [(1, GIP)], "scheduled": 0}, [(2, GIP)]]),
        _behaviour("dkv-no-pads", "§11",
                   "a dkv run (dkv_enabled): builds that know dkv return from both pads at once, "
                   "so a rank awaiting KV while the peer works gets no dummy and the fleet "
                   "skips; earlier builds pad it",
                   _run_record(dkv=True), [[(1, GINIT)], [(2, GIP)]]),
    ]


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one replay of a behaviour's trace decided (compared for equality).

    Fields:
        rows: per (iter, rank): ``(padded, role, postpadded, surplus warning, can_queue,
            removal path)``.
        leaks: ``(rank, iter_created, iter_skipped)`` per leaked dummy.
        stop: ``(iter, rank)`` of the crash, or None.
        error: why the replay failed (the stand-in lacks something), or None.
    """

    rows: tuple[tuple[Any, ...], ...] = ()
    leaks: tuple[tuple[int, int, int], ...] = ()
    stop: Optional[tuple[int, int]] = None
    error: Optional[str] = None

    def describe(self) -> str:
        """A short plain account (which ranks padded, removals, leaks, the crash)."""
        if self.error is not None:
            return f"not replayable: {self.error.splitlines()[0]}"
        parts = []
        pads = [f"r{r}@{i}({role[0]})" for (i, r), (pad, role, *_rest) in self._keyed() if pad]
        post = [f"r{r}@{i}" for (i, r), row in self._keyed() if row[2]]
        warn = [f"r{r}@{i}" for (i, r), row in self._keyed() if row[3]]
        skips = sorted({i for (i, _r), row in self._keyed() if row[4] is False})
        parts.append("pads " + " ".join(pads) if pads else "no pad")
        if post:
            parts.append("post-pads " + " ".join(post))
        if warn:
            parts.append("warns " + " ".join(warn))
        if skips:
            parts.append("skips iter " + ",".join(map(str, skips)))
        rolled = [f"r{r}@{i}" for (i, r), row in self._keyed() if row[5] == "rollback"]
        if rolled:
            parts.append("rolls back " + " ".join(rolled))
        if self.leaks:
            parts.append("leaks " + " ".join(f"r{r}@{c}" for r, c, _ in self.leaks))
        if self.stop is not None:
            parts.append(f"crashes at iter {self.stop[0]} rank {self.stop[1]}")
        return "; ".join(parts)

    def _keyed(self):
        return [((row[0], row[1]), row[2:]) for row in self.rows]


def case_config(frames: Any, case: Behaviour) -> Any:
    """The run configuration of a case: the frames' own, with the run record's ``model_arch``
    and ``enable_attention_dp`` (a trace reader that does not carry them yet would drop them)."""
    run = case.records[0]
    return dataclasses.replace(frames.config, model_arch=run.get("model_arch"),
                               enable_attention_dp=bool(run.get("enable_attention_dp", True)),
                               dkv_enabled=bool(run.get("dkv_enabled", False)))


def observe(frames: Any, policy: Policy, config: Any = None) -> Observation:
    """Replay ``frames`` under ``policy`` and reduce the result to an :class:`Observation`."""
    from replay.walk import run
    try:
        result = run(frames, config, policy)
    except PolicyError as e:
        return Observation(error=str(e))
    d = result.decisions
    cols = {c: d[c].tolist() for c in ("iter", "rank", "padded", "pad_role", "postpadded",
                                       "surplus", "crash", "can_queue", "removed_path")}
    rows = []
    for k in range(len(d)):
        crashed = bool(cols["crash"][k])
        cq = cols["can_queue"][k]
        cq = None if crashed or cq is None or str(cq) == "<NA>" else bool(cq)
        role = str(cols["pad_role"][k]) if cols["padded"][k] else ""
        removed = cols["removed_path"][k]
        removed = None if str(removed) in ("nan", "None", "<NA>") else str(removed)
        rows.append((int(cols["iter"][k]), int(cols["rank"][k]), bool(cols["padded"][k]), role,
                     bool(cols["postpadded"][k]), bool(cols["surplus"][k]) and not crashed, cq,
                     removed))
    leaks = tuple((lk.rank, lk.iter_created, lk.iter_skipped) for lk in sorted(result.leak_records, key=lambda x: x.dummy))
    stop = None if result.crash is None else (result.crash.iter, result.crash.rank)
    return Observation(rows=tuple(rows), leaks=leaks, stop=stop)


@dataclasses.dataclass(frozen=True)
class BehaviourMatch:
    """One behaviour: what the build decided and which catalogue policies decide the same.

    Fields:
        behaviour: the case.
        real: the build's observation.
        matches: catalogue policies whose observation equals it (catalogue order).
        others: every catalogue policy's observation, by name.
    """

    behaviour: Behaviour
    real: Observation
    matches: tuple[str, ...]
    others: dict[str, Observation]

    def to_json(self) -> dict[str, Any]:
        return {"behaviour": self.behaviour.name, "section": self.behaviour.section,
                "statement": self.behaviour.statement, "build": self.real.describe(),
                "matches": list(self.matches),
                "catalogue": {n: o.describe() for n, o in self.others.items()}}


@dataclasses.dataclass(frozen=True)
class Identification:
    """The outcome of :func:`identify`.

    Fields:
        spec: what was identified (``trtllm:PATH@REV``).
        source: the resolved source label (path, revision).
        loop: the catalogue policy the source's era supplied the loop from.
        behaviours: one :class:`BehaviourMatch` per battery case, in battery order.
        named: the catalogue policy matching on every behaviour (the build's era), or None.
        closest: the policy matching on the most behaviours (``named`` when there is one).
        unmatched: behaviours no catalogue policy matches.
    """

    spec: str
    source: str
    loop: Optional[str]
    behaviours: tuple[BehaviourMatch, ...]
    named: Optional[str]
    closest: Optional[str]
    unmatched: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """A catalogue policy matches the build on every behaviour."""
        return self.named is not None

    def summary(self) -> list[str]:
        """Plain lines for the CLI: the verdict, then one line per behaviour."""
        n = len(self.behaviours)
        if self.named is not None:
            head = f"{self.spec}: behaves as catalogue policy {self.named} on all {n} behaviours"
        else:
            hits = sum(self.closest in b.matches for b in self.behaviours) if self.closest else 0
            head = (f"{self.spec}: no catalogue policy matches on every behaviour; closest "
                    f"{self.closest} ({hits}/{n})")
        lines = [head, f"source: {self.source}"]
        width = max(len(b.behaviour.name) for b in self.behaviours) if self.behaviours else 0
        for b in self.behaviours:
            match = ", ".join(b.matches) if b.matches else "NONE"
            lines.append(f"  {b.behaviour.name:<{width}}  {b.behaviour.section:<7} "
                         f"{match}  [build: {b.real.describe()}]")
        if self.unmatched:
            lines.append("no catalogue policy decides as the build on: " + ", ".join(self.unmatched))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "source": self.source, "loop": self.loop, "named": self.named,
                "closest": self.closest, "ok": self.ok, "unmatched": list(self.unmatched),
                "behaviours": [b.to_json() for b in self.behaviours]}


#: Catalogue observations by (case, policy value): a catalogue policy is plain data, so its
#: decisions on a case never change within a process (a modified entry is a new key).
_CATALOGUE_CACHE: dict[tuple[str, Policy], Observation] = {}


def _catalogue_observation(case: Behaviour, frames: Any, policy: Policy,
                           config: Any) -> Observation:
    if policy.pad_hook is not None:  # not plain data: never cached
        return observe(frames, policy, config)
    key = (json.dumps(case.records, sort_keys=True), policy)
    if key not in _CATALOGUE_CACHE:
        _CATALOGUE_CACHE[key] = observe(frames, policy, config)
    return _CATALOGUE_CACHE[key]


def identify(spec: str | Policy, behaviours: Optional[list[Behaviour]] = None) -> Identification:
    """Replay the battery through ``spec``'s real code and every catalogue policy; name the era.

    Args:
        spec: ``trtllm:PATH[@REV]``, ``trtllm:installed`` or an already resolved policy.
        behaviours: the cases (default :func:`battery`).

    Raises:
        PolicyError: the spec cannot be resolved.
    """
    from replay.catalogue import CATALOGUE
    from replay.frames import RunFrames
    from replay.resolve import resolve_policy
    from replay.trtllm_source import era_of
    policy = resolve_policy(spec)
    name = spec if isinstance(spec, str) else policy.name
    cases = battery() if behaviours is None else behaviours
    catalogue = dict(CATALOGUE)
    out = []
    for case in cases:
        frames = RunFrames.from_records([dict(r) for r in case.records],
                                        source=f"<identify:{case.name}>")
        config = case_config(frames, case)
        real = observe(frames, policy, config)
        others = {n: _catalogue_observation(case, frames, p, config) for n, p in catalogue.items()}
        matches = tuple(n for n, o in others.items() if real.error is None and o == real)
        out.append(BehaviourMatch(case, real, matches, others))
    loop = era_of(policy)
    own = policy.name if policy.name in catalogue else None   # a catalogue entry given by name
    order = list(catalogue)

    def rank(n: str) -> tuple[int, int, int, int, int]:
        # More behaviours matched first; then the loop's own era; then the entry that was
        # given (newest and kv-connector-19164 decide alike: each names itself); then a merged
        # entry over a proposal that decides the same; then the newer entry.
        return (sum(n in b.matches for b in out), n == loop, n == own, catalogue[n].merged,
                order.index(n))

    everywhere = [n for n in order if all(n in b.matches for b in out)]
    named = max(everywhere, key=rank) if everywhere else None
    closest = named or (max(order, key=rank) if order else None)
    unmatched = tuple(b.behaviour.name for b in out if not b.matches)
    return Identification(spec=name, source=policy.source or policy.title, loop=loop,
                          behaviours=tuple(out), named=named, closest=closest,
                          unmatched=unmatched)


def identify_explore(spec: str, space: ConfigSpace = ConfigSpace(),
                     bound: Bound = DEFAULT_BOUND) -> ExploredIdentification:
    """``identify --explore``: the entries that decide as the build on every schedule up to a
    bound, not only on the battery (``replay.explore.differential``)."""
    return identify_by_exploration(spec, space, bound)


__all__ = ["Behaviour", "BehaviourMatch", "Identification", "Observation", "battery",
           "case_config", "identify", "identify_explore", "observe"]

