"""Replay of attention-DP pad decisions under a catalogue of executor versions.

Entry points: :func:`run` (one run, one policy), :func:`run_all` (several policies),
:class:`RunFrames` (a run's frames as arrays), :func:`decide` (one iteration, for simulators);
for long runs :class:`FrameWindows` (a run read window by window) and :func:`replay_windows`
(every policy in one pass, in bounded memory, decisions and ledgers in Parquet files).
"""
from replay.catalogue import CATALOGUE, get_policy, policy_names
from replay.config import RunConfig
from replay.engine import replay_input, replay_windows, run, run_all
from replay.frames import FrameWindows, RunFrames
from replay.policy import FrameView, PadOutcome, Policy, Predicate
from replay.results import Crash, Divergence, Leak, ReplayResult, results_json
from replay.states import RequestState
from replay.step import PadDecision, StepInputs, StepOutputs, decide

__all__ = ["CATALOGUE", "Crash", "Divergence", "FrameView", "FrameWindows", "Leak", "PadDecision", "PadOutcome",
           "Policy", "Predicate", "ReplayResult", "RequestState", "RunConfig", "RunFrames",
           "StepInputs", "StepOutputs", "decide", "get_policy", "policy_names", "replay_input",
           "replay_windows", "results_json", "run", "run_all"]
