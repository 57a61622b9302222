"""What an executor version does around the pad dummy, as data (domain doc §4-7).

A :class:`Policy` is a frozen record of behaviours; the step semantics in ``replay.step`` read
it. The catalogue of named versions is ``replay.catalogue``; adding a version touches that file only.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Optional

import numpy as np

from replay.config import RunConfig
from replay.states import (ALL_STATES, NOT_SCHEDULABLE_STATES, RequestState, micro_batch_window,
                           states_mask)


class Predicate(enum.Enum):
    """How ``num_schedulable`` is counted before deciding to pad."""

    #: ``len(active_requests)``: every request counts (aggregated path, every version).
    ALL = "all"
    #: 2025 legacy with a transceiver: all but DISAGG_GENERATION_INIT / _TRANS_IN_PROGRESS
    #: (so GENERATION_TO_COMPLETE and DISAGG_CONTEXT_WAIT_SCHEDULER count).
    NOT_AWAITING_KV = "not-awaiting-kv"
    #: PR #16161/#16279: the micro-batch window ``[CONTEXT_INIT, GENERATION_TO_COMPLETE)``.
    WINDOW = "window"
    #: PR #16921: ``scheduler.is_request_in_schedulable_state`` (7, 8, 9 refused, else the window).
    SCHEDULER = "scheduler"

    def mask(self, config: RunConfig) -> np.ndarray:
        """Boolean mask over ``ALL_STATES`` of the states this predicate counts."""
        if self is Predicate.ALL:
            return np.ones(len(ALL_STATES), dtype=bool)
        if self is Predicate.NOT_AWAITING_KV:
            return ~states_mask([RequestState.DISAGG_GENERATION_INIT,
                                 RequestState.DISAGG_GENERATION_TRANS_IN_PROGRESS])
        window = micro_batch_window(config.encoder_decoder).mask()
        if self is Predicate.WINDOW:
            return window
        return window & ~states_mask(NOT_SCHEDULABLE_STATES)

    def describe(self) -> str:
        return {
            Predicate.ALL: "len(active_requests): every request counts",
            Predicate.NOT_AWAITING_KV: ("requests not awaiting KV (all but DISAGG_GENERATION_INIT and "
                                        "DISAGG_GENERATION_TRANS_IN_PROGRESS; GENERATION_TO_COMPLETE counts)"),
            Predicate.WINDOW: "requests in the scheduler window [CONTEXT_INIT, GENERATION_TO_COMPLETE)",
            Predicate.SCHEDULER: "scheduler.is_request_in_schedulable_state (window, minus states 7/8/9)",
        }[self]


class EntryCheck(enum.Enum):
    """What happens when ``len(active_requests) > expected_num_active_requests`` at pad entry."""

    ASSERT = "assert"   # AssertionError: the rank's event loop dies, the fleet follows
    WARN = "warn"       # PR #17278: "active_requests (N) exceeds expected ...; tolerating"


class AllocFailure(enum.Enum):
    """What happens when ``kv_cache_manager.add_dummy_requests`` returns None."""

    CRASH = "crash"     # result used unchecked: TypeError on None[0]
    SKIP = "skip"       # warn "Cannot allocate ... pad dummy" and skip padding (#16279, #18157)


class KvPrecheck(enum.Enum):
    """Where ``_has_adp_dummy_kv_capacity`` runs before the dummy allocation (domain doc §10).

    A precheck that sees the dummy cannot fit skips padding (warning once "Unable to fit the
    complete attention-DP dummy KV allocation; skipping this forward iteration and retrying"):
    no dummy, the rank schedules 0. Where no precheck runs, a dummy that cannot fit is a refused
    allocation (``Policy.alloc_failure_for``).
    """

    #: No precheck (every build before #16279).
    NONE = "none"
    #: Only on the transactional path (#16279: inside its fixes gate, with a transceiver).
    GATED = "gated"
    #: Before the branch, on every path (from NVIDIA 000515e on).
    EVERY_PATH = "every-path"


class DummyRole(enum.Enum):
    """How a version chooses the pad dummy's role (context or generation), domain doc §10."""

    #: Always a generation dummy (late 2025).
    GENERATION = "generation"
    #: A context dummy in an iteration where a context-only request arrived (mid 2025, NVIDIA
    #: 9521caf); a generation dummy otherwise.
    CONTEXT_ON_ARRIVAL = "context-on-arrival"
    #: ``_update_adp_dummy_role`` (2026 builds, disaggregated only): the role follows the types of
    #: the requests routed this iteration (context-only wins) and is kept until they change.
    REQUEST_TYPES = "request-types"

    def context_after(self, previous: bool, context_arrived: bool, generation_arrived: bool) -> bool:
        """The role after one iteration's routing: True for context (``previous``: before it)."""
        if self is DummyRole.CONTEXT_ON_ARRIVAL:
            return bool(context_arrived)
        if self is DummyRole.REQUEST_TYPES:
            # _update_adp_dummy_role: context-only wins; kept until requests of a type arrive.
            return True if context_arrived else False if generation_arrived else bool(previous)
        return False

    def context_rows(self, context_arrived: np.ndarray, generation_arrived: np.ndarray,
                     previous: bool = False) -> np.ndarray:
        """:meth:`context_after` over ``(I,)`` iterations (vectorised), from the role
        ``previous`` (a generation role at the start of a run; a window's carried role)."""
        ctx = np.asarray(context_arrived, bool)
        if self is DummyRole.CONTEXT_ON_ARRIVAL:
            return ctx.copy()
        if self is DummyRole.REQUEST_TYPES and ctx.size:
            event = ctx | np.asarray(generation_arrived, bool)
            last = np.maximum.accumulate(np.where(event, np.arange(event.size), -1))
            return np.where(last >= 0, ctx[np.maximum(last, 0)], bool(previous))
        return np.zeros(ctx.shape, bool)


class GateState(enum.Enum):
    """Whether a gated path applies to a run."""

    OPEN = "open"
    CLOSED = "closed"
    #: The gate reads the model and the run does not name it.
    UNKNOWN = "unknown"


#: Readable names of the ``pretrained_config.model_type`` values the gates name.
MODEL_NAMES = {"deepseek_v4": "DeepSeek-V4", "deepseek_v3": "DeepSeek-V3",
               "qwen3_5_moe": "Qwen3.5-MoE", "kimi_k2": "Kimi-K2"}


def model_name(model_type: str) -> str:
    """``deepseek_v4`` -> ``DeepSeek-V4`` (unknown types as given)."""
    return MODEL_NAMES.get(model_type, model_type)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A condition upstream reads once at start-up to turn a path of the pad code on.

    Fields:
        flag: the upstream attribute that holds it (``_enable_dsv4_adp_dummy_fixes``).
        models: ``pretrained_config.model_type`` values it is on for; None: any model.
        models_with_overlap: with the overlap scheduler it is on only for these models (None: no
            such restriction); without it, ``models`` applies.
        pp1: on only with ``pp_size == 1``.
        non_overlap: on only without the overlap scheduler.
        transceiver: the path also needs a KV-cache transceiver (disaggregated serving).
        evidence: where upstream shows it (file and test), for reports.
    """

    flag: str
    models: Optional[frozenset] = None
    models_with_overlap: Optional[frozenset] = None
    pp1: bool = True
    non_overlap: bool = False
    transceiver: bool = True
    evidence: str = ""

    def model_set(self, config: RunConfig) -> Optional[frozenset]:
        """The models the gate is on for under this configuration (None: the model does not matter)."""
        if config.overlap_scheduler and self.models_with_overlap is not None:
            return self.models_with_overlap if self.models is None else \
                self.models_with_overlap & self.models
        return self.models

    def state(self, config: RunConfig) -> GateState:
        """OPEN, CLOSED, or UNKNOWN when only the (unrecorded) model would decide."""
        if self.transceiver and not config.disaggregated:
            return GateState.CLOSED
        if self.pp1 and config.pp_size != 1:
            return GateState.CLOSED
        if self.non_overlap and config.overlap_scheduler:
            return GateState.CLOSED
        models = self.model_set(config)
        if models is None:
            return GateState.OPEN
        if config.model_arch is None:
            return GateState.UNKNOWN
        return GateState.OPEN if config.model_arch in models else GateState.CLOSED

    def is_open(self, config: RunConfig) -> bool:
        """True when OPEN; an UNKNOWN gate counts as closed (the model is assumed outside it)."""
        return self.state(config) is GateState.OPEN

    def describe(self) -> str:
        parts = []
        if self.models is not None:
            parts.append("model " + " or ".join(sorted(self.models)))
        if self.models_with_overlap is not None:
            parts.append("with the overlap scheduler only model "
                         + " or ".join(sorted(self.models_with_overlap)))
        if self.pp1:
            parts.append("pp_size 1")
        if self.non_overlap:
            parts.append("no overlap scheduler")
        if self.transceiver:
            parts.append("a KV-cache transceiver")
        return f"{self.flag}: " + ", ".join(parts)


#: PR #16279 (merged): ``should_enable_dsv4_adp_dummy_fixes(model_type, mapping)``.
DSV4_FIXES_GATE = Gate(
    flag="_enable_dsv4_adp_dummy_fixes", models=frozenset({"deepseek_v4"}),
    evidence=("model_engine.py sets it from pretrained_config.model_type and the mapping "
              "(_util.should_enable_dsv4_adp_dummy_fixes); its unit test: deepseek_v4 pp 1 on, "
              "deepseek_v3 pp 1 off, deepseek_v4 pp 2 off"))
#: PR #16921: ``should_enable_adp_dummy_fixes(mapping)`` (no model condition).
ADP_FIXES_GATE = Gate(
    flag="_enable_adp_dummy_fixes",
    evidence="_util.should_enable_adp_dummy_fixes: its unit test: pp 1 on, pp 2 off")
#: PR #16921: ``should_enable_scheduler_aware_adp_dummy(model_type, mapping, disable_overlap)``.
SCHEDULER_AWARE_GATE = Gate(
    flag="_enable_scheduler_aware_adp_dummy",
    models_with_overlap=frozenset({"deepseek_v4", "qwen3_5_moe"}),
    evidence=("_util.should_enable_scheduler_aware_adp_dummy; its scope test: kimi_k2 pp 1 "
              "without overlap on, kimi_k2 with overlap off, deepseek_v4 and qwen3_5_moe with "
              "overlap on, deepseek_v4 pp 2 off (models beyond those named are assumed off with "
              "overlap)"))
#: PR #16921: ``should_enable_non_overlap_adp_forward_intent(mapping, disable_overlap)``.
FORWARD_INTENT_GATE = Gate(
    flag="_enable_non_overlap_adp_forward_intent", non_overlap=True,
    evidence=("_util.should_enable_non_overlap_adp_forward_intent; its scope test: pp 1 without "
              "overlap on, pp 1 with overlap off, pp 2 off"))
#: PR #17379: ``_pad_empty_attention_dp_batch`` runs in ``_prepare_and_schedule_batch``, which
#: pipeline parallelism does not call; it needs no transceiver.
POSTPAD_GATE = Gate(flag="_pad_empty_attention_dp_batch (not under pipeline parallelism)",
                    transceiver=False,
                    evidence="py_executor.py _pad_empty_attention_dp_batch docstring")
#: The fixed path of a build gated on ``pp_size == 1`` only (``Policy.scheduler_gate_pp1``).
PP1_GATE = Gate(flag="pp_size 1")


@dataclasses.dataclass(frozen=True)
class GateVerdict:
    """Which gated paths of a version apply to a run (``Policy.applies_to``).

    Fields:
        policy: the version's name.
        paths: ``{path: GateState}`` for every gated path the version has: ``fixed_count`` (the
            count the fix introduced), ``transactional_dummy`` (pending dummy rolled back, a
            refused dummy tolerated), ``forward_intent``, ``postpad``.
        models: when some path is UNKNOWN, the models that would open it (sorted).
    """

    policy: str
    paths: dict
    models: tuple[str, ...] = ()

    @property
    def unknown(self) -> bool:
        """Some path depends on the model, which the run does not name."""
        return any(s is GateState.UNKNOWN for s in self.paths.values())

    def open_paths(self) -> list[str]:
        return [k for k, s in self.paths.items() if s is GateState.OPEN]

    def closed_paths(self) -> list[str]:
        return [k for k, s in self.paths.items() if s is GateState.CLOSED]

    def summary(self) -> str:
        """``fixed_count open, transactional_dummy depends on the model (deepseek_v4)`` style."""
        if not self.paths:
            return f"{self.policy}: no gated path"
        words = {GateState.OPEN: "applies", GateState.CLOSED: "does not apply",
                 GateState.UNKNOWN: "applies only if the model is " + " or ".join(
                     model_name(m) for m in self.models)}
        return f"{self.policy}: " + "; ".join(f"{k} {words[s]}" for k, s in self.paths.items())

    def to_json(self) -> dict[str, object]:
        return {"policy": self.policy, "paths": {k: s.value for k, s in self.paths.items()},
                "models": list(self.models)}


@dataclasses.dataclass(frozen=True)
class Policy:
    """One executor version's behaviour around the pad dummy.

    Fields:
        name: stable catalogue name (``prefix-2026``).
        title: one-line description.
        prs: upstream pull requests it models (``"#16161"``), most relevant first.
        disagg_predicate: the count with a KV-cache transceiver where ``count_gate`` is open.
        aggregated_predicate: the count without a transceiver (every version: ``len(active)``).
        fallback_predicate: the count with a transceiver where ``count_gate`` is closed.
        count_gate: the gate of ``disagg_predicate`` (None: it applies with any transceiver).
        fixes_gate: the gate of the transactional dummy (``rollback_on_skip``, ``alloc_failure``);
            None: those apply wherever a transceiver exists.
        intent_gate: where the pad decision uses the all-reduced forward intent (PR #16921,
            non-overlap): nobody is padded when no rank has schedulable work, the dummy's role is
            the intent (context wins over generation). None: never.
        scheduler_gate_pp1: shorthand for ``count_gate = fixes_gate = PP1_GATE`` when those are
            None (kept for versions built from a source, ``replay.trtllm_source``).
        cap: ``expected_num_active_requests`` is capped at ``max_num_active_requests`` (PR #13347).
        entry_check: assert or warn on a surplus at pad entry.
        kv_precheck: where the KV-capacity precheck runs (:class:`KvPrecheck`); a frame's
            ``kv_precheck_ok`` false is a skipped pad where it runs, a refused allocation elsewhere.
        alloc_failure: a refused dummy (``add_dummy_requests`` returned None or raised after
            the precheck, if any, passed) where the transactional path applies.
        alloc_failure_outside_gate: a refused dummy elsewhere (None: as ``alloc_failure``).
        rollback_on_skip: a dummy padded this iteration on the transactional path is rolled back
            by ``_finalize_adp_dummy_allocation(False)`` when the fleet skips.
        postpad_empty_batch: after scheduling, a rank with active requests and an empty batch gets
            a generation dummy if below the cap (PR #17379); it is pending on every path, so a
            skipped iteration rolls it back whatever the fixes gate says.
        dkv_skips_pads: with ``RunConfig.dkv_enabled`` both pads return at once (no entry
            check, no dummy): upstream's ``test_dkv_skips_rank_local_dummy_allocation``.
        dummy_role: how the pad dummy's role is chosen outside the forward-intent path.
        merged: the version shipped (False: a proposal that was never merged).
        revision: an upstream revision that has this behaviour, where one was read.
        notes: further facts worth stating in reports.
        pad_hook: when set, the pad step of each (iter, rank) is decided by calling it with a
            :class:`FrameView` (real TensorRT-LLM code or a user's candidate, issue #6) instead of
            the vectorised predicate; the rest of the loop follows this policy's other fields.
        source: where a hooked policy's code came from (path, revision), for reports.
    """

    name: str
    title: str
    prs: tuple[str, ...]
    disagg_predicate: Predicate
    aggregated_predicate: Predicate = Predicate.ALL
    scheduler_gate_pp1: bool = False
    cap: bool = True
    entry_check: EntryCheck = EntryCheck.ASSERT
    alloc_failure: AllocFailure = AllocFailure.CRASH
    kv_precheck: KvPrecheck = KvPrecheck.NONE
    rollback_on_skip: bool = False
    postpad_empty_batch: bool = False
    notes: str = ""
    pad_hook: Optional[Callable[["FrameView"], "PadOutcome"]] = dataclasses.field(
        default=None, compare=False, repr=False)
    source: str = ""
    fallback_predicate: Predicate = Predicate.NOT_AWAITING_KV
    count_gate: Optional[Gate] = None
    fixes_gate: Optional[Gate] = None
    intent_gate: Optional[Gate] = None
    alloc_failure_outside_gate: Optional[AllocFailure] = None
    dummy_role: DummyRole = DummyRole.GENERATION
    merged: bool = True
    revision: str = ""
    dkv_skips_pads: bool = False

    # ----------------------------------------------------------------- gates
    def _count_gate(self) -> Optional[Gate]:
        return self.count_gate or (PP1_GATE if self.scheduler_gate_pp1 else None)

    def _fixes_gate(self) -> Optional[Gate]:
        return self.fixes_gate or (PP1_GATE if self.scheduler_gate_pp1 else None)

    def gates(self) -> dict[str, Gate]:
        """Every gated path of this version, by path name (see :class:`GateVerdict`)."""
        out: dict[str, Gate] = {}
        if self._count_gate() is not None:
            out["fixed_count"] = self._count_gate()  # type: ignore[assignment]
        if self._fixes_gate() is not None and (self.rollback_on_skip or self.alloc_failure_outside_gate
                                               not in (None, self.alloc_failure)):
            out["transactional_dummy"] = self._fixes_gate()  # type: ignore[assignment]
        if self.intent_gate is not None:
            out["forward_intent"] = self.intent_gate
        if self.postpad_empty_batch:
            out["postpad"] = POSTPAD_GATE
        return out

    def applies_to(self, config: RunConfig) -> GateVerdict:
        """Which of this version's gated paths apply to a run of ``config`` (for reports: a gated
        fix whose path is closed for the run still has the crashing code)."""
        paths = {k: g.state(config) for k, g in self.gates().items()}
        models = sorted({m for k, g in self.gates().items() if paths[k] is GateState.UNKNOWN
                         for m in (g.model_set(config) or ())})
        return GateVerdict(policy=self.name, paths=paths, models=tuple(models))

    def open_paths(self, config: RunConfig) -> list[str]:
        """The gated paths that apply to ``config`` (an UNKNOWN one does not)."""
        return self.applies_to(config).open_paths()

    def model_dependent(self, config: RunConfig) -> tuple[str, ...]:
        """The models that would change this version's behaviour on a run whose model is unknown
        (empty when the run names its model or no gate reads it)."""
        return self.applies_to(config).models

    def config_seen(self, config: RunConfig) -> object:
        """What the ``pad_hook`` can tell of ``config`` (configurations with one value decide
        alike in the hook): the whole configuration unless the hook says less
        (``replay.trtllm_source.SourcePolicy``)."""
        return config

    def gated(self, config: RunConfig) -> bool:
        """True when the version's transactional path (pending dummy, tolerated refusal) applies."""
        if not config.disaggregated:
            return False
        gate = self._fixes_gate()
        return gate is None or gate.is_open(config)

    def predicate(self, config: RunConfig) -> Predicate:
        """The predicate this version uses for a run of this configuration."""
        if not config.disaggregated:
            return self.aggregated_predicate
        if self.uses_forward_intent(config):
            return Predicate.SCHEDULER  # the intent path counts with the scheduler's test
        gate = self._count_gate()
        if gate is not None and not gate.is_open(config):
            return self.fallback_predicate
        return self.disagg_predicate

    def uses_forward_intent(self, config: RunConfig) -> bool:
        """The pad decision follows the all-reduced forward intent (newest, non-overlap)."""
        return self.intent_gate is not None and self.intent_gate.is_open(config)

    def alloc_failure_for(self, config: RunConfig) -> AllocFailure:
        """What a refused dummy does on a run of this configuration."""
        if self.gated(config) or self.alloc_failure_outside_gate is None:
            return self.alloc_failure
        return self.alloc_failure_outside_gate

    def pads_run(self, config: RunConfig) -> bool:
        """Whether the pad methods do anything on a run of this configuration: attention DP on,
        and not a dkv run of a version whose pads return at once under dkv."""
        return bool(config.enable_attention_dp) and not (self.dkv_skips_pads
                                                         and config.dkv_enabled)

    def prechecks(self, config: RunConfig) -> bool:
        """Whether ``_has_adp_dummy_kv_capacity`` runs before the pad allocation on a run of this
        configuration (a failed precheck skips the pad; see :class:`KvPrecheck`)."""
        if self.kv_precheck is KvPrecheck.EVERY_PATH:
            return True
        return self.kv_precheck is KvPrecheck.GATED and self.gated(config)

    def rolls_back(self, config: RunConfig) -> bool:
        """Whether a pending pad-step dummy is rolled back on a skipped iteration for this
        configuration (post-schedule dummies: :meth:`postpads`, always rolled back)."""
        return self.rollback_on_skip and self.gated(config)

    def postpads(self, config: RunConfig) -> bool:
        """Whether the post-schedule pad (PR #17379) runs for this configuration."""
        return self.postpad_empty_batch and POSTPAD_GATE.is_open(config)

    @property
    def expected_rule(self) -> str:
        """``"capped"`` or ``"uncapped"``: how this version computes ``expected`` (§5)."""
        return "capped" if self.cap else "uncapped"

    def describe(self) -> dict[str, object]:
        """A plain summary for reports and ``--json`` output."""
        return {
            "name": self.name,
            "title": self.title,
            "prs": list(self.prs),
            "merged": self.merged,
            "revision": self.revision,
            "predicate_disaggregated": self.disagg_predicate.describe(),
            "predicate_outside_gate": self.fallback_predicate.describe(),
            "predicate_aggregated": self.aggregated_predicate.describe(),
            "gates": {k: g.describe() for k, g in self.gates().items()},
            "scheduler_gate_pp1": self.scheduler_gate_pp1,
            "expected_capped": self.cap,
            "entry_check": self.entry_check.value,
            "alloc_failure": self.alloc_failure.value,
            "alloc_failure_outside_gate": (self.alloc_failure_outside_gate or self.alloc_failure).value,
            "kv_precheck": self.kv_precheck.value,
            "dummy_role": self.dummy_role.value,
            "removal_paths": self.removal_paths(),
            "rollback_on_skip": self.rollback_on_skip,
            "postpad_empty_batch": self.postpad_empty_batch,
            "dkv_skips_pads": self.dkv_skips_pads,
            "notes": self.notes,
        }

    def removal_paths(self) -> list[str]:
        """Where a dummy can be removed under this version (domain doc §7)."""
        paths = ["update_states_tp (last element only, when can_queue)",
                 "handle_responses (anywhere in the list, when responses are handled)"]
        if self.rollback_on_skip:
            gate = self._fixes_gate()
            where = f" where {gate.describe()}" if gate is not None else ""
            paths.append("finalize_adp_dummy_allocation(can_queue=False) rollback of a pending "
                         "dummy" + where)
        if self.postpad_empty_batch:
            paths.append("finalize_adp_dummy_allocation(can_queue=False) rollback of a post-schedule "
                         "dummy (every path)")
        return paths


@dataclasses.dataclass(frozen=True)
class FrameView:
    """What a per-frame pad hook sees: one rank's ``active_requests`` at pad entry.

    Fields:
        iter, rank: the frame's key.
        requests: ``(request_id, state_value, is_dummy)`` in list order, the policy's carried
            dummy (if any) included at its position.
        expected: ``expected_num_active_requests`` this iteration.
        config: the run configuration.
        alloc_ok: False when ``add_dummy_requests`` must return None this iteration.
        kv_precheck_ok: False when ``_has_adp_dummy_kv_capacity`` must say the dummy cannot fit
            (a dummy that cannot fit is refused too: ``add_dummy_requests`` returns None).
        new_requests: how many real requests were first seen on this rank this iteration (the
            recording routed them; see ``replay.step.over_expected`` for why this matters).
    """

    iter: int
    rank: int
    requests: tuple[tuple[int, int, bool], ...]
    expected: int
    config: RunConfig
    alloc_ok: bool = True
    new_requests: int = 0
    kv_precheck_ok: bool = True


@dataclasses.dataclass(frozen=True)
class PadOutcome:
    """What a pad hook decided for one frame.

    Fields:
        padded: a dummy was appended.
        role: ``"generation"`` or ``"context"`` for the appended dummy.
        alloc_failed: the dummy was wanted but could not be allocated (and was skipped).
        crash: the code raised; ``"ExceptionType: message"`` (the run stops here).
        surplus_warning: the code warned about ``len(active) > expected`` and went on.
        warnings: every warning the code logged, verbatim.
    """

    padded: bool
    role: str = "generation"
    alloc_failed: bool = False
    crash: Optional[str] = None
    surplus_warning: bool = False
    warnings: tuple[str, ...] = ()
