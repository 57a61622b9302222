"""A stand-in ``PyExecutor`` built from one :class:`~replay.policy.FrameView` (issue #6).

Real TensorRT-LLM pad code (extracted by ``replay.trtllm_source``) and a user's candidate
(``replay.candidate``) run as methods of :class:`StandinExecutor`. It holds exactly what the pad
step touches upstream, with the names the upstream methods use (read from the public sources;
no code copied): ``active_requests``, ``expected_num_active_requests``, ``kv_cache_transceiver``
(an object or None per ``config.disaggregated``), ``enable_attention_dp``, ``dist``
(``tp_size``, ``pp_size``, ``rank``), ``scheduler`` (the micro-batch window as
``scheduling_state_range`` / ``no_schedule_until_state`` / ``no_schedule_after_state``),
``kv_cache_manager`` whose ``add_dummy_requests`` returns ``[dummy]`` or None per
``FrameView.alloc_ok`` and ``FrameView.kv_precheck_ok`` (a dummy that does not fit is refused
too) and whose ``get_num_available_tokens`` is 0 when the dummy does not fit,
``_has_adp_dummy_kv_capacity`` answering the frame's recorded ``kv_precheck_ok`` (the source's
own body is not run: its answer is what the recorder wrote), ``resource_manager``, and each
era's feature flags at their upstream defaults (:data:`replay.feature_flags.FEATURE_FLAGS`).
Anything else is absent on purpose: the code touching it fails with a
:class:`~forensics.errors.PolicyError` naming the attribute and the revision.

Its ``dist``'s collectives are computed over the replayed ranks (:mod:`replay.collectives`); the
names the extracted code sees besides ``self`` are :mod:`replay.standin_namespace`'s. The
executor's ``expected_num_active_requests`` is :func:`routed_expected` (the engine's entry
check semantics); the model-dependent flags follow ``RunConfig.model_arch``
(:func:`~replay.feature_flags.feature_flags`, :func:`~replay.feature_flags.model_assumptions`);
a fork's loop task reads the same state through ``self._ctx`` (:class:`ContextBucket`).

Checked by hand against the shape of upstream main (2026): its pad method and the helpers it
reaches (``_count_schedulable_active_requests``, ``_get_non_overlap_adp_forward_intent``,
``_has_adp_dummy_kv_capacity``, ``_should_skip_dummy_for_benchmark_disagg``, the scheduler's
``is_request_in_schedulable_state``) run on this stand-in unchanged. Also replayed unchanged (pad
closure extracted from real files): an early-2025, a late-2025 and the newest upstream executor and
two forks' 2026 executors (the pre-fix count, and PR #16279's model-gated window fix).
"""
from __future__ import annotations

import types
from typing import Any, Optional

from replay.collectives import Exchange, StandinDist
from replay.config import RunConfig
from replay.feature_flags import feature_flags
from replay.policy import FrameView
from replay.states import (
    CONTEXT_DUMMY_STATE,
    GENERATION_DUMMY_STATE,
    NOT_SCHEDULABLE_STATES,
    RequestState,
    micro_batch_window,
)

#: Free KV tokens the stand-in reports when the dummy can be allocated (effectively unlimited).
AVAILABLE_TOKENS_OK = 1 << 30


class StandinRequest:
    """An ``LlmRequest`` reduced to what the pad step reads: state, id, dummy flags."""

    def __init__(self, request_id: int, state_value: int, is_dummy: bool = False):
        self.py_request_id = int(request_id)
        self.request_id = int(request_id)
        self.state = RequestState(int(state_value))
        self.is_attention_dp_dummy = bool(is_dummy)
        self.is_dummy_request = bool(is_dummy)
        self.is_child = False
        self.parent_request_id = None
        self.llm_request_type = None
        self.py_seq_slot = None
        self.py_encoder_output_ready_event = None
        self.py_skip_gen_alloc_revert = False
        self.py_kv_transfer_timed_out = False

    @property
    def state_value(self) -> int:
        return int(self.state)

    # The C++ binding's state predicates, one per state the pad code asks about.
    @property
    def is_encoder_init_state(self) -> bool:
        return self.state == RequestState.ENCODER_INIT

    @property
    def is_context_init_state(self) -> bool:
        return self.state == RequestState.CONTEXT_INIT

    @property
    def is_disagg_context_wait_scheduler_state(self) -> bool:
        return self.state == RequestState.DISAGG_CONTEXT_WAIT_SCHEDULER

    @property
    def is_disagg_generation_init_state(self) -> bool:
        return self.state == RequestState.DISAGG_GENERATION_INIT

    @property
    def is_disagg_generation_transmission_in_progress(self) -> bool:
        return self.state == RequestState.DISAGG_GENERATION_TRANS_IN_PROGRESS

    @property
    def is_disagg_generation_transmission_complete(self) -> bool:
        return self.state == RequestState.DISAGG_GENERATION_TRANS_COMPLETE

    @property
    def is_disagg_context_transmission_state(self) -> bool:
        return self.state == RequestState.DISAGG_CONTEXT_TRANS_IN_PROGRESS

    @property
    def is_disagg_context_complete_state(self) -> bool:
        return self.state == RequestState.DISAGG_CONTEXT_COMPLETE

    @property
    def is_generation_in_progress_state(self) -> bool:
        return self.state == RequestState.GENERATION_IN_PROGRESS

    @property
    def is_generation_to_complete_state(self) -> bool:
        return self.state == RequestState.GENERATION_TO_COMPLETE

    @property
    def is_generation_complete_state(self) -> bool:
        return self.state == RequestState.GENERATION_COMPLETE

    @property
    def is_finished(self) -> bool:
        return self.state == RequestState.GENERATION_COMPLETE

    def __repr__(self) -> str:
        dummy = ", dummy" if self.is_attention_dp_dummy else ""
        return f"StandinRequest({self.py_request_id}, {self.state.name}{dummy})"


class StandinKvCacheManager:
    """``kv_cache_manager``: hands out one dummy, or None when the frame says allocation fails.

    ``alloc_ok`` false: the allocation is refused though capacity looks fine (the precheck
    passes); ``kv_precheck_ok`` false: the dummy does not fit, so the available tokens read 0
    and an allocation made anyway is refused too.
    """

    def __init__(self, alloc_ok: bool, kv_precheck_ok: bool = True):
        self.alloc_ok = alloc_ok and kv_precheck_ok
        self.fits = kv_precheck_ok
        self.calls: list[dict[str, Any]] = []
        self.refused = False
        self.freed: list[StandinRequest] = []
        self.mapping = types.SimpleNamespace(has_cp_helix=lambda: False)
        self.is_linear_attention = False
        self.max_seq_len = 8192
        self.num_extra_kv_tokens = 0
        self.tokens_per_block = 32

    def add_dummy_requests(self, request_ids, token_nums=None, is_gen=False, prepare_resource=True,
                           max_num_draft_tokens=0, **_: Any) -> Optional[list[StandinRequest]]:
        self.calls.append({"request_ids": list(request_ids), "token_nums": token_nums,
                           "is_gen": is_gen, "prepare_resource": prepare_resource})
        if not self.alloc_ok:
            self.refused = True
            return None
        state = GENERATION_DUMMY_STATE if is_gen else CONTEXT_DUMMY_STATE
        return [StandinRequest(request_ids[0], int(state), is_dummy=False)]

    def get_num_available_tokens(self, *_: Any, **__: Any) -> int:
        if not self.fits:
            self.refused = True
            return 0
        return AVAILABLE_TOKENS_OK

    def free_resources(self, request: StandinRequest, *_: Any, **__: Any) -> None:
        self.freed.append(request)


class StandinResourceManager:
    """``resource_manager``: no speculative-decoding or other managers exist in a replay."""

    def __init__(self) -> None:
        self.resource_managers: dict[Any, Any] = {}

    def get_resource_manager(self, _kind: Any) -> None:
        return None

    def free_resources(self, _request: Any) -> None:
        return None


class StandinScheduler:
    """The scheduler's window; ``is_request_in_schedulable_state`` comes from the source or a model.

    A trtllm source that delegates supplies the method (``replay.trtllm_source`` binds it on a
    subclass); otherwise :meth:`model_is_request_in_schedulable_state` models PR #16921.
    """

    def __init__(self, config: RunConfig):
        window = micro_batch_window(config.encoder_decoder)
        self.scheduling_state_range = (window.start, window.end)
        self.no_schedule_until_state = window.start
        self.no_schedule_after_state = window.end

    def model_is_request_in_schedulable_state(self, request: StandinRequest) -> bool:
        """PR #16921 as modelled in ``replay.states``: 7, 8, 9 refused, else the window."""
        if request.state in NOT_SCHEDULABLE_STATES:
            return False
        start, end = self.scheduling_state_range
        return int(start) <= request.state_value < int(end)


class StandinExecutor:
    """``self`` of the replayed pad method: one rank's state at pad entry (see module docstring)."""

    #: Scheduler class to instantiate; hooks substitute a subclass carrying extracted methods.
    scheduler_class: type = StandinScheduler

    def __init__(self, frame: FrameView, exchange: Optional[Exchange] = None,
                 role_context: Optional[bool] = None):
        config = frame.config
        self.frame = frame
        self.config = config
        self.active_requests = [StandinRequest(rid, state, dummy)
                                for rid, state, dummy in frame.requests]
        self.expected_num_active_requests = routed_expected(frame)
        self.max_num_active_requests = config.cap
        self.max_batch_size = config.max_batch_size
        self.enable_attention_dp = config.enable_attention_dp
        self.kv_cache_transceiver = (types.SimpleNamespace(kv_transfer_timeout_ms=None)
                                     if config.disaggregated else None)
        self.dist = StandinDist(config, frame.rank, peers_busy=frame.expected > 0,
                                exchange=exchange)
        self.scheduler = self.scheduler_class(config)
        self.kv_cache_manager = StandinKvCacheManager(frame.alloc_ok, frame.kv_precheck_ok)
        self.resource_manager = StandinResourceManager()
        self.model_engine = types.SimpleNamespace(max_num_tokens=8192, max_seq_len=8192,
                                                  iter_counter=frame.iter)
        self.iter_counter = frame.iter
        self.terminated: list[StandinRequest] = []
        for name, value in feature_flags(config).items():
            setattr(self, name, value)
        # The dummy's role is decided outside the pad step upstream (``has_context_request`` set
        # at fetch in 2025, ``_update_adp_dummy_role`` in 2026): the engine passes the loop's
        # model of it (``role_context``, ``RunFrames.dummy_role_context``). Without one (a single
        # frame), a rank whose real requests all precede CONTEXT_INIT gets a context dummy.
        if role_context is None:
            real = [r for r in self.active_requests if not r.is_attention_dp_dummy]
            role_context = bool(real) and all(r.state_value < int(RequestState.CONTEXT_INIT)
                                              for r in real)
        context_role = bool(role_context)
        self.has_context_request = context_role
        self._adp_dummy_is_gen = not context_role

    def _has_adp_dummy_kv_capacity(self, *_: Any, **__: Any) -> bool:
        """The KV-capacity precheck (000515e on: every path): the frame's recorded answer."""
        if not self.frame.kv_precheck_ok:
            self.kv_cache_manager.refused = True
            return False
        return True

    @property
    def _ctx(self) -> types.SimpleNamespace:
        """The loop-task context of a fork's ``IngestionTask`` (``self._ctx.{service,config,
        state,port}``): every bucket reads and writes this stand-in's attributes."""
        bucket = ContextBucket(self)
        return types.SimpleNamespace(service=bucket, config=bucket, state=bucket, port=bucket)

    def _terminate_request(self, request: StandinRequest) -> None:
        """Termination frees the request's resources; recorded, nothing else to do here."""
        self.terminated.append(request)


def routed_expected(frame: FrameView) -> int:
    """``expected_num_active_requests`` as the real code must see it to match the engine's entry
    check (``replay.step.over_expected``).

    The recording routed ``frame.new_requests`` to this rank with its own ``expected``; the
    replayed router never places a request on a rank at or above its ``expected``, so a new
    request the replayed ``expected`` leaves no room for would have gone elsewhere. The engine
    therefore checks ``active - new > expected``. Upstream code checks ``len(active_requests) >
    expected``; seeing ``max(expected, len(active))`` when only new requests overflow gives the
    same verdict (``expected > 0`` is unchanged: it is at least 1 whenever the fleet holds a
    request), without dropping requests the pad count looks at.
    """
    active = len(frame.requests)
    if active > frame.expected and active - frame.new_requests <= frame.expected:
        return active
    return int(frame.expected)


class ContextBucket:
    """One bucket of a loop task's ``_ctx``: attribute access goes to the stand-in executor.

    Buckets name fields without the leading underscore the executor used
    (``state.benchmark_fill_phase_active`` for ``_benchmark_fill_phase_active``); both are tried.
    """

    def __init__(self, owner: "StandinExecutor"):
        object.__setattr__(self, "_owner", owner)

    def _name(self, name: str) -> str:
        owner = object.__getattribute__(self, "_owner")
        for candidate in (name, "_" + name):
            if hasattr(owner, candidate):
                return candidate
        raise AttributeError(name, name=name, obj=self)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_owner"), self._name(name))

    def __setattr__(self, name: str, value: Any) -> None:
        owner = object.__getattribute__(self, "_owner")
        try:
            target = self._name(name)
        except AttributeError:
            target = name
        setattr(owner, target, value)


#: Methods of the stand-in that extracted code must not replace (effects at the edge).
STANDIN_EFFECT_METHODS = frozenset({"_terminate_request"})
