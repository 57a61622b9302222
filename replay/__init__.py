"""Replay of attention-DP pad decisions under a catalogue of executor versions.

Entry points: :func:`run` (one run, one policy), :func:`run_all` (several policies),
:class:`RunFrames` (a run's frames as arrays), :func:`decide` (one iteration, for simulators).

The names below are imported on first use (PEP 562), so that importing one light submodule
(``replay.states`` from the trace reader) does not load the engine and pandas.
"""
from __future__ import annotations

import importlib

#: Public name -> the submodule defining it.
_SOURCES = {
    "CATALOGUE": "catalogue", "get_policy": "catalogue", "policy_names": "catalogue",
    "RunConfig": "config",
    "replay_input": "engine", "run": "engine", "run_all": "engine",
    "RunFrames": "frames",
    "FrameView": "policy", "PadOutcome": "policy", "Policy": "policy", "Predicate": "policy",
    "Crash": "results", "Divergence": "results", "Leak": "results", "ReplayResult": "results",
    "results_json": "results",
    "RequestState": "states",
    "PadDecision": "step", "StepInputs": "step", "StepOutputs": "step", "decide": "step",
}

__all__ = sorted(_SOURCES)


def __getattr__(name: str):
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"replay.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})
