"""What ``forensics postmortem`` returns: the files written and the verdicts behind them (a value of
its own so that the pipeline module holds only the pipeline)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

from forensics.crash_signatures import Signature
from forensics.logs_only import LogsOnlyFindings
from forensics.verdicts import PolicyVerdict


@dataclasses.dataclass(frozen=True)
class PostmortemResult:
    """What the post-mortem found and wrote: the files (``out_dir``, ``report_md``,
    ``report_html``, ``findings_json``, ``figures``), the traced run replayed (``run``, the first
    when several; None: logs only), the verdicts of :mod:`forensics.verdicts` (``verdicts`` per
    policy in catalogue order, ``log_crash``, ``signatures``, ``chain_policy`` and its ``chain``,
    ``logs_only``, ``next_step``, ``exit_status`` and ``status_reason``, ``opening``,
    ``headline``, ``mechanisms``, ``recommended`` builds, ``logs_verdict`` without traces, and
    first of all the ``verdict`` line and ``what_to_do``, :mod:`forensics.answer`), the
    dataset ``summary``, the ``findings.json`` content and, per ``trtllm:`` policy given, the
    catalogue policy the build behaves as (``identified``), and where the time went
    (``timings``: :meth:`replay.stage_clock.StageClock.report`)."""

    out_dir: Path
    report_md: Path
    report_html: Path
    findings_json: Path
    figures: tuple[Path, ...]
    run: Optional[str]
    verdicts: tuple[PolicyVerdict, ...]
    log_crash: Optional[Signature]
    signatures: tuple[Signature, ...]
    chain_policy: Optional[str]
    chain: tuple[str, ...]
    logs_only: LogsOnlyFindings
    next_step: str
    exit_status: int
    status_reason: str
    summary: Any
    findings: dict = dataclasses.field(repr=False, default_factory=dict)
    opening: str = ""
    headline: str = ""
    mechanisms: tuple = ()
    recommended: tuple = ()
    logs_verdict: Any = None
    identified: dict = dataclasses.field(default_factory=dict)
    verdict: str = ""
    what_to_do: tuple = ()
    timings: dict = dataclasses.field(repr=False, default_factory=dict)


__all__ = ["PostmortemResult"]
