"""One executor iteration of every attention-DP rank, as array arithmetic (domain doc §4-7).

:func:`decide` is the single step function of the replay: the engine calls it once on
``(I, R)`` arrays (every iteration at once, assuming no carried dummies) and then once per
``(R,)`` row for the few iterations that follow a skip with surviving dummies; the simulator
calls it one iteration at a time. Arrays have shape ``(..., R)``: the last axis is the rank and
fleet-wide decisions (the all-gathers) reduce over it.

Per rank, in loop order (see ``replay.walk`` for the assumptions):

1. ``active = n_real + carried`` (what ``gather_all_rank_states`` all-gathers; a leaked dummy counts).
2. ``expected``: the recorded value when there is one and every rank's replayed count equals its
   recorded count, else computed (§5): ``max(ceil(multiplier * ceil(sum(active) / tp)),
   max(active - new_real))``, then ``min(., cap)`` when the policy caps.
3. Entry check (ADP on): ``active > expected`` asserts (crash) or warns (PR #17278). The
   requests fetched this iteration are left out of the comparison (see :func:`over_expected`).
4. Pad: ``needs = expected > 0 and sched_real + carried == 0`` (on the forward-intent path of
   PR #16921: the fleet's all-reduced intent is not NONE and no real request is schedulable).
   KV capacity has three outcomes per frame: the dummy fits; the precheck
   (``_has_adp_dummy_kv_capacity``) fails (``kv_precheck_ok`` false): where the version runs the
   precheck (``Policy.prechecks``) the pad is skipped with a warning, elsewhere the allocation is
   refused; the precheck passes but the allocation is refused (``alloc_ok`` false). A refused
   allocation crashes (TypeError on None) or is skipped with a warning, per the gates.
5. Batch: the recorded real batch, else ``min(window_real, max_batch_size)``; plus the dummy
   (the total stays within ``max_batch_size``).
6. Post-pad (PR #17379): an empty batch on a rank with active requests gets a generation dummy
   (below the cap, when the dummy fits: a failed precheck or a refused allocation leaves none).
7. ``can_queue`` = no zero batch in the fleet. With it every dummy is removed (by
   ``_update_request_states_tp`` when last, else ``_handle_responses``); without it a dummy padded
   this iteration is rolled back where the policy does so (a pad-step dummy on its transactional
   path, a post-schedule dummy always), every other dummy survives.

Example (two ranks, prefix-2026, rank 1 holds only a GENERATION_TO_COMPLETE request):
    >>> import numpy as np
    >>> from replay import RunConfig, get_policy
    >>> inp = StepInputs.make(n_real=[1, 1], sched_real=[0, 1], window_real=[0, 0],
    ...                       all_before_ctx=[True, False])
    >>> out = decide(get_policy("prefix-2026"), RunConfig(tp_size=2, disaggregated=True), inp)
    >>> out.padded.tolist(), out.batch.tolist(), bool(out.can_queue[0]), out.survives.tolist()
    ([True, False], [1, 0], False, [True, False])
"""
from __future__ import annotations

import dataclasses

import numpy as np

from replay.config import RunConfig
from replay.policy import AllocFailure, EntryCheck, Policy

#: Forward intent codes (upstream's ``_ADPForwardIntent`` order: the all-reduce takes the MAX,
#: so context wins over generation, and NONE means no rank has schedulable work).
INTENT_NONE = 0
INTENT_GENERATION = 1
INTENT_CONTEXT = 2

#: ``StepOutputs.expected_source`` codes.
EXPECTED_COMPUTED = 0
EXPECTED_RECORDED = 1
EXPECTED_SOURCE_NAMES = ("computed", "recorded")

#: ``StepOutputs.removed_path`` codes (0: no dummy removed on this rank this iteration;
#: :func:`decide` sums them from 0/1 masks, so ``REMOVED_NONE`` must stay 0).
REMOVED_NONE = 0
REMOVED_UPDATE_STATES_TP = 1
REMOVED_HANDLE_RESPONSES = 2
REMOVED_ROLLBACK = 3
REMOVAL_PATH_NAMES = (None, "update_states_tp", "handle_responses", "rollback")

#: ``StepOutputs.crash_kind`` codes.
CRASH_NONE = 0
CRASH_ASSERT = 1
CRASH_ALLOC_NONE = 2
CRASH_HOOK = 3
CRASH_KIND_NAMES = (None, "assert", "dummy_alloc_none", "hook")


def _arr(v, dtype) -> np.ndarray:
    return np.asarray(v, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class StepInputs:
    """What each rank holds at pad entry, as ``(..., R)`` arrays (real requests only).

    Fields:
        n_real: real requests in ``active_requests`` (recorded dummies excluded).
        sched_real: real requests the policy's pad predicate counts as schedulable.
        window_real: real requests in the micro-batch scheduler window.
        new_real: real requests fetched this iteration (first seen on the rank now).
        all_before_ctx: the rank has real requests and all are in states < CONTEXT_INIT
            (a dummy padded there takes the context role, §9).
        alloc_ok: ``add_dummy_requests`` succeeds this iteration (when the precheck passes).
        kv_precheck_ok: ``_has_adp_dummy_kv_capacity`` says the dummy fits this iteration
            (false: it does not fit, so an allocation without the precheck is refused too).
            Default: True everywhere.
        real_batch: real requests the scheduler takes (at most ``window_real``), or -1 to use
            ``min(window_real, max_batch_size)``. From a recording it excludes every recorded
            dummy, the post-schedule one included (exact where the frame records
            ``postpadded``, see ``replay.frames``), so step 6 re-decides that dummy.
        expected_recorded: the recorded ``expected_num_active_requests`` or -1.
        recorded_counts: the recorded ``len(active_requests)`` (dummies included) or -1; the
            recorded expected is used only when every rank's replayed count equals it.
        carried: a dummy of this policy survived an earlier iteration on the rank.
        carried_last: that dummy is still the last element of ``active_requests``.
        intent: the rank's forward intent (``INTENT_*``): CONTEXT if a real request the
            scheduler would take is in CONTEXT_INIT (or ENCODER_INIT), else GENERATION if any
            is, else NONE. Read only where the policy uses the forward intent (PR #16921).
        role_context: the version's dummy role this iteration is context (outside the
            forward-intent path; ``RunFrames.dummy_role_context``).
    """

    n_real: np.ndarray
    sched_real: np.ndarray
    window_real: np.ndarray
    new_real: np.ndarray
    all_before_ctx: np.ndarray
    alloc_ok: np.ndarray
    real_batch: np.ndarray
    expected_recorded: np.ndarray
    recorded_counts: np.ndarray
    carried: np.ndarray
    carried_last: np.ndarray
    intent: np.ndarray = None  # type: ignore[assignment]
    role_context: np.ndarray = None  # type: ignore[assignment]
    kv_precheck_ok: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.kv_precheck_ok is None:
            object.__setattr__(self, "kv_precheck_ok", np.ones(np.shape(self.n_real), bool))
        if self.intent is None:
            object.__setattr__(self, "intent", np.where(np.asarray(self.window_real) > 0,
                                                        INTENT_GENERATION, INTENT_NONE).astype(np.int8))
        if self.role_context is None:
            object.__setattr__(self, "role_context", np.zeros(np.shape(self.n_real), bool))

    @classmethod
    def make(cls, n_real, *, sched_real=None, window_real=None, new_real=0, all_before_ctx=False,
             alloc_ok=True, real_batch=-1, expected_recorded=-1, recorded_counts=-1,
             carried=False, carried_last=True, intent=None, role_context=False,
             kv_precheck_ok=True) -> StepInputs:
        """Build inputs from array-likes, broadcasting scalars to ``n_real``'s shape.

        ``sched_real`` and ``window_real`` default to ``n_real`` (every request schedulable);
        ``intent`` defaults to GENERATION where a window request is held, else NONE.
        """
        n = _arr(n_real, np.int64)
        shape = n.shape

        def b(v, dtype):
            return np.broadcast_to(_arr(v, dtype), shape).copy()

        return cls(n_real=n,
                   sched_real=b(n if sched_real is None else sched_real, np.int64),
                   window_real=b(n if window_real is None else window_real, np.int64),
                   new_real=b(new_real, np.int64), all_before_ctx=b(all_before_ctx, bool),
                   alloc_ok=b(alloc_ok, bool), real_batch=b(real_batch, np.int64),
                   expected_recorded=b(expected_recorded, np.int64),
                   recorded_counts=b(recorded_counts, np.int64), carried=b(carried, bool),
                   carried_last=b(carried_last, bool),
                   intent=None if intent is None else b(intent, np.int8),
                   role_context=b(role_context, bool), kv_precheck_ok=b(kv_precheck_ok, bool))

    def take(self, index) -> StepInputs:
        """The inputs of some iterations (``index`` applies to the leading axes)."""
        return StepInputs(**{f.name: getattr(self, f.name)[index] for f in dataclasses.fields(self)})

    def with_carried(self, carried, carried_last) -> StepInputs:
        return dataclasses.replace(self, carried=_arr(carried, bool), carried_last=_arr(carried_last, bool))


def local_intent(states, config: RunConfig) -> int:
    """One rank's forward intent from its real requests' state values (PR #16921): CONTEXT if a
    request the scheduler would take is in CONTEXT_INIT or ENCODER_INIT, else GENERATION if any
    request is schedulable, else NONE."""
    from replay.policy import Predicate
    from replay.states import ALL_STATES, RequestState
    mask = Predicate.SCHEDULER.mask(config)
    col = {int(st): i for i, st in enumerate(ALL_STATES)}
    ok = [int(v) for v in states if bool(mask[col[int(v)]])]
    if any(v in (int(RequestState.CONTEXT_INIT), int(RequestState.ENCODER_INIT)) for v in ok):
        return INTENT_CONTEXT
    return INTENT_GENERATION if ok else INTENT_NONE


def inputs_from_states(policy: Policy, config: RunConfig, ranks, *, new_real=0, alloc_ok=True,
                       real_batch=-1, expected_recorded=-1, recorded_counts=-1, carried=False,
                       carried_last=True, role_context=False, kv_precheck_ok=True) -> StepInputs:
    """Inputs of one iteration from each rank's real request states (ints or names).

    Args:
        ranks: one sequence of states per rank, e.g. ``[[13, 13], ["GENERATION_TO_COMPLETE"]]``.
        Other arguments: scalars or ``(R,)`` sequences, as in :class:`StepInputs`.

    Example:
        >>> from replay import get_policy, RunConfig
        >>> inp = inputs_from_states(get_policy("fix-16161"), RunConfig(tp_size=2, disaggregated=True),
        ...                          [[14], [13, 13]])
        >>> inp.sched_real.tolist(), inp.window_real.tolist()
        ([0, 2], [0, 2])
    """
    from replay.states import ALL_STATES, RequestState, micro_batch_window, parse_state
    pmask = policy.predicate(config).mask(config)
    wmask = micro_batch_window(config.encoder_decoder).mask()
    col = {int(st): i for i, st in enumerate(ALL_STATES)}
    rows = [[int(parse_state(x)) for x in states] for states in ranks]
    n = [len(r) for r in rows]
    intents = [local_intent(r, config) for r in rows]
    return StepInputs.make(
        n, sched_real=[sum(bool(pmask[col[v]]) for v in r) for r in rows],
        window_real=[sum(bool(wmask[col[v]]) for v in r) for r in rows],
        all_before_ctx=[bool(r) and all(v < int(RequestState.CONTEXT_INIT) for v in r) for r in rows],
        new_real=new_real, alloc_ok=alloc_ok, real_batch=real_batch,
        expected_recorded=expected_recorded, recorded_counts=recorded_counts, carried=carried,
        carried_last=carried_last, intent=intents, role_context=role_context,
        kv_precheck_ok=kv_precheck_ok)


@dataclasses.dataclass(frozen=True)
class PadDecision:
    """The pad step decided elsewhere (a policy's ``pad_hook``), as ``(..., R)`` arrays.

    Fields:
        padded: a dummy was appended.
        role_context: it has the context role.
        alloc_failed: a dummy was wanted but not allocated (no crash): a failed KV precheck or
            a tolerated refusal.
        crash: the pad step raised (the run stops this iteration).
        surplus: the surplus warning was logged.
    """

    padded: np.ndarray
    role_context: np.ndarray
    alloc_failed: np.ndarray
    crash: np.ndarray
    surplus: np.ndarray


@dataclasses.dataclass(frozen=True)
class StepOutputs:
    """Every decision of one or many iterations, ``(..., R)`` arrays.

    Fields:
        active: ``len(active_requests)`` all-gathered at fetch (carried dummy included).
        expected: ``expected_num_active_requests``.
        expected_source: ``EXPECTED_RECORDED`` or ``EXPECTED_COMPUTED``.
        surplus: ``active > expected`` at pad entry (ADP on).
        crash: the rank dies this iteration (assert, failed allocation, hook exception).
        crash_kind: ``CRASH_*`` code.
        padded: the pad step appended a dummy.
        role_context: that dummy has the context role.
        alloc_failed: a dummy was wanted but could not be allocated (skipped with a warning).
        postpadded: a generation dummy was appended after scheduling (PR #17379).
        batch: the batch size offered to ``_can_queue`` (dummy included).
        can_queue: the fleet-wide decision (same on every rank).
        can_queue_this_rank: ``batch > 0``.
        processed_prev: the rank processed its previous batch (overlap loop: ``can_queue or not
            can_queue_this_rank``; non-overlap: ``can_queue``).
        removed_path: ``REMOVED_*`` code of the dummy removed on this rank this iteration.
        survives: a dummy is alive on the rank after this iteration (carried into the next).
        leaked_now: a dummy survived this (skipped) iteration.
    """

    active: np.ndarray
    expected: np.ndarray
    expected_source: np.ndarray
    surplus: np.ndarray
    crash: np.ndarray
    crash_kind: np.ndarray
    padded: np.ndarray
    role_context: np.ndarray
    alloc_failed: np.ndarray
    postpadded: np.ndarray
    batch: np.ndarray
    can_queue: np.ndarray
    can_queue_this_rank: np.ndarray
    processed_prev: np.ndarray
    removed_path: np.ndarray
    survives: np.ndarray
    leaked_now: np.ndarray


def computed_expected(total, floor, tp_size: int, multiplier: float, cap: int | None) -> np.ndarray:
    """``expected_num_active_requests`` as the executor computes it (§5), the one place of the rule.

    ``max(ceil(multiplier * ceil(total / tp_size)), floor)``, then ``min(., cap)`` when ``cap`` is
    given (a capped build). ``total`` is the all-gathered sum of ``len(active_requests)`` over the
    ranks and ``floor`` the largest ``len(active_requests)`` less the requests fetched this
    iteration, per iteration (arrays of one shape). The replay's :func:`expected_step` and the
    per-frame reconstruction (``forensics.reconstruct.frame_state``) both call it.

    Example:
        >>> computed_expected(np.array([7]), np.array([2]), 4, 1.0, 3).tolist()
        [2]
    """
    fair = -(-np.asarray(total) // tp_size)
    computed = np.maximum(np.ceil(multiplier * fair).astype(np.int64), np.asarray(floor))
    return computed if cap is None else np.minimum(computed, cap)


def expected_step(policy: Policy, config: RunConfig, inputs: StepInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 1-2: ``(active, expected, expected_source)`` for ``(..., R)`` inputs."""
    active = inputs.n_real + inputs.carried.astype(np.int64)
    computed = computed_expected(active.sum(axis=-1, keepdims=True),
                                 (active - inputs.new_real).max(axis=-1, keepdims=True),
                                 config.tp_size, config.expected_multiplier,
                                 config.cap if policy.cap else None)
    computed = np.broadcast_to(computed, active.shape)
    counts_match = (active == inputs.recorded_counts).all(axis=-1, keepdims=True)
    use_rec = (inputs.expected_recorded >= 0) & counts_match
    expected = np.where(use_rec, inputs.expected_recorded, computed)
    source = np.where(use_rec, EXPECTED_RECORDED, EXPECTED_COMPUTED).astype(np.int8)
    return active, expected, source


def over_expected(active: np.ndarray, expected: np.ndarray, inputs: "StepInputs") -> np.ndarray:
    """The entry check's ``len(active_requests) > expected_num_active_requests``, counterfactually.

    The router (§5) only places new requests on ranks below ``expected``, so under consistent
    routing a rank's new requests never push it over: ``active > expected`` holds exactly when
    ``active - new_real > expected``. A replay under another policy keeps the recording's routing,
    which was decided with the recording's ``expected`` (inflated or not by its own dummies); a
    new request the replayed ``expected`` leaves no room for would have gone to another rank, so
    only the requests the rank already held (its carried dummy included) can trip the check.
    """
    return (active - inputs.new_real) > expected


def pad_step(policy: Policy, config: RunConfig, inputs: StepInputs, active: np.ndarray,
             expected: np.ndarray, over: np.ndarray | None = None) -> PadDecision:
    """Steps 3-4, the catalogue's vectorised pad decision (entry check and padding).

    Outside the forward-intent path: ``needs = expected > 0 and schedulable == 0`` (a warning
    version first raises ``expected`` to ``len(active_requests)``, as upstream does). On it
    (PR #16921, non-overlap): ``needs = fleet intent != NONE and no real request schedulable``,
    a live dummy blocks a second one, and the role is the fleet intent (context wins).
    ``over``: :func:`over_expected` of these arrays when the caller has it.
    """
    adp = policy.pads_run(config)
    over = over_expected(active, expected, inputs) if over is None else over
    # The entry check's outcomes and the wish for a dummy are an array or nothing: an array
    # and'ed with a Python bool is a copy of either (measured: a fifth of a window's decide);
    # ``warn`` and ``crash`` are outputs: never the caller's array, nor one array twice.
    nothing = np.zeros(over.shape, bool)
    over = over if adp else nothing
    assert_crash = over if policy.entry_check is EntryCheck.ASSERT else nothing
    warn = over.copy() if policy.entry_check is EntryCheck.WARN else nothing
    carried = inputs.carried
    if policy.uses_forward_intent(config):
        fleet = inputs.intent.max(axis=-1, keepdims=True)  # tp_allreduce(MAX) over the ranks
        fleet = np.broadcast_to(fleet, inputs.intent.shape)
        needs = (fleet != INTENT_NONE) & (inputs.sched_real == 0) & ~carried & ~assert_crash
        role = fleet == INTENT_CONTEXT
    else:
        exp_eff = np.where(warn, np.maximum(expected, active), expected) \
            if policy.entry_check is EntryCheck.WARN else expected   # else ``warn`` is all False
        # ``sched_real + carried == 0``: counts are never negative
        needs = (exp_eff > 0) & (inputs.sched_real == 0) & ~carried & ~assert_crash
        role = inputs.role_context
    needs = needs if adp else nothing
    fits, refused = kv_outcomes(policy, config, inputs)
    crash = (assert_crash | (needs & refused)
             if policy.alloc_failure_for(config) is AllocFailure.CRASH else assert_crash.copy())
    padded = needs & fits
    return PadDecision(padded=padded, role_context=padded & role,
                       alloc_failed=needs & ~fits & ~crash, crash=crash, surplus=warn)


def kv_outcomes(policy: Policy, config: RunConfig, inputs: StepInputs) -> tuple[np.ndarray, np.ndarray]:
    """``(fits, refused)`` per rank for a dummy the pad step wants.

    ``fits``: the precheck (where it runs) passes and ``add_dummy_requests`` returns a dummy.
    ``refused``: the allocation is attempted and refused (None or out of pages): the precheck
    passed and ``alloc_ok`` is false, or the version runs no precheck on this path and the dummy
    does not fit (``kv_precheck_ok`` false). Neither: the precheck stopped the pad.

    Example (a version with the every-path precheck: 000515e on):
        >>> from replay import RunConfig, get_policy
        >>> inp = StepInputs.make([1, 1, 1], kv_precheck_ok=[True, False, True],
        ...                       alloc_ok=[True, True, False])
        >>> f, r = kv_outcomes(get_policy("tolerant-17278"), RunConfig(tp_size=3), inp)
        >>> f.tolist(), r.tolist()
        ([True, False, False], [False, False, True])
    """
    fits = inputs.kv_precheck_ok & inputs.alloc_ok
    if policy.prechecks(config):
        return fits, inputs.kv_precheck_ok & ~inputs.alloc_ok
    return fits, ~fits


def rows_with_any(a: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(a.any(axis=1))`` of an ``(I, R)`` bool array, from its True cells when
    they are few (dummies that survive, crashes: rare); ``any`` over rows of a few dozen ranks
    is a slow reduction (measured on (2048, 32): 57 us, from 50 cells 18 us)."""
    k = np.count_nonzero(a)
    if not k:
        return np.zeros(0, np.intp)
    if k > a.shape[0] // 8:
        return np.flatnonzero(a.any(axis=1))
    return np.unique(np.flatnonzero(a) // a.shape[1])


def decide(policy: Policy, config: RunConfig, inputs: StepInputs,
           pad: PadDecision | None = None, expected: tuple | None = None) -> StepOutputs:
    """Run one iteration (or many independent ones) of every rank.

    Args:
        policy: the executor version.
        config: the run configuration (``tp_size`` must equal the rank axis length).
        inputs: ``(..., R)`` arrays, see :class:`StepInputs`.
        pad: the pad step already decided (policies with a ``pad_hook``); default: the
            vectorised catalogue semantics of :func:`pad_step`.
        expected: :func:`expected_step` of these inputs already computed (a streamed
            replay's policies of one cap share it); default: computed here.

    Returns:
        :class:`StepOutputs`. Rows with a crash are still filled; callers stop there.
    """
    active, expected, source = expected if expected is not None else \
        expected_step(policy, config, inputs)
    over = over_expected(active, expected, inputs) if policy.pad_hook is None else None
    if pad is None:
        pad = pad_step(policy, config, inputs, active, expected, over)
    adp = bool(config.enable_attention_dp)
    padded = pad.padded & ~inputs.carried  # at most one dummy per rank
    crash = pad.crash
    pads = policy.pads_run(config)
    if not crash.any():   # the usual row: no crash to name
        crash_kind = np.zeros(crash.shape, np.int8)
    elif policy.pad_hook is not None:
        crash_kind = np.where(crash, CRASH_HOOK, CRASH_NONE).astype(np.int8)
    else:
        tripped = over & pads & (policy.entry_check is EntryCheck.ASSERT)
        crash_kind = np.where(crash, np.where(tripped, CRASH_ASSERT, CRASH_ALLOC_NONE),
                              CRASH_NONE).astype(np.int8)

    real_batch = np.where(inputs.real_batch >= 0, inputs.real_batch,
                          np.minimum(inputs.window_real, config.max_batch_size))
    has_dummy = padded | inputs.carried
    # The dummy is scheduled like any request in the window, within max_batch_size:
    # ``min(real_batch + has_dummy, max(max_batch_size, real_batch))``, which adds the dummy
    # exactly where the real batch is below max_batch_size.
    batch = real_batch + (has_dummy & (real_batch < config.max_batch_size))
    postpadded = np.zeros_like(padded)
    if policy.postpads(config) and pads:
        postpadded = ((batch == 0) & (active > 0) & (expected > 0) & (active < config.cap)
                      & inputs.alloc_ok & inputs.kv_precheck_ok & ~crash)
        batch = batch + postpadded.astype(np.int64)

    this_rank = batch > 0
    if adp and this_rank.ndim == 2:   # every rank's batch: the rows with an empty one are few
        fleet = np.ones((this_rank.shape[0], 1), bool)
        fleet[rows_with_any(~this_rank)] = False
        can_queue = np.broadcast_to(fleet, batch.shape)
    elif adp:
        can_queue = np.broadcast_to(this_rank.all(axis=-1, keepdims=True), batch.shape)
    else:
        can_queue = this_rank
    if config.overlap_scheduler:
        processed_prev = can_queue | ~this_rank
    else:
        processed_prev = can_queue.copy()

    new_dummy = padded | postpadded
    any_dummy = new_dummy | inputs.carried
    last = new_dummy | inputs.carried_last
    # A pending dummy is rolled back when the fleet skips: a pad-step one where the version's
    # transactional path applies, a post-schedule one on every path (PR #17379's test runs with
    # the fixes flag off and on).
    pending = (postpadded | padded) if policy.rolls_back(config) else postpadded
    # Where the fleet queues a dummy leaves (the last element by _update_request_states_tp,
    # else by _handle_responses); where it skips, disjointly, a pending one is rolled back.
    # int8 codes summed from 0/1 masks: an np.where costs ~60 us on a 1024 x 64 grid, an int8
    # product ~3 us (measured).
    gone = can_queue & any_dummy
    removed = (gone.astype(np.int8) * np.int8(REMOVED_HANDLE_RESPONSES)
               - (gone & last).astype(np.int8)
               * np.int8(REMOVED_HANDLE_RESPONSES - REMOVED_UPDATE_STATES_TP)
               + (~can_queue & pending).astype(np.int8) * np.int8(REMOVED_ROLLBACK))
    survives = any_dummy & (removed == REMOVED_NONE)
    return StepOutputs(active=active, expected=expected, expected_source=source,
                       surplus=pad.surplus, crash=crash, crash_kind=crash_kind, padded=padded,
                       role_context=pad.role_context & padded, alloc_failed=pad.alloc_failed,
                       postpadded=postpadded, batch=batch, can_queue=np.array(can_queue),
                       can_queue_this_rank=this_rank, processed_prev=processed_prev,
                       removed_path=removed, survives=survives, leaked_now=survives.copy())


def decision_key(policy: Policy, config: RunConfig) -> tuple:
    """Everything a catalogue policy's step decision reads of the policy under ``config``
    (:func:`decide`, the pad count, the dummy role): policies with one key decide every
    transition alike (the explorer's searches and a streamed replay's walks are shared by it)."""
    return (policy.predicate(config), policy.uses_forward_intent(config),
            policy.alloc_failure_for(config), policy.rolls_back(config), policy.postpads(config),
            policy.prechecks(config), policy.pads_run(config), policy.gated(config),
            policy.cap, policy.entry_check, policy.dummy_role)


__all__ = [
    "decision_key",
    "CRASH_ALLOC_NONE",
    "CRASH_ASSERT",
    "CRASH_HOOK",
    "CRASH_KIND_NAMES",
    "CRASH_NONE",
    "EXPECTED_COMPUTED",
    "EXPECTED_RECORDED",
    "EXPECTED_SOURCE_NAMES",
    "INTENT_CONTEXT",
    "INTENT_GENERATION",
    "INTENT_NONE",
    "REMOVAL_PATH_NAMES",
    "REMOVED_HANDLE_RESPONSES",
    "REMOVED_NONE",
    "REMOVED_ROLLBACK",
    "REMOVED_UPDATE_STATES_TP",
    "PadDecision",
    "StepInputs",
    "StepOutputs",
    "decide",
    "computed_expected",
    "expected_step",
    "inputs_from_states",
    "kv_outcomes",
    "local_intent",
    "pad_step",
    "rows_with_any",
]
