"""The answer a post-mortem gives first: the verdict in one line, then what to do.

A reader with ten seconds reads the title, one bold line saying what crashed, where and why in
at most :data:`VERDICT_WORDS` words, and a short list of builds to move to, one line each: its
name, its pull request, whether it is clean on this run's path, at most one clause on what stays
open, and a link to the table that says the rest. The evidence (the causal chain, the replays,
the logs) follows. The report, the terminal summary, ``findings.json`` and ``--json`` give the
answer in this order.

Pure functions of what the verdict rules concluded (the story's replay, the logged crash, the
logs-only verdict, the recommended builds): nothing here reads inputs or renders.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional, Sequence

from forensics.report.document import code
from forensics.report.inline import anchor, plain

#: At most this many words in the verdict line.
VERDICT_WORDS = 25
#: At most this many words in any paragraph or list item a reader meets before the causal chain.
PARAGRAPH_WORDS = 60
#: The section of the report that lists every recommended build (the "What to do" lines link it).
BUILDS_TABLE = "Builds clean on this run's path"
#: The same for a logs-only report: per serving path, the builds that close the leak.
PATHS_TABLE = "Builds that close the leak, per path"
#: A step's link to its table, `` ([details](#anchor))``.
_LINK = re.compile(r" \(\[[^\]]*\]\(#[^)]*\)\)")


def words(text: str) -> int:
    """Words as a reader counts them: markup dropped, a code span one word."""
    return len(plain(text).split())


@dataclasses.dataclass(frozen=True)
class Step:
    """One line of "What to do".

    Fields:
        text: the line (report markup: bold build name, code spans).
        build: the build to move to, or None for another step (record a trace, check a path).
        pr: the build's pull request (``"#16279"``), or None.
        clean_on: where it is clean (``"this run's path"``, ``"disaggregated, pp_size 1"``), or None.
        stays_open: the one clause on what stays open, or ``""``.
        table: the report section with the details (a heading), or None.
    """

    text: str
    build: Optional[str] = None
    pr: Optional[str] = None
    clean_on: Optional[str] = None
    stays_open: str = ""
    table: Optional[str] = None

    def plain(self) -> str:
        """The line as a terminal shows it (markup and the link to the table dropped)."""
        return plain(_LINK.sub("", self.text))

    def to_json(self) -> dict[str, Any]:
        return {"build": self.build, "pr": self.pr, "clean_on": self.clean_on,
                "stays_open": self.stays_open or None, "text": self.plain()}


# --- the verdict line ------------------------------------------------------------------------------

def _ranks(ranks: Sequence[int]) -> str:
    ranks = [int(r) for r in ranks]
    if len(ranks) == 1:
        return f"rank {ranks[0]}'s empty batch"
    return f"the empty batches of ranks {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"


def _first_clause(reason: str) -> str:
    """``"no request traces"`` of ``"no request traces: the entry-assert signature ..."``."""
    return re.split(r"; |: ", reason, maxsplit=1)[0].strip()


def _fit(candidates: Sequence[str]) -> str:
    """The first candidate of at most :data:`VERDICT_WORDS` words (the last one, cut, if none)."""
    for c in candidates:
        if words(c) <= VERDICT_WORDS:
            return c
    cut = candidates[-1].split()[:VERDICT_WORDS]
    return " ".join(cut).rstrip(".,;:") + "..."


def _story_line(res, recording_build: bool, crash_seen: bool) -> str:
    name = res.policy.name
    build = ", the recording build" if recording_build else ""
    if res.crash is not None:
        c = res.crash
        what = {"assert": "entry assert", "dummy_alloc_none": "TypeError on a None dummy"}.get(
            c.kind, "crash")
        head = f"Rank {c.rank} crashed at iteration {c.iter} ({what}"
        seen = ", as in the logs" if crash_seen else ""
        fatal = res.fatal_leak
        if fatal is None:
            return _fit([f"{head}{seen}) under {name}{build}.", f"{head}) under {name}."])
        plain_why = f"a dummy leaked through the fleet-wide skip of iteration {fatal.iter_skipped}"
        why = (f"a dummy leaked when {_ranks(fatal.cause_ranks)} made the fleet skip iteration "
               f"{fatal.iter_skipped}") if fatal.cause_ranks else plain_why
        return _fit([f"{head}{seen}) under {name}{build}: {why}.",
                     f"{head}) under {name}{build}: {why}.",
                     f"{head}{seen}) under {name}: {why}.",
                     f"{head}) under {name}: {why}.",
                     f"{head}) under {name}: {plain_why}.",
                     f"{head}) under {name}."])
    n = len(res.leak_records)
    first = res.first_leak
    head = f"{n} dumm{'y' if n == 1 else 'ies'} leaked under {name}"
    plain_why = f"the first through the fleet-wide skip of iteration {first.iter_skipped}"
    why = (f"the first when {_ranks(first.cause_ranks)} made the fleet skip iteration "
           f"{first.iter_skipped}") if first.cause_ranks else plain_why
    return _fit([f"{head}{' (the recording build)' if recording_build else ''}, no crash: {why}.",
                 f"{head}, no crash: {why}.", f"{head}, no crash: {plain_why}.",
                 f"{head}, no crash."])


def verdict_line(*, status: int, reason: str, story=None, recording_build: bool = False,
                 crash_seen: bool = False, log_crash=None, logs_verdict=None,
                 exit_codes: tuple[int, int, int, int] = (0, 1, 2, 3)) -> str:
    """What crashed, where and why, in at most :data:`VERDICT_WORDS` words.

    ``story``: the replay whose story the report tells (a ``ReplayResult`` with a leak or a
    crash), or None; ``recording_build``: it is the build that recorded the run; ``crash_seen``:
    it reproduces the crash in the logs; ``log_crash``: the crash signature in the logs, or None;
    ``logs_verdict``: the logs-only verdict when there is no trace. ``exit_codes``: clean,
    explained, bad input, unexplained.
    """
    clean, explained, bad, unexplained = exit_codes
    if status == bad:
        return _fit([f"Bad input: {reason}.", f"Bad input: {_first_clause(reason)}."])
    if story is not None and (story.crash is not None or story.leak_records):
        return _story_line(story, recording_build, crash_seen)
    if log_crash is not None:
        who = f"rank {log_crash.rank}" if log_crash.rank is not None else "an unknown rank"
        at = f" at iteration {log_crash.iter}" if log_crash.iter is not None else ""
        where = code(log_crash.where)
        kind = log_crash.kind.value
        lov = logs_verdict
        if lov is not None and lov.explained and lov.chain is not None:
            c = lov.chain
            why = f"{_ranks(c.zero_ranks)} made the whole fleet skip iteration {c.skip_iter}"
            return _fit([f"{who[:1].upper()}{who[1:]} hit the {kind}{at} ({where}) after {why} "
                         "(logs only).",
                         f"{who[:1].upper()}{who[1:]} hit the {kind}{at} after {why} (logs only)."])
        head = f"{who[:1].upper()}{who[1:]} hit the {kind}{at} ({where})"
        if status == unexplained:
            return _fit([f"{head}, not explained: {reason}.",
                         f"{head}, not explained: {_first_clause(reason)}.",
                         f"{head}, not explained."])
        return _fit([f"{head}: {reason}.", f"{head}: {_first_clause(reason)}.", f"{head}."])
    if status == clean:
        return _fit([f"No leak and no crash: {reason}.", "No leak and no crash."])
    return _fit([f"A dummy leaked: {reason}.", f"A dummy leaked: {_first_clause(reason)}."])


# --- what to do --------------------------------------------------------------------------------

def _pr(prs: Sequence[str]) -> Optional[str]:
    """The build's own pull request, ``"#16279"`` of ``("#16279 (merged; ...)", ...)``; None
    when its first source names none (``"later main (...)"``: the PRs after it are older ones
    it builds on)."""
    m = re.match(r"#\d+", prs[0]) if prs else None
    return m[0] if m else None


def _source(prs: Sequence[str]) -> str:
    """``"PR #16279"``, else the first source without its parenthesis (``"later main"``)."""
    pr = _pr(prs)
    if pr:
        return f"PR {pr}"
    return prs[0].split(" (")[0] if prs else ""


def _outcome(gaps) -> str:
    """The worst outcome among open paths, without its parenthesis (``"can crash at the cap"``)."""
    outcomes = [g.outcome.split(" (")[0] for g in gaps]
    return next((o for o in outcomes if "crash" in o), outcomes[0])


def _link(table: str) -> str:
    return f"[details](#{anchor(table)})"


def _build_step(advice) -> Step:
    pr = _pr(advice.prs)
    where = "this run's path"
    clean = f"clean on {where}" + (f" {advice.condition}" if advice.condition else "")
    if advice.here is not None:
        clean = f"clean in this run's replay, but {_outcome([advice.here])} on its path"
    n = len(advice.open_paths)
    stays = (f"still open on {n} other path{'s' if n > 1 else ''}: {_outcome(advice.open_paths)}"
             if n else "")
    source = _source(advice.prs)
    text = (f"**{advice.policy}**" + (f" ({source})" if source else "") + f": {clean}"
            + (f"; {stays}" if stays else "") + f" ({_link(BUILDS_TABLE)}).")
    return Step(text=text, build=advice.policy, pr=pr, clean_on=where, stays_open=stays,
                table=BUILDS_TABLE)


def _logs_steps(lov, policies) -> list[Step]:
    """One line per build that closes the leak on some path the logs leave possible."""
    prs = {p.name: p.prs for p in policies}
    paths: dict[str, list[str]] = {}
    conditions: dict[str, str] = {}
    for label, names in lov.survivors:
        for entry in names:
            name, _, cond = entry.partition(" (")
            paths.setdefault(name, []).append(label)
            if cond:
                conditions[name] = cond.rstrip(")")
    out = []
    total = len(lov.survivors)
    for name, labels in paths.items():
        pr, source = _pr(prs.get(name, ())), _source(prs.get(name, ()))
        clean = f"clean on {' and '.join(labels)}" + (f" {conditions[name]}" if name in conditions else "")
        n = total - len(labels)
        stays = f"still open on {n} other path{'s' if n > 1 else ''}" if n else ""
        text = (f"**{name}**" + (f" ({source})" if source else "") + f": {clean}"
                + (f"; {stays}" if stays else "") + f" ({_link(PATHS_TABLE)}).")
        out.append(Step(text=text, build=name, pr=pr, clean_on=" and ".join(labels),
                        stays_open=stays, table=PATHS_TABLE))
    return out


def _sentences(text: str) -> list[str]:
    """``text`` cut at its sentence ends (not inside code spans)."""
    parts = re.split(r"(`[^`]*`)", text)
    out, cur = [], ""
    for i, p in enumerate(parts):
        if i % 2:
            cur += p
            continue
        pieces = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", p)
        for k, piece in enumerate(pieces):
            if k:
                out.append(cur.strip())
                cur = ""
            cur += piece
    if cur.strip():
        out.append(cur.strip())
    return [s for s in out if s]


def what_to_do(*, recommended: Sequence = (), next_step: str = "", logs_verdict=None,
               policies: Sequence = (), record_step: str = "") -> tuple[Step, ...]:
    """The short list: one line per recommended build (``recommended``: the verdict rules'
    ``BuildAdvice``, best first); from logs alone, one line per build that closes the leak on a
    path the logs leave possible, then how to record the evidence that decides (``record_step``);
    else the next step, a line per sentence."""
    if recommended:
        return tuple(_build_step(a) for a in recommended)
    if logs_verdict is not None and logs_verdict.explained and any(n for _, n in logs_verdict.survivors):
        steps = _logs_steps(logs_verdict, policies)
        unknown = logs_verdict.unknown()
        if unknown:
            steps.append(Step(text=f"Check the deployment's {' and '.join(unknown)}: the logs do "
                                   "not show them, and the builds above are clean only on the "
                                   "paths named."))
        if record_step:
            steps.append(Step(text=record_step))
        return tuple(steps)
    return tuple(Step(text=s) for s in _sentences(next_step))


__all__ = [
    "BUILDS_TABLE",
    "PARAGRAPH_WORDS",
    "PATHS_TABLE",
    "VERDICT_WORDS",
    "Step",
    "verdict_line",
    "what_to_do",
    "words",
]
