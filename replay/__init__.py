"""Replay of attention-DP pad decisions under a catalogue of executor versions."""
from replay.catalogue import CATALOGUE, get_policy, policy_names
from replay.config import RunConfig
from replay.policy import FrameView, PadOutcome, Policy, Predicate
from replay.states import RequestState

__all__ = ["CATALOGUE", "get_policy", "policy_names", "RunConfig", "FrameView", "PadOutcome",
           "Policy", "Predicate", "RequestState"]
