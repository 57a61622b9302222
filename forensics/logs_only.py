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
from typing import Optional

import numpy as np
import pandas as pd

from forensics.readers import event_kinds as K
from forensics.reconstruct.log_state import log_state, logged_batches

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
                       f"({ranks_text(self.ranks_logging) or 'none'}).")
        if self.iterations_all_known:
            if self.fleet_skips:
                first = self.fleet_skips[0]
                out.append(f"{self.fleet_skip_count} fleet-wide skip(s) with work pending in the "
                           f"{self.iterations_all_known} iteration(s) where every rank logs; the "
                           f"first at iteration {first.iter}, caused by the zero batch of rank(s) "
                           f"{ranks_text(first.zero_ranks)} while rank(s) {ranks_text(first.busy_ranks)} "
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


def ranks_text(ranks) -> str:
    """``0, 2, 3``: ranks in words, in the order given."""
    return ", ".join(str(r) for r in ranks)


def log_decisions(iterations: pd.DataFrame, fleet_size: Optional[int] = None) -> pd.DataFrame:
    """Per (iter, rank) batch sizes from iteration lines, with ``can_queue`` where it is known.

    Built on :func:`forensics.reconstruct.log_state` (which owns the numbering and the
    known/unknown rule) plus the dummy tokens of V5 lines. Returns columns ``iter`` (executor
    numbering), ``rank``, ``batch`` (nullable: the rank did not log), ``can_queue`` (nullable:
    unknown), ``padded`` (a dummy was forwarded; null where the line does not say).
    """
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
        missing.append(f"Iteration lines from every rank (only {ranks_text(ranks_logging) or 'none'} "
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
    "ranks_text",
    "logs_only_findings",
]
