"""Replay of attention-DP pad decisions under a catalogue of executor versions.

Entry points: :func:`run` (one run, one policy), :func:`run_all` (several policies),
:func:`replay_input` (a dataset or raw inputs, streamed when the run is long), :class:`RunFrames`
(a run's frames as arrays); for long runs :class:`FrameWindows` (a run read window by window)
and :func:`replay_windows` (every policy in one pass, in bounded memory, decisions and ledgers
in Parquet files). Policies: :class:`Policy` and the catalogue (:data:`CATALOGUE`,
:func:`get_policy`, :func:`policy_names`). Results: :class:`ReplayResult` with its
:class:`Leak`, :class:`Crash` and :class:`Divergence` records, :func:`results_json`. Errors: the
:class:`ReplayError` family. The step internals (``replay.step.decide`` for one iteration, for
simulators) are imported from their modules.

A library of its own: it imports nothing from ``forensics``; the forensics pipeline feeds it
trace files and datasets through ``replay.feed``. Names are imported on first use, so
``import replay.errors`` (which ``forensics.errors`` re-exports) stays free of numpy and pandas.
"""
from __future__ import annotations

import importlib

#: Public name -> the module defining it.
_EXPORTS = {
    "CATALOGUE": "replay.catalogue", "get_policy": "replay.catalogue",
    "policy_names": "replay.catalogue",
    "RunConfig": "replay.config",
    "ConfigError": "replay.errors", "DatasetError": "replay.errors",
    "NoReaderError": "replay.errors", "NoTraceError": "replay.errors",
    "PolicyError": "replay.errors", "ReplayError": "replay.errors",
    "FrameWindows": "replay.frame_windows", "RunFrames": "replay.frames",
    "GatedReplay": "replay.model_variants",
    "FrameView": "replay.policy", "GateVerdict": "replay.policy", "PadOutcome": "replay.policy",
    "Policy": "replay.policy", "Predicate": "replay.policy",
    "Crash": "replay.results", "Divergence": "replay.results", "Leak": "replay.results",
    "ReplayResult": "replay.results", "results_json": "replay.results",
    "RequestState": "replay.states",
    "replay_input": "replay.streaming", "replay_windows": "replay.streaming",
    "run": "replay.walk", "run_all": "replay.walk",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = sorted(_EXPORTS)
