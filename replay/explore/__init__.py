"""Explore every schedule the executor can see, up to a bound (issue 24).

``explore(policy, space, bound)`` enumerates, per configuration of a space, every schedule of
abstract request states, arrivals, completions and KV outcomes up to a bound, decides each
iteration with the replay's own step function (batched), reduces by rank permutation, request
renaming and visited states, and reports each failure mechanism with its minimal witness
(``docs/explore.md``).
"""
from replay.explore.classes import StateClass, classes_for
from replay.explore.differential import ExploredIdentification, identify_by_exploration
from replay.explore.explorer import behaviour_key, explore
from replay.explore.result import ExploreResult, Witness
from replay.explore.space import (DEFAULT_BOUND, KV_OUTCOMES, Bound, ConfigSpace, KvOutcome,
                                  gated_models)

__all__ = ["Bound", "ConfigSpace", "DEFAULT_BOUND", "ExploreResult", "ExploredIdentification",
           "identify_by_exploration", "KV_OUTCOMES", "KvOutcome",
           "StateClass", "Witness", "behaviour_key", "classes_for", "explore", "gated_models"]
