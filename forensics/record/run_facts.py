"""The run record: what a live executor says about its run (ranks, sizes, model, the state
enum's numbering), read without importing anything of ``tensorrt_llm``.

:mod:`forensics.record.capture` writes it at the head of each per-rank file (traces/FORMAT.md).
"""
from __future__ import annotations

import os
import sys
from typing import Any

#: Optional build label for the run record (default: ``tensorrt_llm.__version__``).
BUILD_ENV = "ADP_FORENSICS_BUILD"
#: Rank variables of common launchers, most specific first (used when ``dist.rank`` is missing).
RANK_ENVS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK")
WORLD_SIZE_ENVS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE")
#: The trace format version the recorder writes (traces/FORMAT.md).
TRACE_FORMAT_VERSION = 2
#: ``replay.states.CURRENT_NUMBERING``, written when the live enum cannot be read (and then listed
#: under ``guessed``); a literal so the recorder imports nothing heavy into the executor.
ASSUMED_NUMBERING = "context-init-10"
#: Where ``LlmRequestState`` lives when the executor's own module does not name it.
_STATE_ENUM_MODULES = ("tensorrt_llm._torch.pyexecutor.llm_request", "tensorrt_llm.bindings")


def _env_int(names) -> int | None:
    for name in names:
        v = os.environ.get(name)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def global_rank(executor: Any) -> int:
    """``dist.rank``, else the launcher's rank variable, else 0."""
    r = as_int(getattr(getattr(executor, "dist", None), "rank", None))
    if r is None:
        r = _env_int(RANK_ENVS)
    return r if r is not None and r >= 0 else 0


def _overlap(executor: Any, pp_size: int) -> bool | None:
    loop = getattr(executor, "event_loop", None)
    loop = getattr(loop, "__wrapped__", loop)  # TLLM_TRACE_EXECUTOR_LOOP wraps it
    name = getattr(loop, "__name__", "")
    if name == "_executor_loop_overlap":
        return True
    if name in ("_executor_loop", "_executor_loop_pp"):
        return False
    disabled = getattr(executor, "disable_overlap_scheduler", None)
    if isinstance(disabled, bool):
        return not disabled and pp_size == 1
    return None


def _build_label() -> str:
    label = os.environ.get(BUILD_ENV)
    if label:
        return label
    trtllm = sys.modules.get("tensorrt_llm")  # never imported here: only read if loaded
    version = getattr(trtllm, "__version__", None)
    return f"tensorrt_llm {version}" if version else "unknown"


def model_arch(executor: Any) -> str | None:
    """The model's ``pretrained_config.model_type`` as the executor's model engine holds it
    (``model_engine.model.model_config.pretrained_config``, what upstream's ADP gates read), or
    None when it cannot be read."""
    obj = getattr(executor, "model_engine", None)
    for name in ("model", "model_config", "pretrained_config", "model_type"):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj if isinstance(obj, str) and obj.strip() else None


def state_numbering(executor: Any) -> dict[str, int] | None:
    """``{state name: int value}`` of the live ``LlmRequestState`` enum (the numbering the
    recorded ``state_value`` ints use), or None when no such enum is loaded."""
    # The executor's own module namespace first (what its code compares states with).
    own = getattr(getattr(type(executor), "__init__", None), "__globals__", None) or {}
    candidates = [own.get("LlmRequestState"),
                  getattr(sys.modules.get(type(executor).__module__), "LlmRequestState", None)]
    candidates += [getattr(sys.modules.get(m), "LlmRequestState", None)
                   for m in _STATE_ENUM_MODULES]  # never imported here
    for enum in candidates:
        members = getattr(enum, "__members__", None)
        if not members:
            continue
        out = {}
        for name, member in dict(members).items():
            value = getattr(member, "value", member)
            try:
                out[str(name)] = int(value)
            except (TypeError, ValueError):
                break
        else:
            return out
    return None


def run_record(executor: Any, rank: int, grank: int, run_id: str) -> dict:
    """The run record (trace format v2) from the executor's configuration; unreadable fields
    are guessed and listed under ``guessed``. ``model_arch`` is null when the model cannot be
    read; ``state_numbering`` is the live enum's table (the frames' states are its ints).

    Every rank's record must be identical but for ``rank`` (ingest checks that per-rank files
    of one run agree), so per-process facts (global rank, pid, host) go into a note instead.
    """
    guessed: list[str] = []
    dist = getattr(executor, "dist", None)
    tp_size = as_int(getattr(dist, "tp_size", None))
    if tp_size is None or tp_size < 1:
        tp_size = _env_int(WORLD_SIZE_ENVS) or grank + 1
        guessed.append("tp_size")
    pp_size = as_int(getattr(dist, "pp_size", None))
    if pp_size is None or pp_size < 1:
        pp_size = 1
        guessed.append("pp_size")
    mbs = as_int(getattr(executor, "max_batch_size", None))
    cap = as_int(getattr(executor, "max_num_active_requests", None))
    if mbs is None or mbs < 1:
        mbs = max(1, (cap or 1) // pp_size)
        guessed.append("max_batch_size")
    if cap is None or cap < 1:
        cap = pp_size * mbs
        guessed.append("max_num_active_requests")
    if hasattr(executor, "kv_cache_transceiver"):
        disagg = executor.kv_cache_transceiver is not None
    else:
        disagg = False
        guessed.append("disaggregated")
    overlap = _overlap(executor, pp_size)
    if overlap is None:
        overlap = True
        guessed.append("overlap_scheduler")
    numbering: Any = state_numbering(executor)
    if numbering is None:
        numbering = ASSUMED_NUMBERING
        guessed.append("state_numbering")
    rec = {"kind": "run", "format": "adp-trace", "version": TRACE_FORMAT_VERSION,
           "tp_size": tp_size, "pp_size": pp_size, "max_batch_size": mbs,
           "max_num_active_requests": cap, "disaggregated": disagg, "overlap_scheduler": overlap,
           "build": _build_label(), "run_id": run_id, "rank": rank,
           "recorder": "adp-forensics record", "model_arch": model_arch(executor),
           "state_numbering": numbering}
    adp = getattr(executor, "enable_attention_dp", None)
    if isinstance(adp, bool):
        rec["enable_attention_dp"] = adp  # replay reads it (RunConfig); absent means on
    if guessed:
        rec["guessed"] = guessed
    return rec
