"""Which executor versions can produce a crash signature, derived from the policy fields.

"A path that can leak" is derived from the policy fields, never from names: on a path (aggregated,
disaggregated with pp 1, disaggregated with pp > 1) a dummy can survive a fleet-wide skip when the
pad predicate counts a state the micro-batch scheduler refuses (so a rank gets no dummy yet
schedules 0, domain doc §1) and the version does not roll a pending dummy back on a skip
(PR #16921). With dummy allocation failures in the logs, a version that skips padding on a failed
allocation (PR #16161) can also leave a rank at batch 0 and so leak on any path without rollback;
so can a failed KV-capacity precheck.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from forensics.signature_kinds import SignatureKind
from replay.config import RunConfig
from replay.policy import AllocFailure, EntryCheck, Policy
from replay.states import micro_batch_window


#: The paths a run can take, for when the configuration is not known (logs alone).
def _paths(config: RunConfig | None) -> list[tuple[str, RunConfig]]:
    if config is not None:
        return [(_path_name(config), config)]
    return [("aggregated", RunConfig(tp_size=2, disaggregated=False)),
            ("disaggregated, pp_size 1", RunConfig(tp_size=2, disaggregated=True, pp_size=1)),
            ("disaggregated, pp_size > 1", RunConfig(tp_size=2, disaggregated=True, pp_size=2))]


def _path_name(config: RunConfig) -> str:
    if not config.disaggregated:
        return "aggregated"
    return "disaggregated, pp_size 1" if config.pp_size == 1 else "disaggregated, pp_size > 1"


def predicate_wider_than_scheduler(policy: Policy, config: RunConfig) -> bool:
    """The pad predicate counts a state the micro-batch scheduler refuses (domain doc §1.1)."""
    counted = policy.predicate(config).mask(config)
    window = micro_batch_window(config.encoder_decoder).mask()
    return bool(np.any(counted & ~window))


def leak_paths(policy: Policy, config: RunConfig | None = None, *,
               alloc_failures: bool = False) -> list[str]:
    """The paths on which a dummy of this policy can survive a fleet-wide skip, with the reason.

    Args:
        policy: the version.
        config: the run's configuration; None tries every path.
        alloc_failures: dummy allocations are known to fail in this run, so a version that skips
            padding on a failure can leave a rank at batch 0.
    """
    out = []
    for name, cfg in _paths(config):
        if policy.rolls_back(cfg):
            continue
        why = []
        if predicate_wider_than_scheduler(policy, cfg):
            why.append("predicate counts states the scheduler refuses")
        if alloc_failures and policy.alloc_failure_for(cfg) is AllocFailure.SKIP:
            why.append("a failed dummy allocation leaves a rank at batch 0")
        if why:
            out.append(f"{name} ({'; '.join(why)}; no rollback on a skip)")
    return out


def policies_for(kind: SignatureKind, policies: Sequence[Policy], config: RunConfig | None = None,
                 *, alloc_failures: bool = False) -> tuple[tuple[str, ...], str]:
    """Names of the policies that can produce a signature, and why."""
    names: list[str] = []
    reasons: list[str] = []
    for p in policies:
        if kind is SignatureKind.ENTRY_ASSERT:
            if p.entry_check is not EntryCheck.ASSERT or not p.cap:
                continue
            paths = leak_paths(p, config, alloc_failures=alloc_failures)
            if not paths:
                continue
            names.append(p.name)
            reasons.append(f"{p.name}: asserts at pad entry, expected is capped, leaks on "
                           + ", ".join(paths))
        elif kind is SignatureKind.SURPLUS_WARNING:
            if p.entry_check is EntryCheck.WARN:
                names.append(p.name)
                reasons.append(f"{p.name}: warns instead of asserting ({', '.join(p.prs[:1])})")
        elif kind is SignatureKind.ALLOC_FAILURE_WARNING:
            # Per path: a gated version tolerates a refused dummy only inside its gate.
            if any(p.alloc_failure_for(c) is AllocFailure.SKIP for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: a None dummy is warned about and padding skipped")
        elif kind is SignatureKind.KV_PRECHECK_WARNING:
            if any(p.prechecks(c) for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: prechecks the dummy's KV capacity and skips padding "
                               "when it cannot fit")
        elif kind is SignatureKind.ALLOC_FAILURE_CRASH:
            if any(p.alloc_failure_for(c) is AllocFailure.CRASH for _, c in _paths(config)):
                names.append(p.name)
                reasons.append(f"{p.name}: uses the dummy allocation result unchecked")
    if not names:
        return (), "no catalogue policy produces it" + (f" on a {_path_name(config)} run" if config else "")
    return tuple(names), "; ".join(reasons)



__all__ = ["leak_paths", "policies_for", "predicate_wider_than_scheduler"]
