"""The stand-in executor's feature flags: each era's switches at their upstream defaults for a
run, and the model gates behind them (PR #16279: DeepSeek-V4 only; PR #16921: the model and the
overlap scheduler).

The model comes from the run record (``RunConfig.model_arch``); when it is unknown the gated
fixes are assumed on, and :func:`model_assumptions` says so in a ``trtllm:`` policy's results.
:func:`config_seen` is everything code reading a given set of the stand-in's attributes can
tell of a configuration (the explorer shares the searches of configurations real code cannot
tell apart).
"""
from __future__ import annotations

import functools
import types
from typing import Any, Iterable, Mapping, Optional

from replay.config import RunConfig

#: Model families as TensorRT-LLM's model config names them (``pretrained_config.model_type``),
#: compared after dropping case and punctuation, so ``DeepseekV4ForCausalLM`` matches too.
DSV4_MODELS = ("deepseek_v4",)
#: PR #16921's scheduler-aware count with the overlap scheduler: on for these families only
#: (upstream's gate test: deepseek_v4 and qwen3_5_moe on, kimi_k2 off; any model without overlap).
SCHEDULER_AWARE_OVERLAP_MODELS = ("deepseek_v4", "qwen3_5_moe")


@functools.lru_cache(maxsize=None)
def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def model_in(config: RunConfig, families: tuple[str, ...]) -> Optional[bool]:
    """Whether the run's model (``RunConfig.model_arch``) is one of ``families``; None if unknown."""
    arch = getattr(config, "model_arch", None)
    if not arch:
        return None
    return any(_norm(arch).startswith(_norm(f)) for f in families)


@functools.lru_cache(maxsize=1024)
def feature_flags(config: RunConfig) -> Mapping[str, Any]:
    """The executor attributes of later eras, at their upstream defaults for this run (read-only,
    computed once per configuration: every stand-in of a replay is built from it).

    PR #16921 gates its fixes on ``pp_size == 1`` (``_enable_adp_dummy_fixes``; the code also
    checks for a transceiver); its scheduler-aware count on the model and the overlap scheduler
    (:data:`SCHEDULER_AWARE_OVERLAP_MODELS`); the forward intent applies to the non-overlap loop
    only. PR #16279's window count is set for DeepSeek-V4 only. The model comes from the run
    record (``RunConfig.model_arch``); when it is unknown the fixes are assumed on, and
    :func:`model_assumptions` says so. Benchmark-fill (PR #12208 era) and warm-up switches are
    off in a recorded production run.
    """
    fixes = bool(config.disaggregated and config.pp_size == 1)
    dsv4 = model_in(config, DSV4_MODELS)
    aware_model = model_in(config, SCHEDULER_AWARE_OVERLAP_MODELS)
    scheduler_aware = fixes and (not config.overlap_scheduler or aware_model is not False)
    return types.MappingProxyType({
        "is_warmup": False,
        "benchmark_req_queues_size": 0,
        "_benchmark_fill_phase_active": False,
        "is_benchmark_disagg": False,
        "num_fetch_requests": 0,
        "has_context_request": False,
        "_adp_dummy_is_gen": True,
        "_pending_adp_dummy_request": None,
        "_enable_adp_dummy_fixes": fixes,
        # PR #16279 shipped the window count and the pending dummy behind this flag, set only for
        # DeepSeek-V4 models (with a transceiver and pp_size 1); unknown model: assumed on.
        "_enable_dsv4_adp_dummy_fixes": fixes and dsv4 is not False,
        "_enable_scheduler_aware_adp_dummy": scheduler_aware,
        "_enable_non_overlap_adp_forward_intent": fixes and not config.overlap_scheduler,
        # Later builds return from both pads at once under a dkv configuration.
        "dkv_enabled": bool(config.dkv_enabled),
        # Draft-token budget of the dummy, under each era's name: ``max_draft_tokens`` (early
        # 2025), ``max_draft_len`` (mid 2025), ``max_total_draft_tokens`` (late 2025 on).
        "max_total_draft_tokens": 0,
        "max_draft_len": 0,
        "max_draft_tokens": 0,
        "max_num_tokens": 8192,
    })


#: Flags whose upstream value depends on the model: what the replay assumes when the run record
#: does not name it, stated in a ``trtllm:`` policy's notes and results when the code reads the flag.
MODEL_ASSUMPTIONS = {
    "_enable_dsv4_adp_dummy_fixes": "assumed a DeepSeek-V4 model (the PR #16279 gate); another "
                                    "model runs the legacy count on that build",
    "_enable_scheduler_aware_adp_dummy": "with the overlap scheduler, assumed a model the PR "
                                         "#16921 gate covers (deepseek_v4, qwen3_5_moe; not "
                                         "kimi_k2, which keeps the legacy count)",
}


def model_assumptions(config: RunConfig, read: set[str]) -> list[str]:
    """The :data:`MODEL_ASSUMPTIONS` that apply to this run: the code reads the flag, the flag's
    gate is otherwise open, and the run record does not name the model."""
    if getattr(config, "model_arch", None) or not (config.disaggregated and config.pp_size == 1):
        return []
    out = []
    for flag, text in MODEL_ASSUMPTIONS.items():
        if flag not in read:
            continue
        if flag == "_enable_scheduler_aware_adp_dummy" and not config.overlap_scheduler:
            continue  # on for every model without overlap: nothing assumed
        out.append(f"{flag}: {text} (the run record names no model_arch)")
    return out


#: Names of :func:`feature_flags`, for documentation and tests.
FEATURE_FLAGS = tuple(feature_flags(RunConfig(tp_size=1)))


#: Stand-in attributes that hold the whole run configuration (code reading them can tell every
#: field apart).
WHOLE_CONFIG_ATTRS = frozenset({"config", "frame"})


def config_seen(config: RunConfig, names: Iterable[str]) -> tuple:
    """What code that reads the stand-in attributes ``names`` can tell of ``config``: two
    configurations with one value here build stand-ins that code cannot tell apart.

    The stand-in derives from the configuration only its sizes (``dist``, the cap,
    ``max_batch_size``), attention DP, the transceiver (disaggregated serving), the scheduler
    window (encoder-decoder) and the :func:`feature_flags` (``replay.standin_executor``, ``replay.collectives``); the
    flags are compared only where the code reads them. Code reading the stand-in's ``config`` or
    ``frame`` sees the whole configuration.

    Example:
        >>> a = RunConfig(tp_size=2, disaggregated=False, model_arch="llama")
        >>> config_seen(a, {"_enable_adp_dummy_fixes"}) == config_seen(
        ...     RunConfig(tp_size=2, disaggregated=False, model_arch="deepseek_v4"),
        ...     {"_enable_adp_dummy_fixes"})
        True
    """
    names = set(names)
    if names & WHOLE_CONFIG_ATTRS:
        return ("whole", config)
    flags = feature_flags(config)
    return (config.tp_size, config.pp_size, config.cap, config.max_batch_size,
            config.enable_attention_dp, config.disaggregated, config.encoder_decoder,
            tuple(sorted((n, flags[n]) for n in names if n in flags)))
