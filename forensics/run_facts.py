"""What the logs (and stats) say about the run's configuration and build, with the evidence.

Serving mode (KV-cache transfer lines, messages or frames naming disaggregated serving), pp_size
(the pipeline loop in a traceback, micro-batch ids or batch sizes in the IterationStats), the
overlap loop (the loop function in a traceback), and the build era (iteration-line formats, the
version banner, which entry check fired). :class:`RunFacts` then lists the run configurations
still possible and whether a catalogue version fits the era.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

import pandas as pd

from forensics.readers import event_kinds as K
from replay.config import RunConfig

#: Iteration-line formats and the era each dates a build to (domain doc §8).
FORMAT_ERAS = {"V1": "early 2025", "V2": "2025", "V3": "late 2025 to early 2026",
               "V4": "May 2026 or later (PR #14206)", "V5": "August 2026 or later (PR #18308)"}
#: PR that introduced each format: a build printing it contains that PR.
FORMAT_PR = {"V4": 14206, "V5": 18308}
_DISAGG_WORDS = re.compile(r"disagg|transceiver|kv[ _]cache[ _]transfer|DISAGG_", re.I)


@dataclasses.dataclass(frozen=True)
class Fact:
    """One thing the logs establish about the run, with the evidence (or why it is unknown).

    Fields:
        name: ``serving mode``, ``pp_size``, ``overlap``, ``line format``, ``version``,
            ``entry check``.
        value: the value in words, or None when the logs do not show it.
        evidence: where it is seen (file:line, counts), or what was looked for.
    """

    name: str
    value: Optional[str]
    evidence: str

    def text(self) -> str:
        return f"{self.name}: {self.value if self.value is not None else 'unknown'} ({self.evidence})"


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """The configuration and build era the logs (and stats) show; None where they do not.

    Fields:
        disaggregated: a KV-cache transceiver (disaggregated serving).
        pp_size: pipeline stages when known exactly.
        pp_above_one: pp_size > 1 (True), == 1 (False) or unknown (None).
        overlap: the overlap loop (``_executor_loop_overlap``).
        line_formats: iteration-line formats seen (``V4``...).
        version: the ``TensorRT-LLM version`` banner, or None.
        entry_check: ``assert`` (entry assert seen) or ``warn`` (surplus warning seen), or None.
        facts: each of the above with its evidence, for reports.
    """

    disaggregated: Optional[bool]
    pp_size: Optional[int]
    pp_above_one: Optional[bool]
    overlap: Optional[bool]
    line_formats: tuple[str, ...]
    version: Optional[str]
    entry_check: Optional[str]
    facts: tuple[Fact, ...]

    def configs(self, tp_size: Optional[int] = None) -> list:
        """The run configurations still possible under these facts (unknowns expanded)."""
        modes = [self.disaggregated] if self.disaggregated is not None else [True, False]
        if self.pp_size is not None:
            pps = [self.pp_size]
        elif self.pp_above_one is not None:
            pps = [2] if self.pp_above_one else [1]
        else:
            pps = [1, 2]
        return [RunConfig(tp_size=tp_size or 2, disaggregated=d, pp_size=p,
                          overlap_scheduler=True if self.overlap is None else self.overlap)
                for d in modes for p in pps]

    def era_allows(self, policy) -> bool:
        """Whether a catalogue version fits the build era the line format dates (a build printing
        a format contains the PR that introduced it; one printing only older formats predates it)."""
        prs = [int(m) for m in re.findall(r"#(\d+)", " ".join(policy.prs))]
        if not prs or not self.line_formats:
            return True
        newest = max(FORMAT_PR.get(f, 0) for f in self.line_formats)
        if newest >= FORMAT_PR["V5"]:
            # PR #18308 is newer than every catalogue PR but #18157 (``newest``): such a build
            # carries them all and behaves like the newest version.
            return max(prs) >= 18000
        if newest < FORMAT_PR["V4"]:
            return min(prs) < FORMAT_PR["V4"]
        return True

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["facts"] = [dataclasses.asdict(f) for f in self.facts]
        return d


def infer_run_facts(iterations: Optional[pd.DataFrame], events: Optional[pd.DataFrame],
                    stats: Optional[pd.DataFrame] = None, *, crash_text: str = "") -> RunFacts:
    """Serving mode, pp_size, overlap and build era from the logs and stats, with the evidence.

    Args:
        iterations, events, stats: dataset tables (any may be empty or None).
        crash_text: the logged crash's traceback text (frame names say which loop ran).
    """
    iterations = iterations if iterations is not None else pd.DataFrame()
    events = events if events is not None else pd.DataFrame()
    stats = stats if stats is not None else pd.DataFrame()
    facts: list[Fact] = []

    # Overlap and pp from the loop function in the traceback.
    overlap = None
    pp_above: Optional[bool] = None
    pp_size: Optional[int] = None
    if "_executor_loop_overlap" in crash_text:
        overlap = True
        facts.append(Fact("overlap", "overlap loop", "traceback frame `_executor_loop_overlap`"))
    elif "_executor_loop_pp" in crash_text:
        pp_above = True
        facts.append(Fact("pp_size", "> 1", "traceback frame `_executor_loop_pp` (pipeline loop)"))
    elif re.search(r"in _executor_loop\b", crash_text):
        overlap = False
        facts.append(Fact("overlap", "non-overlap loop", "traceback frame `_executor_loop`"))
    else:
        facts.append(Fact("overlap", None, "no traceback naming the executor loop"))

    # pp_size from the stats: micro-batch ids above 0, or a batch too big for two stages.
    if pp_above is None and len(stats):
        pp_above, pp_size, ev = _pp_from_stats(stats, iterations)
        facts.append(Fact("pp_size", None if pp_above is None else
                          (str(pp_size) if pp_size else ("> 1" if pp_above else "1")), ev))
    elif pp_above is None:
        facts.append(Fact("pp_size", None, "no IterationStats (maxNumActiveRequests) to bound it"))

    # Serving mode: KV-transfer lines, or a message/frame naming disaggregated serving.
    disagg = None
    kinds = events["kind"] if "kind" in events.columns else pd.Series(dtype=str)
    kv = events[kinds.isin([K.KV_TRANSFER_TIMEOUT, K.KV_TRANSFER_ERROR])] if len(events) else events
    if len(kv):
        first = kv.iloc[0]
        disagg = True
        facts.append(Fact("serving mode", "disaggregated",
                          f"{len(kv)} KV-cache transfer timeout/error line(s), first at "
                          f"`{first['source']}:{int(first['line'])}`"))
    else:
        hit = None
        if len(events) and "message" in events.columns:
            msg = events["message"].astype("string").fillna("")
            m = msg.str.contains(_DISAGG_WORDS)
            if m.any():
                row = events[m.to_numpy(dtype=bool)].iloc[0]
                hit = f"`{row['source']}:{int(row['line'])}` mentions disaggregated serving"
        if hit is None and _DISAGG_WORDS.search(crash_text or ""):
            hit = "the traceback names a disaggregated-serving frame"
        if hit:
            disagg = True
            facts.append(Fact("serving mode", "disaggregated", hit))
        else:
            facts.append(Fact("serving mode", None, "no KV-cache transfer line, no message or "
                                                     "frame naming disaggregated serving"))

    # Build era: line formats and the version banner.
    formats: tuple[str, ...] = ()
    if len(iterations) and "format" in iterations.columns:
        counts = iterations["format"].dropna().astype(str).value_counts()
        formats = tuple(sorted(counts.index))
        if formats:
            facts.append(Fact("line format", ", ".join(formats),
                              "; ".join(f"{f}: {int(counts[f])} iteration line(s), "
                                        f"{FORMAT_ERAS.get(f, 'unknown era')}" for f in formats)))
    if not formats:
        facts.append(Fact("line format", None, "no iteration line"))
    version = None
    if len(events) and "version" in events.columns:
        v = events[events["version"].notna()]
        if len(v):
            version = str(v["version"].iloc[0])
            facts.append(Fact("version", version, f"banner at `{v['source'].iloc[0]}:"
                                                  f"{int(v['line'].iloc[0])}`"))
    if version is None:
        facts.append(Fact("version", None, "no `TensorRT-LLM version` banner"))
    entry = None
    if (kinds == K.ADP_ASSERT).any():
        entry = "assert"
        facts.append(Fact("entry check", "assert (before PR #17278)", "the entry assert fired"))
    elif (kinds == K.ADP_SURPLUS_TOLERATED).any():
        entry = "warn"
        facts.append(Fact("entry check", "surplus warning (PR #17278 or later)",
                          f"{int((kinds == K.ADP_SURPLUS_TOLERATED).sum())} surplus warning(s)"))
    return RunFacts(disaggregated=disagg, pp_size=pp_size, pp_above_one=pp_above, overlap=overlap,
                    line_formats=formats, version=version, entry_check=entry, facts=tuple(facts))


def _pp_from_stats(stats: pd.DataFrame, iterations: pd.DataFrame):
    """``(pp_above_one, pp_size or None, evidence)`` from IterationStats.

    ``maxNumActiveRequests`` is ``pp_size * max_batch_size`` and one rank's scheduled batch is at
    most ``max_batch_size``: a batch above half the cap leaves room for one stage only.
    """
    mb = None
    if "fields" in stats.columns:
        vals = [f.get("inflightBatchingStats.microBatchId") for f in stats["fields"]
                if isinstance(f, dict)]
        vals = [v for v in vals if v is not None and not pd.isna(v)]
        if vals and max(vals) > 0:
            mb = int(max(vals))
    if mb is not None:
        return True, None, f"microBatchId up to {mb} in the IterationStats: pp_size >= {mb + 1}"
    cap = pd.to_numeric(stats.get("max_num_active_requests", pd.Series(dtype=float)),
                        errors="coerce").dropna()
    sched = pd.to_numeric(stats.get("num_scheduled_requests", pd.Series(dtype=float)),
                          errors="coerce").dropna()
    if len(iterations) and "num_scheduled_requests" in iterations.columns:
        sched = pd.concat([sched, pd.to_numeric(iterations["num_scheduled_requests"],
                                                errors="coerce").dropna()])
    if not len(cap) or not len(sched):
        return None, None, "no maxNumActiveRequests or scheduled counts in the IterationStats"
    c, m = int(cap.max()), int(sched.max())
    if 2 * m > c:
        return False, 1, (f"a rank scheduled {m} requests against maxNumActiveRequests {c} "
                          f"(= pp_size x max_batch_size): only pp_size 1 leaves room for it")
    return None, None, (f"the largest batch ({m}) is at most half of maxNumActiveRequests ({c}): "
                        "pp_size 1 or more cannot be told apart")


__all__ = ["FORMAT_ERAS", "FORMAT_PR", "Fact", "RunFacts", "infer_run_facts"]
