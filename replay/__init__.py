"""Replay of attention-DP pad decisions under a catalogue of executor versions.

Entry points: :func:`run` (one run, one policy), :func:`run_all` (several policies),
:class:`RunFrames` (a run's frames as arrays), :func:`decide` (one iteration, for simulators).
"""
from replay.catalogue import CATALOGUE, get_policy, policy_names
from replay.config import RunConfig
from replay.engine import replay_input, run, run_all
from replay.frames import RunFrames
from replay.policy import FrameView, PadOutcome, Policy, Predicate
from replay.results import Crash, Divergence, Leak, ReplayResult, results_json
from replay.states import RequestState
from replay.step import PadDecision, StepInputs, StepOutputs, decide

__all__ = ["CATALOGUE", "Crash", "Divergence", "FrameView", "Leak", "PadDecision", "PadOutcome",
           "Policy", "Predicate", "ReplayResult", "RequestState", "RunConfig", "RunFrames",
           "StepInputs", "StepOutputs", "decide", "get_policy", "policy_names", "replay_input",
           "results_json", "run", "run_all"]
