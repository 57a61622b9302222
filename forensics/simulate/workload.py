"""The workload a simulated attention-DP fleet serves: shape of the fleet, arrivals, lengths.

The simulator owns the workload (arrivals, routing, request state progression); the executor's
decisions (pad, schedule, ``can_queue``, dummy removal) come from ``replay.step.decide`` so that a
simulated run behaves exactly as the replay engine's policy would (domain doc §4-7).

Request life cycles per serving mode (domain doc §2-3):

* ``generation-server`` (disaggregated): arrives in DISAGG_GENERATION_INIT (8); after the pad
  step of its first iteration the KV transfer is requested (DISAGG_GENERATION_TRANS_IN_PROGRESS,
  9); the transfer poll at the top of a later iteration sees it received
  (DISAGG_GENERATION_TRANS_COMPLETE, 12, inside the scheduler window); each forward pass then
  generates one token (GENERATION_IN_PROGRESS, 13).
* ``context-server`` (disaggregated): arrives in CONTEXT_INIT (10), or in gen-first mode in
  DISAGG_CONTEXT_WAIT_SCHEDULER (7) until the generation side calls for it; one forward pass runs
  the prefill, after which the request leaves ``active_requests`` for the KV send
  (DISAGG_CONTEXT_TRANS_IN_PROGRESS is held in ``ctx_in_transmission_requests``).
* ``aggregated``: arrives in CONTEXT_INIT; the prefill forward yields the first token, then one
  token per forward.

With the overlap scheduler, the state update after the forward that yields a request's last
token (or a context-only prefill) sets GENERATION_TO_COMPLETE (14); the request stays in
``active_requests``, is refused by the scheduler, and leaves when its rank next processes its
previous batch. Without overlap it leaves in the same iteration's response handling.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from forensics.errors import ConfigError
from replay.config import RunConfig

#: Serving modes.
GENERATION_SERVER = "generation-server"
CONTEXT_SERVER = "context-server"
AGGREGATED = "aggregated"
MODES = (GENERATION_SERVER, CONTEXT_SERVER, AGGREGATED)


@dataclasses.dataclass(frozen=True)
class LengthDist:
    """A rounded log-normal count (iterations or tokens), at least ``minimum``.

    Fields:
        median: median of the log-normal.
        sigma: its shape (0 gives the median every time).
        minimum: smallest value drawn.
        maximum: largest value drawn (0: no limit).
    """

    median: float
    sigma: float = 0.5
    minimum: int = 1
    maximum: int = 0

    def __post_init__(self) -> None:
        if self.median <= 0:
            raise ConfigError(f"a length distribution needs a positive median, got {self.median}")
        if self.sigma < 0:
            raise ConfigError(f"a length distribution needs sigma >= 0, got {self.sigma}")
        if self.minimum < 0 or (self.maximum and self.maximum < self.minimum):
            raise ConfigError(f"bad length bounds [{self.minimum}, {self.maximum}]")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` values as int64."""
        if n == 0:
            return np.zeros(0, np.int64)
        if self.sigma == 0:
            v = np.full(n, self.median)
        else:
            v = rng.lognormal(np.log(self.median), self.sigma, n)
        out = np.maximum(np.rint(v).astype(np.int64), self.minimum)
        if self.maximum:
            out = np.minimum(out, self.maximum)
        return out


@dataclasses.dataclass(frozen=True)
class Workload:
    """A fleet and the traffic it serves.

    Fields:
        ranks: attention-DP ranks (``tp_size``).
        pp_size: pipeline stages.
        max_batch_size: per-rank scheduler limit.
        cap: cap on ``expected_num_active_requests`` (None: ``pp_size * max_batch_size``).
        mode: ``generation-server``, ``context-server`` or ``aggregated``.
        overlap: the overlap scheduler loop runs.
        arrival_rate: mean requests arriving per iteration, fleet-wide (Poisson).
        burst_every: mean iterations between bursts (0: no bursts); bursts start at
            ``burst_start`` at the earliest.
        burst_size: mean requests in a burst (Poisson, at least 1).
        burst_start: first iteration a burst may happen.
        arrivals: scheduled arrivals ``((iteration, count), ...)`` on top of the random ones
            (hand-worked scenarios use these with ``arrival_rate=0``).
        kv_latency: iterations a generation request waits for its KV transfer.
        burst_kv_latency: the same for requests arriving in a burst (a KV-transfer burst);
            None: ``kv_latency``.
        output_len: tokens a request generates on this server (aggregated: including the
            prefill's first token).
        prompt_len: prompt tokens (context tokens of a prefill).
        wait_scheduler_fraction: context servers: share of requests arriving in
            DISAGG_CONTEXT_WAIT_SCHEDULER (gen-first mode).
        wait_scheduler_latency: iterations such a request waits before CONTEXT_INIT.
        alloc_fail_prob: probability that ``add_dummy_requests`` returns None on a rank in an
            iteration although the KV-capacity precheck passes (a refusal it does not foresee).
        kv_precheck_fail_prob: probability that the dummy does not fit on a rank in an iteration
            (``_has_adp_dummy_kv_capacity`` says so where the version prechecks; elsewhere the
            allocation is refused).
        expected_multiplier: the router's fair-share multiplier (§5).
        step_time_ms: mean host step time, for the fake timestamps in logs and stats.
        model_arch: the model's ``pretrained_config.model_type`` (``deepseek_v4``) written to the
            run record; upstream's gates read it. None: the record does not name the model.
    """

    ranks: int
    pp_size: int = 1
    max_batch_size: int = 8
    cap: int | None = None
    mode: str = GENERATION_SERVER
    overlap: bool = True
    arrival_rate: float = 1.0
    burst_every: float = 0.0
    burst_size: float = 0.0
    burst_start: int = 0
    arrivals: tuple[tuple[int, int], ...] = ()
    kv_latency: LengthDist = LengthDist(3.0, 0.5)
    burst_kv_latency: LengthDist | None = None
    output_len: LengthDist = LengthDist(64.0, 0.6)
    prompt_len: LengthDist = LengthDist(1024.0, 0.5, minimum=16)
    wait_scheduler_fraction: float = 0.0
    wait_scheduler_latency: LengthDist = LengthDist(4.0, 0.5)
    alloc_fail_prob: float = 0.0
    kv_precheck_fail_prob: float = 0.0
    expected_multiplier: float = 1.0
    step_time_ms: float = 36.0
    model_arch: str | None = None

    def __post_init__(self) -> None:
        if self.ranks < 1:
            raise ConfigError(f"ranks must be at least 1, got {self.ranks}")
        if self.pp_size < 1:
            raise ConfigError(f"pp_size must be at least 1, got {self.pp_size}")
        if self.max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be at least 1, got {self.max_batch_size}")
        if self.cap is not None and self.cap < 1:
            raise ConfigError(f"cap (max_num_active_requests) must be at least 1, got {self.cap}")
        if self.mode not in MODES:
            raise ConfigError(f"unknown serving mode {self.mode!r}", hint="modes: " + ", ".join(MODES))
        for name in ("arrival_rate", "burst_every", "burst_size", "alloc_fail_prob",
                     "kv_precheck_fail_prob", "wait_scheduler_fraction"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if max(self.alloc_fail_prob, self.kv_precheck_fail_prob,
               self.wait_scheduler_fraction) > 1:
            raise ConfigError("probabilities must be at most 1")
        if any(int(c) < 0 or int(i) < 0 for i, c in self.arrivals):
            raise ConfigError(f"scheduled arrivals need iteration >= 0 and count >= 0: {self.arrivals}")
        if self.step_time_ms <= 0:
            raise ConfigError(f"step_time_ms must be positive, got {self.step_time_ms}")

    @property
    def effective_cap(self) -> int:
        """``max_num_active_requests``: the cap, or ``pp_size * max_batch_size``."""
        return int(self.cap if self.cap is not None else self.pp_size * self.max_batch_size)

    @property
    def disaggregated(self) -> bool:
        """A KV-cache transceiver exists (context or generation server)."""
        return self.mode != AGGREGATED

    def run_config(self, build: str = "") -> RunConfig:
        """The replay's view of this fleet."""
        return RunConfig(tp_size=self.ranks, pp_size=self.pp_size, max_batch_size=self.max_batch_size,
                         max_num_active_requests=self.effective_cap, disaggregated=self.disaggregated,
                         overlap_scheduler=self.overlap, expected_multiplier=self.expected_multiplier,
                         build=build, model_arch=self.model_arch)

    def with_overrides(self, **changes) -> Workload:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def workload_parameters(workload: Workload) -> dict:
    """The workload's scalar parameters (ranks, burst_size, ...) for the trace's run record, so a
    fleet table of many simulated runs can group by them (``forensics fleet``)."""
    out = {}
    for f in dataclasses.fields(workload):
        v = getattr(workload, f.name)
        if isinstance(v, (bool, int, float, str)):
            out[f.name] = v
    return out
