"""What executor logs alone (no request-state trace) still say, and what they cannot.

Without a trace no replay is possible: the logs do not say which request was in which state. They
still show the crash signature, the per-rank batch sizes of the ranks that print iteration lines
(``num_scheduled_requests``), hence the fleet-wide skips where every rank logs (``can_queue`` is
"no zero among the batch sizes", domain doc §4.7), surplus warnings (PR #17278) and, on V5 lines
(PR #18308), the dummy tokens each rank actually forwarded.

Iteration numbering: an iteration line is printed at the top of the next loop, so its ``iter`` is
one more than the executor's ``iter_counter`` of the body it describes (domain doc §8). Findings
here use the executor's numbering (line ``iter`` - 1), like traces and replays.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np
import pandas as pd

from forensics.readers import event_kinds as K

#: How to record a replayable run next time (shown verbatim in reports).
RECORDING_DOC = "docs/recording.md"
TRACE_ENV = "ADP_FORENSICS_TRACE_DIR"
LOG_RANKS_ENV = "TLLM_PROFILE_LOG_RANKS"
#: Fleet skips listed one by one (the rest are counted).
MAX_LISTED_SKIPS = 200


@dataclasses.dataclass(frozen=True)
class FleetSkip:
    """An iteration every rank logged in which some rank offered a batch of 0.

    Fields:
        iter: executor iteration (line ``iter`` - 1).
        zero_ranks: ranks whose batch was 0 (they made ``can_queue`` False everywhere).
        busy_ranks: ranks with a non-zero batch that were skipped with them.
    """

    iter: int
    zero_ranks: tuple[int, ...]
    busy_ranks: tuple[int, ...]

    def to_json(self) -> dict:
        return {"iter": self.iter, "zero_ranks": list(self.zero_ranks), "busy_ranks": list(self.busy_ranks)}


@dataclasses.dataclass(frozen=True)
class LogsOnlyFindings:
    """What the logs establish without a trace.

    Fields:
        fleet_size: ranks in the fleet (``tp_size`` of a run record, else highest rank seen + 1),
            or None when no line names a rank.
        fleet_size_known: ``fleet_size`` comes from a run record rather than from the ranks seen.
        ranks_seen: every rank named by any log line.
        ranks_logging: ranks that print iteration lines with a batch size.
        iterations_all_known: iterations for which every rank's batch size is logged.
        iterations_unknown: iterations with some rank's batch size missing (``can_queue`` unknown).
        fleet_skips: skips with work pending (some rank busy, some at 0), first first (at most
            ``MAX_LISTED_SKIPS``).
        fleet_skip_count: how many such skips in all.
        idle_iterations: iterations where every rank offered 0 (an idle fleet, harmless).
        surplus_warnings: number of surplus warnings.
        max_surplus: largest ``num_active - num_expected`` warned about, or None.
        alloc_failures: "Cannot allocate ... pad dummy" warnings.
        dummy_skips: "Skipped adding dummy requests" lines.
        kv_transfer_problems: KV-cache transfer timeouts and errors.
        dummy_tokens_logged: some iteration line carries ``adp_dummy_*_tokens`` (V5 format).
        dummy_forwarded: rank -> iterations in which it forwarded a dummy (non-zero tokens).
        dummy_forwarded_in_skips: (iter, rank) where a dummy was forwarded right after a
            fleet skip on that rank -- a dummy that probably survived the skip.
        missing: what is missing to replay, each with how to record it next time.
    """

    fleet_size: Optional[int]
    fleet_size_known: bool
    ranks_seen: tuple[int, ...]
    ranks_logging: tuple[int, ...]
    iterations_all_known: int
    iterations_unknown: int
    fleet_skips: tuple[FleetSkip, ...]
    fleet_skip_count: int
    idle_iterations: int
    surplus_warnings: int
    max_surplus: Optional[int]
    alloc_failures: int
    dummy_skips: int
    kv_transfer_problems: int
    dummy_tokens_logged: bool
    dummy_forwarded: dict[int, int]
    dummy_forwarded_in_skips: tuple[tuple[int, int], ...]
    missing: tuple[str, ...]

    def conclusions(self) -> list[str]:
        """Plain sentences of what can be concluded."""
        out = []
        if self.fleet_size is None:
            out.append("No line names a rank: the fleet's size is unknown.")
        else:
            how = "from the run record" if self.fleet_size_known else "assumed from the highest rank seen"
            out.append(f"Fleet of {self.fleet_size} rank(s) ({how}); {len(self.ranks_logging)} "
                       f"print iteration lines with a batch size "
                       f"({_ranks(self.ranks_logging) or 'none'}).")
        if self.iterations_all_known:
            if self.fleet_skips:
                first = self.fleet_skips[0]
                out.append(f"{self.fleet_skip_count} fleet-wide skip(s) with work pending in the "
                           f"{self.iterations_all_known} iteration(s) where every rank logs; the "
                           f"first at iteration {first.iter}, caused by the zero batch of rank(s) "
                           f"{_ranks(first.zero_ranks)} while rank(s) {_ranks(first.busy_ranks)} "
                           "had work: any dummy padded there survived the skip.")
            else:
                out.append(f"No fleet-wide skip with work pending in the {self.iterations_all_known} "
                           "iteration(s) where every rank logs.")
        if self.iterations_unknown:
            out.append(f"can_queue is unknown for {self.iterations_unknown} iteration(s): not every "
                       "rank logged its batch size there.")
        if self.surplus_warnings:
            out.append(f"{self.surplus_warnings} surplus warning(s) (PR #17278): a rank held more "
                       f"requests than expected (by up to {self.max_surplus}), which is what a "
                       "leaked dummy does under a tolerant build.")
        if self.alloc_failures:
            out.append(f"{self.alloc_failures} failed pad-dummy allocation(s): a rank that wanted a "
                       "dummy ran with a batch of 0 instead.")
        if self.kv_transfer_problems:
            out.append(f"{self.kv_transfer_problems} KV-cache transfer timeout(s)/error(s): ranks "
                       "awaiting KV are the ones that get padded.")
        if self.dummy_tokens_logged:
            total = sum(self.dummy_forwarded.values())
            out.append(f"Dummies forwarded (adp_dummy_*_tokens > 0) in {total} rank-iteration(s)"
                       + (f"; {len(self.dummy_forwarded_in_skips)} right after a skip on the same "
                          "rank (a dummy that likely survived it)" if self.dummy_forwarded_in_skips else "")
                       + ".")
        return out

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["fleet_skips"] = [s.to_json() for s in self.fleet_skips]
        d["dummy_forwarded"] = {str(k): v for k, v in self.dummy_forwarded.items()}
        d["dummy_forwarded_in_skips"] = [list(x) for x in self.dummy_forwarded_in_skips]
        d["ranks_seen"] = list(self.ranks_seen)
        d["ranks_logging"] = list(self.ranks_logging)
        d["missing"] = list(self.missing)
        d["conclusions"] = self.conclusions()
        return d


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in ranks)


def log_decisions(iterations: pd.DataFrame, fleet_size: Optional[int] = None) -> pd.DataFrame:
    """Per (iter, rank) batch sizes from iteration lines, with ``can_queue`` where it is known.

    Built on :func:`forensics.reconstruct.log_state` (which owns the numbering and the
    known/unknown rule) plus the dummy tokens of V5 lines. Returns columns ``iter`` (executor
    numbering), ``rank``, ``batch`` (nullable: the rank did not log), ``can_queue`` (nullable:
    unknown), ``padded`` (a dummy was forwarded; null where the line does not say).
    """
    from forensics.reconstruct import log_state

    cols = ["iter", "rank", "batch", "can_queue", "padded"]
    if iterations is None or not len(iterations) or "num_scheduled_requests" not in iterations:
        return pd.DataFrame(columns=cols)
    st = log_state(iterations, fleet_size)
    if not len(st):
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame({"iter": st["iter"].astype("int64"), "rank": st["rank"].astype("int64"),
                       "batch": st["batch"].astype("Int64"),
                       "can_queue": st["can_queue"].map({"true": True, "false": False})
                       .astype("boolean")})
    tok_cols = [c for c in ("adp_dummy_ctx_tokens", "adp_dummy_gen_tokens") if c in iterations]
    padded = pd.Series(pd.NA, index=df.index, dtype="boolean")
    if tok_cols:
        it = iterations[iterations["iter"].notna() & iterations["rank"].notna()]
        tokens = sum(pd.to_numeric(it[c], errors="coerce").astype("Float64").fillna(0)
                     for c in tok_cols)
        logged = it[tok_cols].notna().any(axis=1).to_numpy()
        tok = pd.DataFrame({"iter": it["iter"].astype("int64").to_numpy() - 1,
                            "rank": it["rank"].astype("int64").to_numpy(),
                            "fw": pd.array(np.where(logged, tokens.to_numpy(dtype=float) > 0, False),
                                           dtype="boolean")})
        tok.loc[~logged, "fw"] = pd.NA
        tok = tok.drop_duplicates(["iter", "rank"], keep="first")
        padded = df[["iter", "rank"]].merge(tok, on=["iter", "rank"], how="left")["fw"]
        padded.index = df.index
    df["padded"] = padded.astype("boolean")
    return df[cols].sort_values(["iter", "rank"]).reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class _LoggedIterations:
    """What :func:`logs_only_findings` needs of the (iteration x rank) grid of
    :func:`log_decisions`, from the logged lines alone: per iteration, how many ranks logged a
    batch, how many a zero, how many work. The grid of a fleet hour where only rank 0 logs has
    32 rows per line; these arrays have one entry per iteration.

    Fields:
        lines: the logged batches (``forensics.reconstruct.log_state.logged_batches``).
        ranks: ranks of the grid (``R``).
        iters: executor iterations of the grid, ascending (line ``iter`` - 1).
        row: each line's position in ``iters``.
        logged, zero, busy: per iteration, ranks with a batch, with 0, with more than 0.
    """

    lines: pd.DataFrame
    ranks: int
    iters: np.ndarray
    row: np.ndarray
    logged: np.ndarray
    zero: np.ndarray
    busy: np.ndarray

    @classmethod
    def of(cls, iterations: pd.DataFrame, fleet: Optional[int]) -> "_LoggedIterations":
        from forensics.reconstruct.log_state import logged_batches

        empty = np.zeros(0, np.int64)
        if iterations is None or not len(iterations) or "num_scheduled_requests" not in iterations:
            return cls(pd.DataFrame(), 0, empty, empty, empty, empty, empty)
        lines, R = logged_batches(iterations, fleet)
        if lines.empty:
            return cls(lines, R, empty, empty, empty, empty, empty)
        log_iter = lines["log_iter"].to_numpy(np.int64)
        iters = np.unique(log_iter)
        row = np.searchsorted(iters, log_iter)
        batch = lines["batch"].to_numpy(np.int64)
        n = iters.size
        return cls(lines, R, iters - 1, row, np.bincount(row, minlength=n),
                   np.bincount(row, weights=batch == 0, minlength=n).astype(np.int64),
                   np.bincount(row, weights=batch > 0, minlength=n).astype(np.int64))

    @property
    def ranks_logging(self) -> tuple[int, ...]:
        if not len(self.lines):
            return ()
        return tuple(int(r) for r in np.unique(self.lines["rank"].to_numpy(np.int64)))

    @property
    def known(self) -> np.ndarray:
        return self.logged == self.ranks

    @property
    def all_known(self) -> int:
        return int(self.known.sum())

    @property
    def unknown(self) -> int:
        return int((~self.known).sum())

    @property
    def skip_rows(self) -> np.ndarray:
        return np.flatnonzero((self.zero > 0) & (self.busy > 0))

    @property
    def skip_count(self) -> int:
        return int(self.skip_rows.size)

    @property
    def idle(self) -> int:
        return int(((self.zero > 0) & (self.busy == 0) & self.known).sum())

    def skips(self) -> list[FleetSkip]:
        """The first ``MAX_LISTED_SKIPS`` fleet skips with work pending, ranks ascending."""
        out = []
        if not len(self.lines):
            return out
        rank = self.lines["rank"].to_numpy(np.int64)
        batch = self.lines["batch"].to_numpy(np.int64)
        for r in self.skip_rows[:MAX_LISTED_SKIPS]:
            at = self.row == r   # lines are sorted by (iteration, rank)
            out.append(FleetSkip(int(self.iters[r]), tuple(int(x) for x in rank[at & (batch == 0)]),
                                 tuple(int(x) for x in rank[at & (batch > 0)])))
        return out

    def forwarded(self, iterations: pd.DataFrame, skips: list[FleetSkip]
                  ) -> tuple[bool, dict[int, int], list[tuple[int, int]]]:
        """``(dummy tokens logged, rank -> iterations forwarding a dummy, (iter, rank) forwarded
        right after a listed skip)`` from the V5 dummy-token columns of the grid's cells."""
        tok_cols = [c for c in ("adp_dummy_ctx_tokens", "adp_dummy_gen_tokens") if c in iterations]
        if not tok_cols or not len(self.lines):
            return False, {}, []
        it = iterations[iterations["iter"].notna() & iterations["rank"].notna()]
        tokens = sum(pd.to_numeric(it[c], errors="coerce").astype("Float64").fillna(0)
                     for c in tok_cols)
        tok = pd.DataFrame({"iter": it["iter"].astype("int64").to_numpy() - 1,
                            "rank": it["rank"].astype("int64").to_numpy(),
                            "logged": it[tok_cols].notna().any(axis=1).to_numpy(),
                            "fw": tokens.to_numpy(dtype=float) > 0})
        tok = tok.drop_duplicates(["iter", "rank"], keep="first")
        # Only the grid's cells count: iterations some rank logged a batch for, ranks [0, R).
        tok = tok[np.isin(tok["iter"].to_numpy(), self.iters) & (tok["rank"] >= 0)
                  & (tok["rank"] < self.ranks) & tok["logged"]]
        if not len(tok):
            return False, {}, []
        fw = tok[tok["fw"]].sort_values(["iter", "rank"])
        forwarded = {int(r): int(n) for r, n in fw.groupby("rank").size().items()}
        skipped = {(s.iter, r) for s in skips for r in s.busy_ranks}
        after = sorted((int(i), int(r)) for i, r in zip(fw["iter"], fw["rank"])
                       if (int(i) - 1, int(r)) in skipped)
        return True, forwarded, after


def logs_only_findings(iterations: pd.DataFrame, events: pd.DataFrame, *,
                       tp_size: Optional[int] = None, has_traces: bool = False) -> LogsOnlyFindings:
    """Conclude what the logs allow; list what is missing and how to record it.

    Args:
        iterations, events: the dataset tables.
        tp_size: the fleet size when a run record gives it.
        has_traces: the inputs did include request-state traces (then nothing is missing there).
    """
    iterations = iterations if iterations is not None else pd.DataFrame(columns=["rank", "iter"])
    events = events if events is not None else pd.DataFrame(columns=["rank", "kind"])
    ranks_seen = sorted({int(r) for r in pd.concat([iterations.get("rank", pd.Series(dtype="Int64")),
                                                     events.get("rank", pd.Series(dtype="Int64"))])
                         .dropna().unique()})
    fleet = tp_size or (max(ranks_seen) + 1 if ranks_seen else None)
    agg = _LoggedIterations.of(iterations, fleet)
    ranks_logging = agg.ranks_logging
    skips = agg.skips()
    kinds = events["kind"] if "kind" in events.columns else pd.Series(dtype=str)
    surplus = events[kinds == K.ADP_SURPLUS_TOLERATED] if len(events) else events
    max_surplus = None
    if len(surplus) and {"num_active", "num_expected"} <= set(surplus.columns):
        diff = (pd.to_numeric(surplus["num_active"], errors="coerce")
                - pd.to_numeric(surplus["num_expected"], errors="coerce")).dropna()
        max_surplus = int(diff.max()) if len(diff) else None
    tokens_logged, forwarded, after_skip = agg.forwarded(iterations, skips)
    all_known, unknown, n_skips, idle = agg.all_known, agg.unknown, agg.skip_count, agg.idle
    missing: list[str] = []
    if not has_traces:
        missing.append(f"Request-state traces: without them no replay can say which requests were "
                       f"in which state, which dummy leaked or which build would have survived. "
                       f"Record them by setting {TRACE_ENV}=DIR on every rank (see {RECORDING_DOC}).")
    # One rank alone says nothing about the fleet's size: by default only rank 0 prints (§8).
    lone = tp_size is None and len(ranks_logging) <= 1
    if fleet is None or lone or len(ranks_logging) < fleet:
        missing.append(f"Iteration lines from every rank (only {_ranks(ranks_logging) or 'none'} "
                       f"logged a batch size): set {LOG_RANKS_ENV}=all and enable print_iter_log, "
                       "so can_queue and the fleet-wide skips are known for every iteration.")
    if ranks_logging and not tokens_logged:
        missing.append("Dummy tokens per iteration (adp_dummy_ctx_tokens / adp_dummy_gen_tokens, "
                       "iteration-log format V5, PR #18308): use a build that logs them to see "
                       "which ranks forwarded a dummy.")
    return LogsOnlyFindings(
        fleet_size=fleet, fleet_size_known=tp_size is not None, ranks_seen=tuple(ranks_seen),
        ranks_logging=ranks_logging, iterations_all_known=all_known, iterations_unknown=unknown,
        fleet_skips=tuple(skips), fleet_skip_count=n_skips, idle_iterations=idle, surplus_warnings=int(len(surplus)),
        max_surplus=max_surplus,
        alloc_failures=int((kinds == K.ADP_DUMMY_ALLOC_FAILED).sum()),
        dummy_skips=int((kinds == K.ADP_DUMMY_SKIPPED).sum()),
        kv_transfer_problems=int(kinds.isin([K.KV_TRANSFER_TIMEOUT, K.KV_TRANSFER_ERROR]).sum()),
        dummy_tokens_logged=tokens_logged, dummy_forwarded=forwarded,
        dummy_forwarded_in_skips=tuple(after_skip), missing=tuple(missing))


__all__ = [
    "LOG_RANKS_ENV",
    "RECORDING_DOC",
    "TRACE_ENV",
    "FleetSkip",
    "LogsOnlyFindings",
    "log_decisions",
    "logs_only_findings",
]


# --- what the logs say about the run's configuration and build ------------------------------------

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
        from replay.config import RunConfig
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


@dataclasses.dataclass(frozen=True)
class ChainInLogs:
    """The NVBug 6438685 pattern as the iteration lines show it: a fleet-wide skip with the
    crashing rank busy (padded or working) and another rank at batch 0, then the crash.

    Fields:
        skip_iter: the last such skip before the crash.
        zero_ranks: ranks at batch 0 in it.
        crash_rank, crash_iter: the logged crash.
        forwarded: the crashing rank forwarded a dummy right after ``skip_iter`` (V5 tokens),
            None when the lines do not log dummy tokens.
    """

    skip_iter: int
    zero_ranks: tuple[int, ...]
    crash_rank: int
    crash_iter: int
    forwarded: Optional[bool]

    def text(self) -> str:
        fw = {True: f"; rank {self.crash_rank} forwarded a dummy right after it (V5 tokens)",
              False: f"; rank {self.crash_rank} forwarded no dummy right after it (V5 tokens)",
              None: ""}[self.forwarded]
        gap = self.crash_iter - self.skip_iter
        return (f"fleet-wide skip at iteration {self.skip_iter} (rank"
                f"{'s' if len(self.zero_ranks) > 1 else ''} {_ranks(self.zero_ranks)} at batch 0 "
                f"while rank {self.crash_rank} was busy){fw}, then the crash on rank "
                f"{self.crash_rank} {gap} iteration{'s' if gap != 1 else ''} later")


def chain_in_logs(lo: LogsOnlyFindings, crash_rank: Optional[int],
                  crash_iter: Optional[int]) -> Optional[ChainInLogs]:
    """The skip before the crash that could have left a dummy on the crashing rank, or None."""
    if crash_rank is None or crash_iter is None:
        return None
    before = [s for s in lo.fleet_skips if s.iter < crash_iter and crash_rank in s.busy_ranks]
    if not before:
        return None
    s = before[-1]
    fw = None
    if lo.dummy_tokens_logged:
        fw = (s.iter + 1, crash_rank) in set(lo.dummy_forwarded_in_skips)
    return ChainInLogs(skip_iter=s.iter, zero_ranks=s.zero_ranks, crash_rank=crash_rank,
                       crash_iter=crash_iter, forwarded=fw)


__all__ += ["ChainInLogs", "Fact", "RunFacts", "chain_in_logs", "infer_run_facts"]


@dataclasses.dataclass(frozen=True)
class LogsOnlyVerdict:
    """What a post-mortem without traces concludes about a logged crash.

    Fields:
        facts: the run's configuration and era as the logs show them.
        policies: catalogue versions that produce the signature on a configuration and in an
            era the facts allow.
        reason: why those (per version, the paths).
        chain: the NVBug 6438685 pattern in the iteration lines, or None.
        survivors: per path still possible (``"disaggregated, pp_size 1"``), the catalogue
            builds that close the leak there.
        explained: the logs alone explain the crash (pattern seen, a version produces it).
    """

    facts: RunFacts
    policies: tuple[str, ...]
    reason: str
    chain: Optional[ChainInLogs]
    survivors: tuple[tuple[str, tuple[str, ...]], ...]
    explained: bool

    def survivors_text(self) -> str:
        parts = []
        for label, names in self.survivors:
            parts.append(f"on {label}: " + (", ".join(names) if names else
                                            "no catalogue build (tolerant-17278 and later only warn)"))
        return "; ".join(parts)

    def unknown(self) -> list[str]:
        return [f.name for f in self.facts.facts if f.value is None
                and f.name in ("serving mode", "pp_size", "overlap")]

    def to_json(self) -> dict:
        return {"facts": self.facts.to_json(), "policies": list(self.policies),
                "reason": self.reason,
                "chain": None if self.chain is None else {**dataclasses.asdict(self.chain),
                                                          "text": self.chain.text()},
                "survivors": [{"path": p, "builds": list(b)} for p, b in self.survivors],
                "explained": self.explained}


def judge_logs_only(sig, lo: LogsOnlyFindings, facts: RunFacts, policies) -> LogsOnlyVerdict:
    """Match a logged crash signature only against versions possible under ``facts``, look for
    the NVBug chain in the iteration lines, and name the builds that survive on each path."""
    from forensics.report.crash_signatures import policies_for
    from forensics.report.paths import clean_builds, path_label

    configs = facts.configs(lo.fleet_size)
    allowed = [p for p in policies if facts.era_allows(p)]
    where: dict[str, list[str]] = {}
    alloc = lo.alloc_failures > 0
    for cfg in configs:
        got, _ = policies_for(sig.kind, allowed, cfg, alloc_failures=alloc)
        for n in got:
            where.setdefault(n, []).append(path_label(cfg))
    order = [p.name for p in policies]
    names = sorted(where, key=order.index)
    every = len(configs)
    reason = "; ".join(f"{n} on {'every path left open' if len(where[n]) == every and every > 1 else ' or '.join(where[n])}"
                       for n in names) or "no catalogue version produces it under what the logs show"
    dropped = [p.name for p in policies if p not in allowed]
    if dropped:
        reason += (f" (left out by the line format {', '.join(facts.line_formats)}: "
                   f"{', '.join(dropped)})")
    chain = chain_in_logs(lo, sig.rank, sig.iter) if sig.kind.name == "ENTRY_ASSERT" else None
    survivors = []
    seen = set()
    for cfg in configs:
        label = path_label(cfg)
        if label in seen:
            continue
        seen.add(label)
        # What to move to is any version, not only those of the crashed build's era.
        survivors.append((label, tuple(a.policy + (f" ({a.condition})" if a.condition else "")
                                       for a in clean_builds(policies, cfg))))
    return LogsOnlyVerdict(facts=facts, policies=tuple(names), reason=reason, chain=chain,
                           survivors=tuple(survivors),
                           explained=bool(chain is not None and names))


__all__ += ["LogsOnlyVerdict", "judge_logs_only"]
