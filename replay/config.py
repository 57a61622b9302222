"""The run configuration read from a trace's run record (traces/FORMAT.md)."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from replay.errors import ConfigError

#: ``ceil(multiplier * fair_share)`` in the router (domain doc §5); upstream default 1.
DEFAULT_EXPECTED_MULTIPLIER = 1.0


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What a replay needs to know about the run.

    Fields:
        tp_size: attention-DP ranks (tensor-parallel group size).
        pp_size: pipeline stages.
        max_batch_size: per-rank scheduler limit.
        max_num_active_requests: the cap on ``expected_num_active_requests``
            (``pp_size * max_batch_size`` unless the build lowered it).
        disaggregated: a KV-cache transceiver exists (disaggregated serving).
        overlap_scheduler: the executor runs ``_executor_loop_overlap``.
        encoder_decoder: encoder-decoder model (window starts at ENCODER_INIT).
        enable_attention_dp: ADP on; with it off nothing is ever padded.
        expected_multiplier: the router's fair-share multiplier.
        build: free label of the build that recorded the run.
        model_arch: the model's ``pretrained_config.model_type`` as TensorRT-LLM's model config
            names it (``deepseek_v4``), or None when the run record does not say. Upstream's
            gates read it (PR #16279 applies its fix only to ``deepseek_v4``; PR #16921's
            scheduler-aware count, with the overlap scheduler, only to a few models).
        dkv_enabled: the executor runs with a dkv configuration (``dkv_enabled``); builds that
            know it skip both pads then (``Policy.dkv_skips_pads``). Run record key
            ``dkv_enabled`` (absent: false).
    """

    tp_size: int
    pp_size: int = 1
    max_batch_size: int = 8
    max_num_active_requests: int | None = None
    disaggregated: bool = False
    overlap_scheduler: bool = True
    encoder_decoder: bool = False
    enable_attention_dp: bool = True
    expected_multiplier: float = DEFAULT_EXPECTED_MULTIPLIER
    build: str = ""
    model_arch: Optional[str] = None
    dkv_enabled: bool = False

    def __post_init__(self) -> None:
        if self.tp_size < 1:
            raise ConfigError(f"tp_size must be at least 1, got {self.tp_size}")
        if self.pp_size < 1:
            raise ConfigError(f"pp_size must be at least 1, got {self.pp_size}")
        if self.max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be at least 1, got {self.max_batch_size}")
        if self.model_arch is not None:
            if not isinstance(self.model_arch, str) or not self.model_arch.strip():
                raise ConfigError(f"model_arch must be a non-empty string, got {self.model_arch!r}")
            object.__setattr__(self, "model_arch", self.model_arch.strip())
        if self.max_num_active_requests is None:
            object.__setattr__(self, "max_num_active_requests", self.pp_size * self.max_batch_size)
        if self.max_num_active_requests < 1:
            raise ConfigError(
                f"max_num_active_requests (the cap) must be at least 1, got {self.max_num_active_requests}")

    @property
    def cap(self) -> int:
        """The cap on ``expected_num_active_requests``."""
        return int(self.max_num_active_requests)  # type: ignore[arg-type]

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "RunConfig":
        """Build from a run record (unknown keys ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: record[k] for k in names if k in record and record[k] is not None}
        if "tp_size" not in kwargs:
            raise ConfigError("run record has no tp_size")
        return cls(**kwargs)

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
