"""Bisect a TensorRT-LLM checkout: the first revision whose pad code stops (or starts) leaking.

Only commits that touch the files the pad step lives in are walked (``WATCHED_FILES``: the
executor, a fork's loop tasks, the scheduler and the ADP router that caps ``expected``;
``git rev-list --ancestry-path GOOD..BAD -- FILES``): the pad step's code changes nowhere else,
so every other commit replays exactly like its nearest watched ancestor. Each tested revision is
resolved as ``trtllm:REPO@SHA`` (``replay.trtllm_source``) and the recorded run is replayed under
it; a revision is "bad" when the replay leaks a dummy or crashes. A revision whose code the
stand-in cannot run (a missing name, no pad method) is skipped, as ``git bisect skip`` would.

Example (commits touching the files, oldest first; verdict of each)::

    good  c1  c2  c3* c4  bad        *: the planted fix
    leak  -   -   ok  -   ok         → first change at c3, "stops leaking" (2 or 3 replays)
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Callable, Optional

from replay.errors import PolicyError
from replay.config import RunConfig
from replay.isolation import isolated_policy
from replay.trtllm_checkout import WATCHED_FILES, read_source, resolve_revision, run_git
from replay.trtllm_source import era_of, policy_from_source

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RevisionVerdict:
    """One revision replayed on the trace.

    Fields:
        revision: full commit id.
        subject: the commit's subject line.
        leaks: dummies leaked in the replay.
        crash: the crash message, or None.
        era: catalogue policy that supplied the rest of the loop.
        error: why the revision could not be replayed (skipped), or None.
    """

    revision: str
    subject: str
    leaks: int = 0
    crash: Optional[str] = None
    era: str = ""
    error: Optional[str] = None

    @property
    def bad(self) -> bool:
        """Leaks or crashes on this trace."""
        return self.leaks > 0 or self.crash is not None

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.revision[:12]} skipped: {self.error.splitlines()[0]}"
        parts = [f"{self.leaks} leak(s)" if self.leaks else "no leak"]
        parts.append(f"crash: {self.crash}" if self.crash else "no crash")
        what = ", ".join(parts)
        return f"{self.revision[:12]} [{self.era}] {what} - {self.subject}"

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "subject": self.subject, "leaks": self.leaks,
                "crash": self.crash, "era": self.era, "error": self.error, "bad": self.bad}


@dataclasses.dataclass(frozen=True)
class BisectResult:
    """The outcome of :func:`bisect`.

    Fields:
        repo: the checkout.
        good, bad: the two endpoints as given, and their verdicts.
        first_change: the first watched commit whose verdict differs from ``good``'s, or None when
            the endpoints agree.
        direction: ``"stops leaking"``, ``"starts leaking"`` or None.
        candidates: watched commits between the endpoints (oldest first).
        tested: every verdict computed, in test order.
        ambiguous: commits that could not be replayed and may hold the change instead.
    """

    repo: str
    good: str
    bad: str
    good_verdict: RevisionVerdict
    bad_verdict: RevisionVerdict
    first_change: Optional[RevisionVerdict]
    direction: Optional[str]
    candidates: tuple[str, ...]
    tested: tuple[RevisionVerdict, ...]
    ambiguous: tuple[str, ...] = ()

    def summary(self) -> list[str]:
        """Plain lines for the CLI."""
        lines = [f"good {self.good}: {self.good_verdict.describe()}",
                 f"bad  {self.bad}: {self.bad_verdict.describe()}",
                 f"{len(self.candidates)} commit(s) touch the executor, loop-task, scheduler or "
                 f"router files; {len(self.tested)} replay(s)"]
        if self.first_change is None:
            lines.append("the verdict does not change between good and bad: nothing to bisect")
        else:
            lines.append(f"first revision that {self.direction}: {self.first_change.describe()}")
        if self.ambiguous:
            lines.append("could not be replayed, may hold the change instead: "
                         + ", ".join(c[:12] for c in self.ambiguous))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "good": self.good_verdict.to_json(),
                "bad": self.bad_verdict.to_json(),
                "first_change": None if self.first_change is None else self.first_change.to_json(),
                "direction": self.direction, "candidates": list(self.candidates),
                "tested": [v.to_json() for v in self.tested], "ambiguous": list(self.ambiguous)}


def watched_commits(repo: str | Path, good: str, bad: str) -> list[str]:
    """Commits on the ancestry path ``good..bad`` touching the watched files, oldest first."""
    root = Path(repo)
    good_sha, bad_sha = resolve_revision(root, good), resolve_revision(root, bad)
    if run_git(root, "merge-base", "--is-ancestor", good_sha, bad_sha).returncode != 0:
        raise PolicyError(f"{root}: {good} is not an ancestor of {bad}",
                          hint="--good must be the older revision")
    out = run_git(root, "rev-list", "--ancestry-path", "--reverse", f"{good_sha}..{bad_sha}", "--",
               *WATCHED_FILES)
    if out.returncode != 0:
        raise PolicyError(f"{root}: git rev-list failed: {out.stderr.strip()}")
    return out.stdout.split()


def _subject(root: Path, sha: str) -> str:
    out = run_git(root, "log", "-1", "--format=%s", sha)
    return out.stdout.strip()


def replay_revision(frames: Any, repo: str | Path, revision: str,
                    config: Optional[RunConfig] = None, isolate: bool = False) -> RevisionVerdict:
    """Replay ``frames`` under ``trtllm:REPO@revision`` (its code in a confined child process
    with ``isolate``, ``replay.isolation``)."""
    from replay.walk import run
    root = Path(repo)
    sha = resolve_revision(root, revision)
    subject = _subject(root, sha)
    try:
        sep = "#" if "@" in str(root) else "@"   # a path holding "@" takes the explicit one
        name = f"trtllm:{root}{sep}{sha[:12]}"
        policy = (isolated_policy(name) if isolate
                  else policy_from_source(read_source(root, sha), name=name))
    except PolicyError as e:
        return RevisionVerdict(sha, subject, error=str(e))
    era = era_of(policy) or ""
    try:
        result = run(frames, config, policy)
    except PolicyError as e:  # the stand-in's limit, not a verdict on this revision
        return RevisionVerdict(sha, subject, era=era, error=str(e))
    crash = None if result.crash is None else result.crash.message
    return RevisionVerdict(sha, subject, leaks=len(result.leaks), crash=crash, era=era)


def bisect(frames: Any, repo: str | Path, good: str, bad: str, config: Optional[RunConfig] = None,
           replay: Optional[Callable[[str], RevisionVerdict]] = None,
           isolate: bool = False) -> BisectResult:
    """Find the first revision between ``good`` and ``bad`` whose verdict on ``frames`` changes.

    Args:
        frames: the recorded run (``replay.frames.RunFrames``).
        repo: a TensorRT-LLM git checkout.
        good: the older revision; bad: the newer one (either may be the leaking one).
        config: replay configuration; default the run's.
        replay: ``revision -> RevisionVerdict`` (default :func:`replay_revision` on ``frames``).
        isolate: run each revision's code in a confined child process (``replay.isolation``).

    Returns:
        :class:`BisectResult`; raises ``PolicyError`` when an endpoint cannot be replayed.
    """
    root = Path(repo)
    verdict_of = replay or (lambda rev: replay_revision(frames, root, rev, config, isolate))
    cache: dict[str, RevisionVerdict] = {}
    tested: list[RevisionVerdict] = []

    def check(rev: str) -> RevisionVerdict:
        if rev not in cache:
            cache[rev] = verdict_of(rev)
            tested.append(cache[rev])
            log.info("bisect: %s", cache[rev].describe())
        return cache[rev]

    commits = watched_commits(root, good, bad)
    gv, bv = check(resolve_revision(root, good)), check(resolve_revision(root, bad))
    for name, v in (("good", gv), ("bad", bv)):
        if v.error is not None:
            raise PolicyError(f"the {name} revision cannot be replayed: {v.error}")
    result = dict(repo=str(root), good=good, bad=bad, good_verdict=gv, bad_verdict=bv,
                  candidates=tuple(commits))
    if gv.bad == bv.bad or not commits:
        return BisectResult(**result, first_change=None, direction=None, tested=tuple(tested))
    # Invariant: index lo has good's verdict (-1 is good itself), index hi has bad's; the last
    # watched commit replays like bad (no watched file changes after it).
    lo, hi = -1, len(commits) - 1
    cache.setdefault(commits[hi], bv)
    skipped: set[int] = set()
    while hi - lo > 1:
        inner = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inner:
            break
        mid = inner[len(inner) // 2]
        v = check(commits[mid])
        if v.error is not None:
            skipped.add(mid)
        elif v.bad == gv.bad:
            lo = mid
        else:
            hi = mid
    first = cache[commits[hi]]
    if first.revision != commits[hi]:  # the last commit stood in for bad: report its own id
        first = dataclasses.replace(bv, revision=commits[hi], subject=_subject(root, commits[hi]))
    ambiguous = tuple(commits[i] for i in sorted(skipped) if lo < i < hi)
    return BisectResult(**result, first_change=first,
                        direction="stops leaking" if gv.bad else "starts leaking",
                        tested=tuple(tested), ambiguous=ambiguous)


def bisect_input(input_path: str | Path, repo: str | Path, good: str, bad: str,
                 run: Optional[str] = None, isolate: bool = False) -> BisectResult:
    """``forensics bisect``: load or ingest ``input_path``, take its run, :func:`bisect` it."""
    from replay.feed import readers
    from replay.frames import RunFrames
    as_dataset = readers().as_dataset
    ds = as_dataset(input_path)
    frames = RunFrames.from_dataset(ds, run)
    return bisect(frames, repo, good, bad, isolate=isolate)
