"""The verdict rules: what a post-mortem concludes from the replays and the logs.

Pure functions of the replay results (``replay.results.ReplayResult`` per policy), the crash
signatures and the logs-only findings: each policy's verdict, the exit status and its reason,
the policy whose story is told, its causal chain, the builds to move to, the report's opening
sentence, headline and next step, and the fleet verdict of one replay (:func:`run_metrics`).
Nothing here reads inputs, writes files or renders; ``forensics.pipeline`` calls these,
``forensics.report`` renders what they return, ``forensics.findings`` writes them as
``findings.json`` (the ``--json`` output), and ``forensics.investigate`` and
``forensics.fleet`` use the same rules.

Exit status:

- 0 (:data:`EXIT_CLEAN`): no leak and no crash, neither in the logs nor in any replay;
- 1 (:data:`EXIT_EXPLAINED`): a leak or a crash, explained (a replay reproduces the logged
  crash, or the replays or the logs show a leak);
- 2 (:data:`EXIT_BAD_INPUT`): bad input (nothing usable, or an input was refused);
- 3 (:data:`EXIT_UNEXPLAINED`): the logs show a crash that is not explained, with the reason (no
  request traces, no policy reproduces it, or not a pad-dummy signature).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from forensics.answer import verdict_line, what_to_do
from forensics.causal_chain import mechanisms, opening_sentence
from forensics.crash_signatures import Signature, excerpt, outside_catalogue
from forensics.logs_only import (
    LOG_RANKS_ENV,
    RECORDING_DOC,
    TRACE_ENV,
    LogsOnlyFindings,
)
from forensics.logs_verdict import judge_logs_only
from forensics.open_paths import clean_builds, path_label
from forensics.readers import event_kinds as K
from forensics.report.document import code
from forensics.run_facts import infer_run_facts
from forensics.signature_kinds import REPLAY_CRASH_KIND

logger = logging.getLogger(__name__)

EXIT_CLEAN, EXIT_EXPLAINED, EXIT_BAD_INPUT, EXIT_UNEXPLAINED = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class PolicyVerdict:
    """What one policy does with the traced run.

    Fields:
        policy: catalogue name.
        title: the policy's one-line description.
        verdict: ``"crash"``, ``"leak"`` or ``"clean"``.
        leaks: number of leaked dummies.
        crash: ``{"iter", "rank", "kind", "expected", "active"}`` or None.
        first_leak: ``{"rank", "iter_created", "iter_skipped", "cause_ranks"}`` or None.
        reproduces_log_crash: the replay crashes like the logs (kind, rank, iteration); None when
            the logs show no crash.
        reproduces_log_warnings: every surplus warning of the logs (rank, active, expected) is
            one this replay warns about too; None when the logs show none.
        is_recording_build: the run record names this policy as its build.
        first_divergence: the first recorded decision not reproduced, or None.
        text: one plain sentence.
    """

    policy: str
    title: str
    verdict: str
    leaks: int
    crash: Optional[dict]
    first_leak: Optional[dict]
    reproduces_log_crash: Optional[bool]
    reproduces_log_warnings: Optional[bool]
    is_recording_build: bool
    first_divergence: Optional[dict]
    text: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def policy_verdict(name: str, result, log_crash: Optional[Signature], build: str,
             logged: set[tuple] = frozenset()) -> PolicyVerdict:
    leaks = result.leak_records
    crash = _crash_dict(result.crash)
    first = result.first_leak.to_json() if leaks else None
    if crash:
        text = (f"crashes at iteration {crash['iter']} on rank {crash['rank']} ({crash['kind']}: "
                f"{crash['active']} active > expected {crash['expected']})"
                + (f" after {len(leaks)} leaked dumm{'y' if len(leaks) == 1 else 'ies'}" if leaks else ""))
    elif leaks:
        text = (f"{len(leaks)} leaked dumm{'y' if len(leaks) == 1 else 'ies'}, no crash (first on rank "
                f"{first['rank']}, padded at {first['iter_created']}, survived the skip at "
                f"{first['iter_skipped']})")
    else:
        text = "no leak, no crash"
    div = result.first_divergence.to_json() if result.first_divergence is not None else None
    return PolicyVerdict(policy=name, title=result.policy.title, verdict=result.verdict,
                         leaks=len(leaks), crash=crash, first_leak=first,
                         reproduces_log_crash=matches_log_crash(result.crash, log_crash),
                         reproduces_log_warnings=matches_log_warnings(
                             _surplus_rows(result) if logged else pd.DataFrame(), set(logged)),
                         is_recording_build=(name == build), first_divergence=div, text=text)


def _crash_dict(crash) -> Optional[dict]:
    if crash is None:
        return None
    return {"iter": int(crash.iter), "rank": int(crash.rank), "ranks": [int(r) for r in crash.ranks],
            "kind": str(crash.kind), "expected": int(crash.expected), "active": int(crash.active)}


def matches_log_crash(crash, sig: Optional[Signature]) -> Optional[bool]:
    """Whether a replayed crash is the one the logs show.

    Same signature kind; same rank when the log names one (any of the crashing ranks); same
    iteration when the log names one -- within one iteration when it was inferred from the
    preceding iteration line, whose numbering is only one loop apart (domain doc §8).
    """
    if sig is None:
        return None
    if crash is None:
        return False
    if REPLAY_CRASH_KIND.get(str(crash.kind)) is not sig.kind:
        return False
    if sig.rank is not None and sig.rank not in tuple(int(r) for r in crash.ranks):
        return False
    if sig.iter is not None:
        slack = 1 if sig.iter_inferred else 0
        if abs(int(crash.iter) - int(sig.iter)) > slack:
            return False
    return True


def logged_surplus(events: pd.DataFrame) -> set[tuple]:
    """``(rank, active, expected)`` of every surplus warning in the logs (rank None if unknown)."""
    if events is None or not len(events):
        return set()
    ev = events[events["kind"] == K.ADP_SURPLUS_TOLERATED]
    out = set()
    for rank, a, e in zip(ev["rank"], ev["num_active"], ev["num_expected"]):
        if pd.isna(a) or pd.isna(e):
            continue
        out.add((None if pd.isna(rank) else int(rank), int(a), int(e)))
    return out


def replay_surplus(decisions: pd.DataFrame) -> set[tuple]:
    """``(rank, active, expected)`` of every surplus a replay tolerated (warned, no crash)."""
    if not len(decisions) or "surplus" not in decisions.columns:
        return set()
    hit = decisions["surplus"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    if "crash" in decisions.columns:
        hit &= ~decisions["crash"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    d = decisions[hit]
    return {(int(r), int(a), int(e)) for r, a, e in zip(d["rank"], d["active"], d["expected"])}


def matches_log_warnings(decisions: pd.DataFrame, logged: set[tuple]) -> Optional[bool]:
    """Whether a replay warns about every surplus the logs warn about (None: the logs have none)."""
    if not logged:
        return None
    mine = replay_surplus(decisions)
    loose = {(a, e) for _, a, e in mine}
    return all(((r, a, e) in mine) if r is not None else ((a, e) in loose) for r, a, e in logged)


def _surplus_rows(result) -> pd.DataFrame:
    """The decisions rows a surplus warning comes from (read from the file of a streamed replay)."""
    return result.read_decisions([("surplus", "==", True)],
                                 columns=["rank", "active", "expected", "surplus", "crash"])


def exit_status(ds, refused, log_crash, verdicts, lo: LogsOnlyFindings, has_traces: bool,
            has_signatures: bool, lov=None) -> tuple[int, str]:
    if refused:
        names = "; ".join(f"{code(r.get('name'))}: {r.get('reason')}" for r in refused)
        return EXIT_BAD_INPUT, f"input(s) not ingested: {names}"
    if not has_traces and not len(ds.iterations) and not has_signatures:
        return EXIT_BAD_INPUT, ("nothing usable in the inputs: no executor iteration line, no "
                                "pad-dummy or crash event and no request-state trace")
    if log_crash is not None:
        if not log_crash.kind.is_cause:
            return EXIT_UNEXPLAINED, outside_catalogue(log_crash)
        if not has_traces and lov is not None and lov.explained:
            return EXIT_EXPLAINED, (f"the logs show the NVBug 6438685 chain: {lov.chain.text()}; "
                                    f"the {log_crash.kind.value} matches "
                                    f"{', '.join(lov.policies)} under what the logs show")
        if not has_traces:
            who = ", ".join(log_crash.policies) or "no catalogue policy"
            return EXIT_UNEXPLAINED, (f"no request traces: the {log_crash.kind.value} signature "
                                      f"matches {who}, but without a request-state trace no replay "
                                      "can confirm the leak, the iteration or which build survives")
        hits = [v.policy for v in verdicts if v.reproduces_log_crash]
        if hits:
            return EXIT_EXPLAINED, (f"the {log_crash.kind.value} in the logs is reproduced by "
                                    f"{', '.join(hits)}")
        crashed = [f"{v.policy} crashes at iteration {v.crash['iter']} on rank {v.crash['rank']}"
                   for v in verdicts if v.crash]
        return EXIT_UNEXPLAINED, ("no policy reproduces the logged crash"
                                  + (f" (rank {log_crash.rank})" if log_crash.rank is not None else "")
                                  + (f" at iteration {log_crash.iter}" if log_crash.iter is not None else "")
                                  + ("; " + "; ".join(crashed) if crashed else "; no replay crashes"))
    bad = [v for v in verdicts if v.verdict != "clean"]
    surplus = ""
    if lo.surplus_warnings:
        who = [v.policy for v in verdicts if v.reproduces_log_warnings]
        surplus = (f"the logs show {lo.surplus_warnings} surplus warning(s) (a leaked dummy "
                   "tolerated by the build)" + (f", reproduced by {', '.join(who)}" if who else
                                                 (", reproduced by no replay" if verdicts else "")))
    if bad:
        rec = [v for v in bad if v.is_recording_build]
        parts = [f"{v.policy} (the recording build): {v.text}" for v in rec]
        if surplus:
            parts.append(surplus)
        others = [v.policy for v in bad if not v.is_recording_build]
        if others:
            parts.append(f"{len(others)} other polic{'y' if len(others) == 1 else 'ies'} leak or "
                         f"crash ({', '.join(others)})")
        return EXIT_EXPLAINED, "; ".join(parts)
    if surplus:
        return EXIT_EXPLAINED, surplus
    if not has_traces:
        return EXIT_CLEAN, "no crash and no surplus warning in the logs (no request traces to replay)"
    return EXIT_CLEAN, "no policy leaks or crashes on this run"


def judge_logs(ds, log_crash, lo, pols):
    """The logs-only verdict on a logged crash (facts inferred from the logs and stats)."""
    try:
        text = excerpt(log_crash, max_lines=80)
    except Exception:  # the source may be gone (a cached dataset); the facts then say unknown
        text = log_crash.message or ""
    facts = infer_run_facts(ds.iterations, ds.events, ds.stats, crash_text=text)
    return judge_logs_only(log_crash, lo, facts, pols)


def story_policy(verdicts) -> Optional[str]:
    """The policy whose story a report or notebook tells, from per-policy verdicts (objects or
    rows with ``policy``, ``verdict``, ``reproduces_log_crash``, ``is_recording_build``): the
    recording build reproducing the logged crash, else any policy reproducing it, else the
    recording build if it leaks or crashes, else the first crash, else the first leak."""
    verdicts = list(verdicts)

    def reproduces(v) -> bool:
        return v.reproduces_log_crash is True or v.reproduces_log_crash is np.True_

    order = ([v for v in verdicts if reproduces(v) and v.is_recording_build]
             + [v for v in verdicts if reproduces(v)]
             + [v for v in verdicts if v.is_recording_build and v.verdict != "clean"]
             + [v for v in verdicts if v.verdict == "crash"]
             + [v for v in verdicts if v.verdict == "leak"])
    return order[0].policy if order else None


def causal_chain(results: dict, verdicts: Sequence[PolicyVerdict], build: str) -> tuple[Optional[str], list[str]]:
    """The policy whose story to tell and its causal chain (``explain()`` order: the fatal leak
    first)."""
    name = story_policy(verdicts)
    if name is None:
        return None, []
    try:
        lines = [str(x) for x in results[name].explain()]
    except Exception as e:  # the explanation is a bonus; never lose the report over it
        logger.warning("explain() failed for %s: %s", name, e)
        lines = [next(v.text for v in verdicts if v.policy == name)]
    return name, lines


def chain_mechanisms(res) -> list:
    if res is None:
        return []
    try:
        return mechanisms(res)
    except Exception as e:  # as above: never lose the report over an explanation
        logger.warning("grouping the chain failed for %s: %s", res.policy.name, e)
        return []


def recommend(pols, verdicts: Sequence[PolicyVerdict], config) -> list:
    """Builds clean on this run's path (from the replay when traced, from the catalogue's gates
    for the inferred path otherwise), with the neighbouring paths that stay open."""
    if verdicts:
        clean = {v.policy for v in verdicts if v.verdict == "clean"}
        return clean_builds(pols, config, replayed_clean=clean)
    return clean_builds(pols, config) if config is not None else []


def _advice_text(recommended, config, limit: int = 2) -> str:
    """``fix-16161 (PR #16161, #16279), still open on aggregated, pp_size 1: ...`` for the best few."""
    return "; ".join(a.text() for a in recommended[:limit])


def opening(status, reason, story, story_is_build, log_crash, lo, recommended, config,
            verdicts, lov=None) -> tuple[str, str]:
    """The report's first sentence, and the verdict headline."""
    todo = ""
    if recommended:
        best = recommended[0]
        here = f" on this run's path ({path_label(config)})" if config is not None else ""
        todo = f"move to {best.policy}, clean{here}"
        if best.open_paths:
            todo += " but still open on " + "; ".join(p.label for p in best.open_paths)
    elif verdicts and status == EXIT_EXPLAINED:
        todo = "no catalogue build survives this run: try a candidate fix with `forensics replay --policy py:FILE.py:FUNCTION`"
    if status == EXIT_BAD_INPUT:
        return f"Bad input: {reason}.", "Bad input"
    if story is not None:
        try:
            sentence = opening_sentence(story, recording_build=story_is_build, todo=todo)
        except Exception as e:  # never lose the report over the sentence
            logger.warning("opening sentence failed: %s", e)
            sentence = f"{reason[:1].upper()}{reason[1:]}."
        return sentence, headline(story, log_crash)
    if log_crash is not None:
        where = (f"rank {log_crash.rank}" if log_crash.rank is not None else "an unknown rank") + (
            f" at iteration {log_crash.iter}" if log_crash.iter is not None else "")
        head = f"{log_crash.title} on {where} ({code(log_crash.where)})"
        if lov is not None and lov.explained:
            c = lov.chain
            zero = ", ".join(str(r) for r in c.zero_ranks)
            return (f"The logs show an {head} at the end of the NVBug 6438685 chain: at iteration {c.skip_iter} "
                    f"rank{'s' if len(c.zero_ranks) > 1 else ''} {zero} offered batch 0 while rank "
                    f"{c.crash_rank} was busy, so the whole fleet skipped the iteration and any "
                    f"dummy padded on rank {c.crash_rank} stayed; at iteration {c.crash_iter} the "
                    "entry assert fired there, as only "
                    f"{_or(lov.policies)} can do under what the logs show; builds that survive it "
                    f"{lov.survivors_text()}.",
                    f"{head[:1].upper()}{head[1:]} after the fleet-wide skip of iteration "
                    f"{c.skip_iter}: the NVBug 6438685 chain (logs only)")
        if status == EXIT_UNEXPLAINED and not log_crash.kind.is_cause:
            return f"{reason[:1].upper()}{reason[1:]}.", f"{head}, not explained"
        if status == EXIT_UNEXPLAINED:
            return f"The logs show an {head}; not explained: {reason}.", f"{head}, not explained"
        return f"The logs show an {head}: {reason}" + (f"; {todo}" if todo else "") + ".", head
    if status == EXIT_CLEAN:
        return f"No leak and no crash: {reason}.", "No leak, no crash"
    return f"{reason[:1].upper()}{reason[1:]}" + (f"; {todo}" if todo else "") + ".", "Leak"


def _or(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def headline(res, log_crash) -> str:
    """``Entry assert on rank 2 at iteration 76: a dummy leaked through the skip of iteration 75``."""
    fatal = res.fatal_leak
    if res.crash is not None:
        c = res.crash
        what = {"assert": "Entry assert", "dummy_alloc_none": "TypeError on a None dummy"}.get(
            c.kind, "Crash")
        why = (f": a dummy leaked through the fleet-wide skip of iteration {fatal.iter_skipped}"
               if fatal is not None else "")
        seen = " (as in the logs)" if matches_log_crash(c, log_crash) else ""
        return f"{what} on rank {c.rank} at iteration {c.iter}{seen} under {res.policy.name}{why}"
    if res.leak_records:
        n = len(res.leak_records)
        return (f"{n} leaked dumm{'y' if n == 1 else 'ies'} under {res.policy.name}, no crash "
                f"(first through the skip of iteration {res.first_leak.iter_skipped})")
    return f"No leak, no crash under {res.policy.name}"


def next_step(status: int, verdicts: Sequence[PolicyVerdict], log_crash: Optional[Signature],
              lo: LogsOnlyFindings, results: dict, recommended=(), config=None, *,
              inputs=(), refused=(), lov=None) -> str:
    clean = [v for v in verdicts if v.verdict == "clean"]
    if status == EXIT_EXPLAINED and recommended and config is not None:
        return (f"Move to a build clean on this run's path ({path_label(config)}, "
                f"{'overlap' if config.overlap_scheduler else 'non-overlap'} loop): "
                + _advice_text(recommended, config) + ".")
    if status == EXIT_BAD_INPUT:
        return _bad_input_step(inputs, refused)
    if lov is not None and not verdicts:
        record = _record_step(lo)
        unknown = lov.unknown()
        tell = (f" The logs do not show the {', '.join(unknown)}; the builds above are per path, "
                "check the deployment for yours." if unknown else "")
        if lov.explained:
            return (f"This pattern matches the NVBug 6438685 chain; builds that survive it "
                    f"{lov.survivors_text()}.{tell} To see which requests and dummy leaked and "
                    f"confirm the build: {record}")
        return (f"Builds that close the pad-dummy leak {lov.survivors_text()}.{tell} {record}")
    if (status == EXIT_UNEXPLAINED and log_crash is not None and not log_crash.kind.is_cause
            and log_crash.follows is None):
        at = f" at `{log_crash.code_location}`" if log_crash.code_location else ""
        return (f"Look into the {log_crash.title}{at} (the excerpt in the report) with the "
                "component that raised it; a pad-dummy leak is not what stopped this run, as "
                "far as the logs show. To rule one out, " + _record_step(lo))
    if status == EXIT_UNEXPLAINED and not verdicts:
        step = _record_step(lo)
        return step[:1].upper() + step[1:]
    if status == EXIT_UNEXPLAINED:
        return ("Check the run record (tp_size, max_batch_size, cap, disaggregated, overlap) against "
                "the deployment, then compare decisions with `forensics replay DATASET --policy NAME`.")
    # Only a version that shipped can be moved to (Policy.merged: #16161 was never merged).
    shipped = [v for v in clean if v.policy not in results or results[v.policy].policy.merged]
    if status == EXIT_EXPLAINED and clean:
        fix = (shipped or clean)[0]
        prs = ""
        if fix.policy in results:
            prs = ", ".join(results[fix.policy].policy.prs[:2])
        if not shipped:
            return (f"No shipped version in the catalogue survives this run; {fix.policy} "
                    f"({fix.title}{'; PR ' + prs if prs else ''}) would, but it was never merged: "
                    "try it as a candidate with `forensics replay DATASET --policy py:FILE.py:FUNCTION`.")
        return (f"Move to a build with {fix.policy} ({fix.title}{'; PR ' + prs if prs else ''}): it "
                "replays this run without a leak or a crash.")
    if status == EXIT_EXPLAINED and verdicts:
        return ("No catalogue version survives this run: try a candidate fix with "
                "`forensics replay DATASET --policy py:FILE.py:FUNCTION`.")
    if status == EXIT_EXPLAINED:
        return ("Record a request-state trace (`ADP_FORENSICS_TRACE_DIR=DIR`, docs/recording.md) to "
                "see which dummy leaked and which build would survive.")
    if lo.missing:
        return "Nothing crashed. To replay a future incident: " + lo.missing[0]
    return "Nothing to do: no leak and no crash."


def _record_step(lo) -> str:
    settings = []
    if any(LOG_RANKS_ENV in m for m in lo.missing):
        settings.append(f"`{LOG_RANKS_ENV}=all` (iteration lines from every rank)")
    settings.append(f"`{TRACE_ENV}=DIR` (the request-state trace, see {RECORDING_DOC})")
    return (f"record the next run with {' and '.join(settings)}, then run `forensics "
            "postmortem` on the logs and DIR together.")


def _bad_input_step(inputs, refused) -> str:
    """What to do about bad input, naming the inputs."""
    if refused:
        names = ", ".join(code(r.get("name")) for r in refused)
        return (f"Fix or leave out {names} (the reason is beside each name above) and run "
                "`forensics postmortem` again; the other inputs were used.")
    names = ", ".join(code(i) for i in inputs) or "(no input)"
    return (f"{names} hold{'s' if len(inputs) == 1 else ''} no executor iteration line "
            "(`iter = N, ... num_scheduled_requests: K`), no pad-dummy or crash event and no "
            "request-state trace: pass the executor logs of the crashed run (with "
            f"`{LOG_RANKS_ENV}=all` every rank prints iteration lines), its iteration-stats JSON "
            f"or a trace recorded with `{TRACE_ENV}=DIR`.")


def era_sentence(spec: str, ident) -> str:
    if ident.named:
        return (f"The real code of {spec} behaves as catalogue entry {ident.named} on every "
                "behaviour `forensics identify` checks.")
    return (f"No catalogue entry behaves as the real code of {spec} on every behaviour "
            f"(closest: {ident.closest}; none matches on {', '.join(ident.unmatched)}).")


def run_metrics(result) -> dict[str, Any]:
    """The fleet verdict of one replay (:class:`replay.results.ReplayResult`): the metrics of a
    row of ``forensics.fleet``, per policy.

    - ``leak``: some dummy survived a fleet-wide skipped iteration; ``leaks``: how many did.
    - ``crash``, ``crash_iter``, ``crash_rank``: the replay stopped at an entry assert or a
      failed dummy allocation, and where.
    - ``first_leak_iter``: the first skipped iteration a dummy survived (``iter_skipped`` of
      the first leak); ``time_to_first_leak``: it minus the run's first replayed iteration.
    - ``near_miss_skips``: leaked dummies that did not end in a crash (removed later, alive at
      the end, or on a rank that did not crash; the dummy alive on a crashing rank at the crash
      is the fatal one, not counted).
    - ``near_miss_cap``: (iteration, rank) rows where the rank carried a dummy that survived an
      earlier iteration and ``active >= cap - 1`` (``active`` counts that dummy; ``cap`` is the
      run's ``max_num_active_requests``, enforced by the policy or not), and the rank did not
      crash there: the fleet was within one request of the assert.
    - ``near_miss``: ``near_miss_skips > 0 or near_miss_cap > 0``.
    - ``diverged_iter``: the first iteration where the replay departs from a recorded decision
      (after it, a policy other than the recording build's gives a counterfactual).
    """
    crash = result.crash
    # Only the columns and rows needed: a streamed result reads them from its files.
    iters = result.read_decisions(columns=["iter"])["iter"]
    carried = result.read_decisions([("carried_dummy", "==", True)], columns=["active", "crash"])
    ledger = result.read_ledger([("leaked", "==", True)], columns=["iter_removed", "rank"])
    leaks = result.leak_records
    first_iter = int(iters.min()) if len(iters) else None
    first_leak = min((lk.iter_skipped for lk in leaks), default=None)
    crash_ranks = set(crash.ranks) if crash is not None else set()
    leaked = ledger
    fatal = leaked["iter_removed"].isna() & leaked["rank"].isin(crash_ranks) if crash is not None \
        else pd.Series(False, index=leaked.index)
    cap = int(result.config.cap)
    near_cap = (carried["active"].to_numpy() >= cap - 1) & ~carried["crash"].to_numpy(bool)
    skips = int((~fatal).sum())
    ncap = int(near_cap.sum())
    div = result.first_divergence
    return {
        "leak": bool(leaks), "leaks": len(leaks), "crash": crash is not None,
        "crash_iter": None if crash is None else int(crash.iter),
        "crash_rank": None if crash is None else int(crash.rank),
        "first_leak_iter": first_leak,
        "time_to_first_leak": None if first_leak is None or first_iter is None
        else int(first_leak) - first_iter,
        "near_miss_skips": skips, "near_miss_cap": ncap, "near_miss": bool(skips or ncap),
        "diverged_iter": None if div is None else int(div.iter),
    }


@dataclasses.dataclass(frozen=True)
class Judgement:
    """Every conclusion of a post-mortem on one run: the verdict per policy, the exit status
    and its reason, the policy whose story is told with its causal chain and mechanisms, the
    builds to move to, the next step, the opening sentence and the headline; first of all the
    verdict in one line and what to do (``forensics.answer``)."""

    verdicts: tuple[PolicyVerdict, ...]
    status: int
    reason: str
    chain_policy: Optional[str]
    chain: list[str]
    mechanisms: tuple
    recommended: tuple
    next_step: str
    opening: str
    headline: str
    verdict: str = ""
    what_to_do: tuple = ()


def judge(ds, results: dict, pols, config, log_crash: Optional[Signature], signatures, lo: LogsOnlyFindings,
          *, refused=(), has_traces: bool, inputs=(), lov=None) -> Judgement:
    """The post-mortem's conclusions from the primary run's replay ``results`` (policy name ->
    result, empty without traces), the crash in the logs and the logs-only findings."""
    build = config.build if config else ""
    logged = logged_surplus(ds.events)
    verdicts = tuple(policy_verdict(name, r, log_crash, build, logged) for name, r in results.items())
    status, reason = exit_status(ds, list(refused), log_crash, verdicts, lo, has_traces,
                                 bool(signatures), lov)
    chain_policy, chain = causal_chain(results, verdicts, build)
    story = results.get(chain_policy) if chain_policy else None
    recommended = tuple(recommend(pols, verdicts, config))
    step = next_step(status, verdicts, log_crash, lo, results, recommended, config,
                     inputs=[str(i) for i in inputs], refused=list(refused), lov=lov)
    first, head = opening(status, reason, story, chain_policy == build, log_crash, lo, recommended,
                          config, verdicts, lov)
    verdict = verdict_line(
        status=status, reason=reason, story=story, recording_build=chain_policy == build,
        crash_seen=any(v.reproduces_log_crash for v in verdicts if v.policy == chain_policy),
        log_crash=log_crash, logs_verdict=lov,
        exit_codes=(EXIT_CLEAN, EXIT_EXPLAINED, EXIT_BAD_INPUT, EXIT_UNEXPLAINED))
    todo = what_to_do(recommended=recommended if status == EXIT_EXPLAINED else (),
                      next_step=step, logs_verdict=lov, policies=pols,
                      record_step="To see which requests and dummy leaked and confirm the build, "
                                  + _record_step(lo))
    return Judgement(verdicts=verdicts, status=status, reason=reason, chain_policy=chain_policy,
                     chain=chain, mechanisms=tuple(chain_mechanisms(story)), recommended=recommended,
                     next_step=step, opening=first, headline=head, verdict=verdict, what_to_do=todo)


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CLEAN",
    "EXIT_EXPLAINED",
    "EXIT_UNEXPLAINED",
    "Judgement",
    "PolicyVerdict",
    "causal_chain",
    "chain_mechanisms",
    "era_sentence",
    "exit_status",
    "headline",
    "judge",
    "judge_logs",
    "logged_surplus",
    "matches_log_crash",
    "matches_log_warnings",
    "next_step",
    "opening",
    "policy_verdict",
    "recommend",
    "replay_surplus",
    "run_metrics",
    "story_policy",
]
