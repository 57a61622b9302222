"""``findings.json``: the post-mortem's conclusions (:mod:`forensics.verdicts`) as plain JSON.

What ``forensics postmortem`` writes next to the report and what its ``--json`` prints: the
verdict line and what to do first, the exit status and its reason, every policy's replay and
verdict, the crash events of the logs, the causal chain with its mechanisms, the logs-only
findings, the recommended builds and the dataset summary.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from forensics.verdicts import Judgement


def findings_json(summary, results, verdicts, signatures, log_crash, lo, chain_policy, chain,
                  next_step, status, reason, config, runs) -> dict:
    primary = results.get(runs[0], {}) if runs else {}
    d: dict[str, Any] = {
        "tool": "adp-forensics postmortem",
        "exit_status": status,
        "status_reason": reason,
        "next_step": next_step,
        "run": runs[0] if runs else None,
        "config": config.to_record() if config else None,
        "policies": {name: r.to_json() for name, r in primary.items()},
        "verdicts": {v.policy: v.to_json() for v in verdicts},
        "log_crash": log_crash.to_json() if log_crash else None,
        "crash_events": [s.to_json() for s in signatures],
        "chain": {"policy": chain_policy, "lines": list(chain)},
        "logs_only": lo.to_json(),
        "dataset": summary.to_dict(),
    }
    if len(runs) > 1:
        d["runs"] = {run: {"policies": {n: r.to_json() for n, r in per.items()}}
                     for run, per in results.items()}
    return d


def report_findings(summary, results: dict, j: Judgement, signatures, log_crash, lo, config, runs,
                    *, lov=None, identified: Optional[dict] = None) -> dict:
    """``findings.json``'s content, the verdict line and what to do first: :func:`findings_json`
    with the opening, the headline, the logs-only verdict, the recommended builds, the chain's mechanisms and the identified eras."""
    findings = findings_json(summary, results, j.verdicts, signatures, log_crash, lo, j.chain_policy,
                             j.chain, j.next_step, j.status, j.reason, config, runs)
    findings = {"tool": findings.pop("tool"), "verdict": j.verdict,
                "what_to_do": [step.to_json() for step in j.what_to_do], **findings}
    findings.update(opening=j.opening, headline=j.headline,
                    logs_only_verdict=None if lov is None else lov.to_json(),
                    recommended=[dataclasses.asdict(a) for a in j.recommended])
    findings["chain"]["mechanisms"] = [m.to_json() for m in j.mechanisms]
    findings["identified"] = {spec: ident.to_json() for spec, ident in (identified or {}).items()}
    return findings


__all__ = ["findings_json", "report_findings"]
