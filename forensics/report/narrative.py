"""The post-mortem report's content: its figures and its sections, as a ``Document``.

``postmortem`` computes the findings; this module decides what the reader sees and in what order:
the verdict and next step first, then the crash in the logs, the replay per policy, the causal
chain, the figures, what the logs alone say, and the inputs.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import pandas as pd
import pyarrow.compute as pc

from forensics.answer import BUILDS_TABLE, PATHS_TABLE
from forensics.crash_signatures import excerpt
from forensics.dataset.store import to_pandas
from forensics.logs_only import LogsOnlyFindings, log_decisions
from forensics.report import figure_data as F
from forensics.report import svg_figures as S
from forensics.report.document import (
    Bullets,
    Code,
    Details,
    Document,
    FigureBlock,
    Heading,
    Paragraph,
    Table,
    code,
)

_STATUS_TEXT = {0: "no leak, no crash", 1: "leak or crash explained", 2: "bad input",
                3: "crash seen in the logs but not explained"}
#: Lines of a logged message shown in the report.
MESSAGE_LINES = 12
#: Fleet-wide skips listed one per row in a logs-only report.
MAX_SKIP_ROWS = 30


def _fig_policy(results: Mapping[str, Any], chain_policy: Optional[str], verdicts) -> Optional[str]:
    if chain_policy in results:
        return chain_policy
    for v in verdicts:
        if v.is_recording_build:
            return v.policy
    return next(iter(results), None)


def comparison_policy(story: Optional[str], clean: Sequence[str],
                      recommended: Sequence[str] = ()) -> Optional[str]:
    """The build the figures set beside the story's: the first build the report recommends
    (merged, clean on this run's path) that was replayed, else the first clean replay; None when
    nothing else is clean. A proposal that never merged (PR #16161) is no build to compare with
    while a recommended one exists."""
    for name in (*recommended, *clean):
        if name != story and name in clean:
            return name
    return None


def figure_policies(results: Mapping[str, Any], chain_policy: Optional[str],
                    verdicts: Sequence, recommended: Sequence[str] = ()) -> tuple[str, ...]:
    """The policies the figures draw: the story's, then the build to compare the strip with
    when the story's is not clean, :func:`comparison_policy` of the recommended builds
    (``figure_blocks`` reads only these results)."""
    name = _fig_policy(results, chain_policy, verdicts)
    if name is None:
        return ()
    story_clean = next((v.verdict == "clean" for v in verdicts if v.policy == name), True)
    clean = [v.policy for v in verdicts if v.verdict == "clean" and v.policy in results]
    other = None if story_clean else comparison_policy(name, clean, recommended)
    return (name,) if other is None else (name, other)


def figure_blocks(ds, run: Optional[str], results: Mapping[str, Any], chain_policy: Optional[str],
                  verdicts: Sequence, lo: LogsOnlyFindings, config,
                  log_crash=None, recommended: Sequence[str] = ()) -> list[FigureBlock]:
    """The report's figures (SVG), drawn from the replay of the story's policy, or from the
    iteration logs when there is no trace. ``results`` needs the :func:`figure_policies` only;
    ``recommended``: the builds the report recommends, best first (the strip compares with
    the first)."""
    out: list[FigureBlock] = []
    drawn = figure_policies(results, chain_policy, verdicts, recommended)
    if run is not None and drawn:
        name = drawn[0]
        r = results[name]
        dec = r.decisions
        leaks = r.leaks
        crash = F.crash_marker(r.crash)
        cap = config.cap if (config is not None and r.policy.cap) else None
        fig = S.active_svg(F.active_view(dec, leaks=leaks, crash=crash, cap=cap,
                                         title=f"Active requests per rank under {name} (run {run})"))
        out.append(FigureBlock("active_requests.svg", fig,
                               f"len(active_requests) at pad entry per rank under {name}, against "
                               "expected_num_active_requests and the cap; triangles mark dummies "
                               "that survived a fleet-wide skip, the cross the crash. Long runs "
                               "show windows around the interesting iterations."))
        recording = config is not None and name == config.build
        panels = {f"{name} ({'the recording build, ' if recording else ''}replayed)": dec}
        other = drawn[1] if len(drawn) > 1 else None
        if other is not None:
            role = "recommended, " if other in recommended else ""
            panels[f"{other} ({role}replayed, no leak)"] = results[other].decisions
        fig = S.strip_svg(F.strip_view(panels, leaks=leaks, crash=crash,
                                       title=f"What each rank did, per iteration (run {run})"))
        against = ""
        if other is not None:
            against = (f"; {name}{' (the recording build)' if recording else ''} compared with "
                       f"{other}" + (", the build the report recommends" if other in recommended
                                     else ""))
        out.append(FigureBlock("decision_strip.svg", fig,
                               "Per rank and iteration: ran, padded, zero batch, fleet-wide skip, "
                               "a dummy leaking through a skip, a rank carrying a leaked dummy, "
                               "the crash" + against + "."))
        it = F.state_iteration(dec, r)
        if it is not None:
            req = _requests_at(ds, run, it)
            at = dec[dec["iter"] == it]
            carried = pd.to_numeric(at.get("carried_dummy", pd.Series(dtype=float)),
                                    errors="coerce").fillna(0)
            leaked = {int(rk): 1 for rk, c in zip(at["rank"], carried) if c}
            exp = pd.to_numeric(at.get("expected", pd.Series(dtype=float)), errors="coerce").dropna()
            why = "the crash" if r.crash is not None and int(r.crash.iter) == it else "after the first leak"
            fig = S.states_svg(F.states_view(
                req, iteration=it, leaked_dummies=leaked,
                expected=int(exp.max()) if len(exp) else None, cap=cap,
                title=f"Request states per rank at iteration {it} ({why}, {name})",
                ranks=[int(x) for x in at["rank"]]))
            out.append(FigureBlock("request_states.svg", fig,
                                   f"The recorded request states of every rank at iteration {it}, "
                                   f"with the dummies {name} carried into it."))
    elif len(ds.iterations):
        dec = log_decisions(ds.iterations, lo.fleet_size)
        crash = None
        if log_crash is not None and log_crash.iter is not None and log_crash.rank is not None:
            crash = {"iter": int(log_crash.iter), "rank": int(log_crash.rank)}
            dec = dec.assign(crash=(dec["iter"] == crash["iter"]) & (dec["rank"] == crash["rank"]))
            if not dec["crash"].any():
                dec = pd.concat([dec, pd.DataFrame([{**crash, "batch": pd.NA, "can_queue": pd.NA,
                                                     "padded": pd.NA, "crash": True}])],
                                ignore_index=True)
        if len(dec) and dec["batch"].notna().any():
            fig = S.strip_svg(F.strip_view(
                {"iteration logs (batch sizes as logged)": dec}, crash=crash,
                title="What each rank logged, per iteration (no request traces)"))
            out.append(FigureBlock("decision_strip.svg", fig,
                                   "Per rank and iteration from the iteration logs alone: a zero "
                                   "batch, a fleet-wide skip (where every rank logs), a dummy "
                                   "forwarded (V5 lines), or unknown where the rank did not log."))
    return out


def _opt(v, none: str = "unknown") -> str:
    return none if v is None else str(v)


def build_document(*, summary, run, config, verdicts, signatures, log_crash, logs_only,
                   chain_policy, chain, next_step, status, reason, figures, results,
                   opening: str = "", headline: str = "", mechanisms=(), recommended=(),
                   logs_verdict=None, verdict: str = "", what_to_do=()) -> Document:
    """The report as blocks (rendered by ``markdown`` and ``html``): the verdict in one bold
    line, what to do (``forensics.answer``), then the evidence, the causal chain first."""
    b: list = []
    if verdict:
        b.append(Paragraph(f"**{verdict}**"))
    if what_to_do:
        b.append(Heading(2, "What to do"))
        b.append(Bullets(tuple(step.text for step in what_to_do)))
    elif next_step:
        b.append(Paragraph(f"**Next step**: {next_step}"))
    if recommended:
        b.append(Heading(3, BUILDS_TABLE))
        b.append(Table(("build", "pull requests", "this run's path", "other paths that stay open"),
                       tuple((code(a.policy), ", ".join(a.prs) or "-",
                              ("closed" + (f" ({a.here_evidence})" if a.here_evidence else ""))
                              if a.here is None else
                              f"clean in the replay, but {a.here.why}: {a.here.outcome}",
                              "; ".join(f"{p.label}: {p.outcome} ({p.why}"
                                        + (f"; {p.evidence}" if p.evidence else "") + ")"
                                        for p in a.open_paths)
                              or "none of the neighbouring paths (other serving mode, pp_size)")
                             for a in recommended)))
    elif logs_verdict is not None and any(step.table == PATHS_TABLE for step in what_to_do):
        b.append(Heading(3, PATHS_TABLE))
        b.append(Table(("serving path", "builds that close the leak"),
                       tuple((label, ", ".join(names) or "no catalogue build (tolerant-17278 and "
                              "later only warn)") for label, names in logs_verdict.survivors)))

    if chain:
        b.append(Heading(2, f"Causal chain under {chain_policy}"))
        if opening:
            b.append(Paragraph(opening))
        story = results.get(chain_policy)
        fatal = story is not None and story.fatal_leak is not None
        b.append(Paragraph(("**The fatal leak.** " if fatal else "") + chain[0]))
        crash_line = chain[-1] if (story is not None and story.crash is not None
                                   and len(chain) > 1) else None
        if crash_line:
            b.append(Paragraph("**The crash.** " + crash_line))
        for k, m in enumerate(mechanisms):
            b.append(Paragraph(f"**Mechanism {k + 1} of {len(mechanisms)}: {m.title()}.** {m.text}"))
            b.append(Details(f"The {m.count} leak{'' if m.count == 1 else 's'} it explains",
                             tuple(m.items)))
        if not mechanisms and len(chain) > 1:
            b.append(Bullets(tuple(chain[1:]), numbered=True))
    elif opening and log_crash is not None:
        b.append(Heading(2, "Causal chain (from the logs)"))
        b.append(Paragraph(opening))

    b.append(Heading(2, "Exit status"))
    lead = f"**{headline}**: " if headline and not verdict else ""
    b.append(Paragraph(f"{lead}{status} ({_STATUS_TEXT.get(status, '?')}): {reason}."))

    b.append(Heading(2, "Crash seen in the logs"))
    if log_crash is None:
        b.append(Paragraph("No crash signature in the logs (no pad-dummy assert, no failed dummy "
                           "allocation crash, no `Error in event loop`, no `MPI_ABORT`)."))
    else:
        it = _opt(log_crash.iter) + (" (from the last iteration line before it)"
                                     if log_crash.iter_inferred else "")
        b.append(Table(("kind", "rank", "iteration", "where", "code", "policies that produce it"),
                       ((log_crash.title, _opt(log_crash.rank), it, code(log_crash.where),
                         code(log_crash.code_location) if log_crash.code_location else "-",
                         ", ".join(log_crash.policies) or "none"),)))
        b.append(Paragraph(f"Why these policies: {log_crash.reason}."))
        b.append(Code(excerpt(log_crash, max_lines=MESSAGE_LINES)))
    if signatures:
        b.append(Heading(3, "Every crash-related event"))
        b.append(Table(("kind", "count", "rank", "iteration", "where", "policies"),
                       tuple((s.kind.value, str(s.count), _opt(s.rank, "-"), _opt(s.iter, "-"),
                              code(s.where), ", ".join(s.policies) or "none") for s in signatures)))

    b.append(Heading(2, "Replay per policy"))
    if not verdicts:
        b.append(Paragraph("Not replayed: the inputs hold no request-state trace (see *What the logs "
                           "alone show* below)."))
    else:
        cfg = ""
        if config is not None:
            cfg = (f" Run {code(run)}: tp_size {config.tp_size}, pp_size {config.pp_size}, "
                   f"max_batch_size {config.max_batch_size}, cap {config.cap}, "
                   f"{'disaggregated' if config.disaggregated else 'aggregated'}, "
                   f"{'overlap' if config.overlap_scheduler else 'non-overlap'} loop"
                   + (f", recorded by build {code(config.build)}" if config.build else "") + ".")
        b.append(Paragraph("Each executor version replays the recorded request states, carrying the "
                           "dummies it creates itself." + cfg))
        rows = []
        for v in verdicts:
            marks = []
            if v.reproduces_log_crash is not None:
                marks.append("crash: " + ("yes" if v.reproduces_log_crash else "no"))
            if v.reproduces_log_warnings is not None:
                marks.append("surplus warnings: " + ("yes" if v.reproduces_log_warnings else "no"))
            rep = "; ".join(marks) or "-"
            div = "-"
            if v.is_recording_build:
                d = v.first_divergence
                div = "reproduces every recorded decision" if d is None else (
                    f"first differs at iteration {d['iter']} rank {d['rank']} ({d['field']}: "
                    f"recorded {d['recorded']}, replayed {d['replayed']})")
            rows.append((code(v.policy) + (" (recording build)" if v.is_recording_build else ""),
                         v.verdict, v.text, rep, div))
        b.append(Table(("policy", "verdict", "what happens", "matches the logs",
                        "against the recording"), tuple(rows)))

    if figures:
        b.append(Heading(2, "Figures"))
        b.extend(figures)

    b.append(Heading(2, "What the logs alone show"))
    b.append(Bullets(tuple(logs_only.conclusions()) or ("Nothing beyond the signatures above.",)))
    if logs_verdict is not None:
        b.append(Heading(3, "The run as the logs show it"))
        b.append(Table(("fact", "value", "evidence"),
                       tuple((f.name, f.value if f.value is not None else "unknown", f.evidence)
                             for f in logs_verdict.facts.facts)))
        b.append(Paragraph(f"Versions possible under these facts: "
                           f"{', '.join(code(p) for p in logs_verdict.policies) or 'none'} "
                           f"({logs_verdict.reason})."))
    if logs_only.fleet_skips and not results:
        b.append(Heading(3, "Per iteration, from the iteration lines"))
        fw = set(logs_only.dummy_forwarded_in_skips)
        rows = []
        for sk in logs_only.fleet_skips[:MAX_SKIP_ROWS]:
            nxt = sorted(r for (i, r) in fw if i == sk.iter + 1)
            rows.append((str(sk.iter), ", ".join(map(str, sk.zero_ranks)),
                         ", ".join(map(str, sk.busy_ranks)),
                         (", ".join(map(str, nxt)) or "none") if logs_only.dummy_tokens_logged
                         else "not logged (V5 lines only)"))
        b.append(Table(("skipped iteration", "ranks at batch 0", "busy ranks skipped with them",
                        "ranks forwarding a dummy right after"), tuple(rows)))
        zero: dict[int, int] = {}
        for sk in logs_only.fleet_skips:
            for r in sk.zero_ranks:
                zero[r] = zero.get(r, 0) + 1
        b.append(Paragraph("Ranks that scheduled 0 while others worked: "
                           + ", ".join(f"rank {r} ({n}x)" for r, n in sorted(zero.items()))
                           + (f"; {logs_only.fleet_skip_count - MAX_SKIP_ROWS} more skip(s) not "
                              "listed" if logs_only.fleet_skip_count > MAX_SKIP_ROWS else "") + "."))
    if logs_only.missing:
        b.append(Heading(3, "Missing, and how to record it next time"))
        b.append(Bullets(tuple(logs_only.missing)))

    b.append(Heading(2, "Inputs"))
    if summary.inputs:
        b.append(Table(("input", "kind", "bytes"),
                       tuple((code(n), k, str(s)) for n, k, s in summary.inputs)))
    b.append(Paragraph("Rows per table: " + ", ".join(f"{t} {n}" for t, n in summary.rows.items())
                       + "."))
    if summary.refused:
        b.append(Bullets(tuple(f"not ingested: {code(r)}" for r in summary.refused)))
    title = "ADP post-mortem" + (f": run {code(run)}" if run else "")
    return Document(title=title, blocks=tuple(b))


def _requests_at(ds: Any, run: str, it: int) -> pd.DataFrame:
    """The recorded requests of one run at one iteration, read with a Parquet filter when the
    dataset is on disk (the whole table of a fleet-hour run is tens of millions of rows)."""
    if not hasattr(ds, "files"):
        req = ds.requests
        return req[(req["run"] == run) & (req["iter"] == it)] if len(req) else req
    return to_pandas(ds.arrow("requests", filter=(pc.field("run") == run)
                              & (pc.field("iter") == int(it))))


__all__ = ["build_document", "comparison_policy", "figure_blocks", "figure_policies"]

