"""Replay of attention-DP pad decisions under a catalogue of executor versions.

Entry points: :func:`run` (one run, one policy), :func:`run_all` (several policies),
:class:`RunFrames` (a run's frames as arrays), :func:`decide` (one iteration, for simulators);
for long runs :class:`FrameWindows` (a run read window by window) and :func:`replay_windows`
(every policy in one pass, in bounded memory, decisions and ledgers in Parquet files).

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
    "replay_input": "replay.engine", "run": "replay.engine", "run_all": "replay.engine",
    "replay_windows": "replay.engine", "FrameWindows": "replay.frames",
    "RunFrames": "replay.frames",
    "FrameView": "replay.policy", "GateVerdict": "replay.policy", "PadOutcome": "replay.policy",
    "Policy": "replay.policy", "Predicate": "replay.policy",
    "Crash": "replay.results", "Divergence": "replay.results", "Leak": "replay.results",
    "ReplayResult": "replay.results", "results_json": "replay.results",
    "RequestState": "replay.states",
    "PadDecision": "replay.step", "StepInputs": "replay.step", "StepOutputs": "replay.step",
    "decide": "replay.step",
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
