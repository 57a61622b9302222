"""Shrinking a failing trace by delta debugging, keeping it a valid trace.

A trace is *interesting* when its replay under ``policy`` fails and its replay under the
``contrast`` policy (if any) does not. "Fails" is fixed from the original trace: if it crashes
under ``policy`` the shrunk trace must crash too (same crash kind, e.g. the entry assert),
otherwise it must leak. Shrink passes, registered by name in :data:`PASSES`, each run ddmin
(Zeller & Hildebrandt 2002) over one kind of unit; the passes repeat until none removes anything:

- ``decisions``: recorded ``expected``/``padded``/``scheduled``/``can_queue``/``alloc_ok`` fields
  (per frame and field). They describe the recording; after ranks, iterations or requests are
  removed they no longer hold (a recorded ``expected`` reflects a fleet that is gone; the replay
  reads ``scheduled`` as the real batch), so they are dropped first unless the failure depends on
  one, in which case only the needed ones are kept.
- ``ranks``: whole ranks. Survivors are renumbered ``0..k-1`` in their old order and ``tp_size``
  is set to ``k`` (a per-rank ``rank`` key in the run record is remapped or dropped).
- ``iterations``: whole iterations (every rank's frame), so each kept iteration stays replayable.
  Removing the iteration where a request was first fetched makes it *new* at its next kept
  iteration (``new_real``: it lowers the ``expected`` floor and puts the request after a carried
  dummy), unless that is the first kept iteration, where the replay counts nothing as new.
  The oracle judges each candidate with exactly those semantics, so the result is faithful to
  itself, not to the dropped context.
- ``requests``: real requests (by ``(rank, id)``, removed from every frame) and recorded dummies
  (each entry; the replay drops them anyway, they only feed the recorded counts).

Before the passes, every iteration after the failure (the crash, or the first leaking skip) is
dropped in one step: the replay is causal, so they cannot matter.

The run record is kept (``tp_size`` adjusted, ``expect`` dropped: the old expectations may not hold
for the shrunk trace) and notes are dropped. Iteration numbers are kept by default, so the crash
iteration still matches the original logs; ``contiguous_iters=True`` renumbers them
``first, first+1, ...``, accepted only when the replay outcome under both policies is the same
modulo that renumbering (the replay uses iteration numbers only through their order, e.g.
``first_seen``, so this normally holds).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
from typing import Any, Callable, Optional, Sequence

from forensics.errors import ForensicsError
from forensics.expectations import Outcome
from forensics.trace_records import DECISION_FIELDS, TraceSize, frame_records, run_record

log = logging.getLogger(__name__)

#: Default pass order: cheap, large reductions first.
DEFAULT_PASSES = ("decisions", "ranks", "iterations", "requests")
#: The passes repeat until none removes anything, at most this many rounds.
DEFAULT_MAX_ROUNDS = 4


class NotFailingError(ForensicsError):
    """The trace does not fail under the policy (or also fails under the contrast): nothing to keep."""


@dataclasses.dataclass(frozen=True)
class ShrinkPass:
    """One kind of unit ddmin removes.

    Fields:
        name: registry name.
        units: the units present in a trace, in a stable order.
        keep: a new trace keeping only the given units (must stay a valid trace).
        allow_empty: removing every unit leaves a valid trace.
    """

    name: str
    units: Callable[[list[dict]], list]
    keep: Callable[[list[dict], list], list[dict]]
    allow_empty: bool


#: Shrink passes by name.
PASSES: dict[str, ShrinkPass] = {}


def register_pass(p: ShrinkPass) -> ShrinkPass:
    PASSES[p.name] = p
    return p


def _frames_with(records: list[dict], frames: list[dict], run: Optional[dict] = None) -> list[dict]:
    return [run if run is not None else records[0]] + frames


# -- ranks ---------------------------------------------------------------------------------------
def _rank_units(records: list[dict]) -> list[int]:
    return list(range(int(run_record(records)["tp_size"])))


def _keep_ranks(records: list[dict], kept: list) -> list[dict]:
    new_of = {old: new for new, old in enumerate(sorted(kept))}
    run = dict(records[0], tp_size=len(new_of))
    if "rank" in run:
        if run["rank"] in new_of:
            run["rank"] = new_of[run["rank"]]
        else:
            del run["rank"]
    frames = [dict(f, rank=new_of[f["rank"]]) for f in frame_records(records) if f["rank"] in new_of]
    return _frames_with(records, frames, run)


register_pass(ShrinkPass("ranks", _rank_units, _keep_ranks, allow_empty=False))


# -- iterations ----------------------------------------------------------------------------------
def _iter_units(records: list[dict]) -> list[int]:
    return sorted({f["iter"] for f in frame_records(records)})


def _keep_iters(records: list[dict], kept: list) -> list[dict]:
    keep = set(kept)
    return _frames_with(records, [f for f in frame_records(records) if f["iter"] in keep])


register_pass(ShrinkPass("iterations", _iter_units, _keep_iters, allow_empty=False))


# -- requests ------------------------------------------------------------------------------------
def _request_units(records: list[dict]) -> list[tuple]:
    real, dummies = set(), []
    for f in frame_records(records):
        for pos, q in enumerate(f.get("requests", ())):
            if q.get("dummy", False):
                dummies.append(("d", f["iter"], f["rank"], pos))
            else:
                real.add(("r", f["rank"], q["id"]))
    return sorted(real) + dummies


def _keep_requests(records: list[dict], kept: list) -> list[dict]:
    keep = set(kept)
    frames = []
    for f in frame_records(records):
        reqs = [q for pos, q in enumerate(f.get("requests", ()))
                if (("d", f["iter"], f["rank"], pos) if q.get("dummy", False)
                    else ("r", f["rank"], q["id"])) in keep]
        frames.append(dict(f, requests=reqs))
    return _frames_with(records, frames)


register_pass(ShrinkPass("requests", _request_units, _keep_requests, allow_empty=True))


# -- recorded decisions --------------------------------------------------------------------------
def _decision_units(records: list[dict]) -> list[tuple]:
    return [(f["iter"], f["rank"], k) for f in frame_records(records) for k in DECISION_FIELDS if k in f]


def _keep_decisions(records: list[dict], kept: list) -> list[dict]:
    keep = set(kept)
    frames = [{k: v for k, v in f.items()
               if k not in DECISION_FIELDS or (f["iter"], f["rank"], k) in keep}
              for f in frame_records(records)]
    return _frames_with(records, frames)


register_pass(ShrinkPass("decisions", _decision_units, _keep_decisions, allow_empty=True))


# -- ddmin ---------------------------------------------------------------------------------------
def ddmin(units: Sequence, test: Callable[[list], bool], *, allow_empty: bool = False) -> list:
    """A 1-minimal sublist of ``units`` on which ``test`` holds (``test(units)`` must hold).

    Classic ddmin: try each of ``n`` chunks alone, then each complement; on success restart with
    the smaller list (``n`` back to 2, or ``n - 1`` after a complement), else double ``n`` until
    chunks are single units. ``allow_empty`` tries the empty list first.

    Example:
        >>> ddmin(list(range(8)), lambda s: 3 in s and 6 in s)
        [3, 6]
    """
    units = list(units)
    if allow_empty and units and test([]):
        return []
    n = 2
    while len(units) >= 2:
        size = -(-len(units) // n)
        chunks = [units[i:i + size] for i in range(0, len(units), size)]
        reduced = False
        for chunk in chunks:
            if len(chunk) < len(units) and test(chunk):
                units, n, reduced = chunk, 2, True
                break
        if not reduced and len(chunks) > 2:  # with two chunks complements are the chunks
            for start in range(0, len(units), size):
                comp = units[:start] + units[start + size:]
                if test(comp):
                    units, n, reduced = comp, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(units):
                break
            n = min(2 * n, len(units))
    return units


# -- the oracle ----------------------------------------------------------------------------------
def replay_records(records: list[dict], policy: Any):
    """Replay in-memory records under one policy (a name or a ``Policy``)."""
    import replay
    from replay.frames import RunFrames
    from replay.resolve import resolve_policy

    frames = RunFrames.from_records(records)
    return replay.run(frames, policy=resolve_policy(policy))


@dataclasses.dataclass
class Oracle:
    """Decides whether a candidate trace is interesting, counting replays and caching verdicts.

    Fields:
        policy: the policy the trace must fail under.
        contrast: the policy it must not fail under (None: not checked).
        target: ``"crash"`` or ``"leak"``, what failing means.
        crash_kind: with target ``"crash"``, the crash kind to keep (None: any).
        replay: ``replay(records, policy) -> result`` (injectable for tests).
        replays: replays run so far.
    """

    policy: Any
    contrast: Any = None
    target: str = "leak"
    replay: Callable[[list[dict], Any], Any] = replay_records
    replays: int = 0
    crash_kind: Optional[str] = None

    def outcome(self, records: list[dict], policy: Any) -> Optional[Outcome]:
        self.replays += 1
        try:
            return Outcome.of(self.replay(records, policy))
        except Exception as e:  # a candidate the replay refuses is simply not interesting
            log.debug("candidate refused by the replay: %s", e)
            return None

    def fails(self, out: Optional[Outcome]) -> bool:
        if out is None:
            return False
        if self.target == "crash":
            return out.crash and (self.crash_kind is None or out.crash_kind == self.crash_kind)
        return out.leak

    def __call__(self, records: list[dict]) -> bool:
        if not self.fails(self.outcome(records, self.policy)):
            return False
        if self.contrast is None:
            return True
        other = self.outcome(records, self.contrast)
        return other is not None and not other.leak and not other.crash


@dataclasses.dataclass(frozen=True)
class MinimizeResult:
    """A shrunk trace and how it got there.

    Fields:
        records: the minimized trace records (run record first).
        before, after: sizes of the input and the result.
        policy, contrast: the policies judged (names as given).
        target: ``"crash"`` or ``"leak"``.
        replays: replays the oracle ran.
        rounds: rounds of passes until nothing shrank.
        outcome: the minimized trace's outcome under ``policy``.
    """

    records: list[dict]
    before: TraceSize
    after: TraceSize
    policy: str
    contrast: Optional[str]
    target: str
    replays: int
    rounds: int
    outcome: Outcome


def _name(p: Any) -> Optional[str]:
    return None if p is None else str(getattr(p, "name", p))


def minimize(records: list[dict], policy: Any, contrast: Any = None, *,
             passes: Sequence[str] = DEFAULT_PASSES, max_rounds: int = DEFAULT_MAX_ROUNDS,
             contiguous_iters: bool = False,
             replay: Callable[[list[dict], Any], Any] = replay_records) -> MinimizeResult:
    """Shrink a trace that fails under ``policy`` (and not under ``contrast``).

    Args:
        records: trace records of one run (see ``forensics.trace_records.load_records``).
        policy: the policy spec the trace must keep failing under.
        contrast: a policy spec it must keep passing under, or None.
        passes: shrink pass names from :data:`PASSES`, run in this order each round.
        max_rounds: stop after this many rounds even if a pass still shrinks.
        contiguous_iters: renumber the kept iterations contiguously (see the module docstring).
        replay: the replay function (tests inject a fake).

    Returns:
        :class:`MinimizeResult`.

    Raises:
        NotFailingError: the input does not fail under ``policy`` or fails under ``contrast``.
        ForensicsError: an unknown pass or policy, or an input the replay refuses.
    """
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise ForensicsError(f"unknown shrink pass(es) {', '.join(unknown)}",
                             hint="passes: " + ", ".join(PASSES))
    current = [r for r in copy.deepcopy(list(records)) if r.get("kind") != "note"]
    run = dict(run_record(current))
    run.pop("expect", None)
    current[0] = run
    before = TraceSize.of(records)
    first = Outcome.of(replay(current, policy))  # errors on bad input propagate
    if not (first.crash or first.leak):
        raise NotFailingError(f"the trace neither leaks nor crashes under {_name(policy)}; "
                              f"nothing to minimize")
    oracle = Oracle(policy, contrast, "crash" if first.crash else "leak", replay, replays=1,
                    crash_kind=first.crash_kind)
    if contrast is not None:
        other = oracle.outcome(current, contrast)
        if other is None or other.leak or other.crash:
            raise NotFailingError(f"the trace also fails under the contrast policy {_name(contrast)}",
                                  hint="choose a contrast policy the trace passes under")

    # Replay is causal (iteration i depends on iterations <= i only), so everything after the
    # failure can go in one step; checked by the oracle all the same.
    cut = first.crash_iter if oracle.target == "crash" else first.first_leak_iter
    if cut is not None:
        prefix = _keep_iters(current, [i for i in _iter_units(current) if i <= cut])
        if len(prefix) < len(current) and oracle(prefix):
            current = prefix
    rounds = 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 - reported after the loop
        shrunk = False
        for name in passes:
            p = PASSES[name]
            units = p.units(current)
            cache: dict[tuple, bool] = {}
            base = current

            def test(subset: list, p=p, base=base, cache=cache) -> bool:
                key = tuple(subset)
                if key not in cache:
                    cache[key] = oracle(p.keep(base, subset))
                return cache[key]

            kept = ddmin(units, test, allow_empty=p.allow_empty)
            if len(kept) < len(units):
                current = p.keep(base, kept)
                shrunk = True
                log.info("pass %s: %d -> %d units", name, len(units), len(kept))
        if not shrunk:
            break
    if contiguous_iters:
        current = _renumbered_if_same(current, oracle)
    final = Outcome.of(replay(current, policy))
    return MinimizeResult(records=current, before=before, after=TraceSize.of(current),
                          policy=_name(policy), contrast=_name(contrast), target=oracle.target,
                          replays=oracle.replays, rounds=rounds, outcome=final)


def minimize_input(source: Any, policy: str, contrast: Optional[str] = None, *,
                   out_path: Optional[str | os.PathLike] = None, run: Optional[str] = None,
                   **options: Any) -> MinimizeResult:
    """Load an input (any input ``forensics ingest`` accepts, or records), minimize, write.

    Args:
        source: an input path, a dataset or records (``forensics.trace_records.load_records``).
        policy, contrast: as :func:`minimize`.
        out_path: where to write the minimized trace as JSON Lines (None: not written).
        run: the run to take when the input holds several.
        **options: passed to :func:`minimize` (``passes``, ``max_rounds``, ``contiguous_iters``).
    """
    from forensics.trace_records import load_records, write_records

    result = minimize(load_records(source, run=run), policy, contrast, **options)
    if out_path is not None:
        write_records(result.records, out_path)
    return result


def renumber_iterations(records: list[dict]) -> tuple[list[dict], dict[int, int]]:
    """Records with iterations renumbered ``first, first+1, ...`` in order, and the old->new map."""
    iters = _iter_units(records)
    new_of = {old: iters[0] + i for i, old in enumerate(iters)} if iters else {}
    return ([records[0]] + [dict(f, iter=new_of[f["iter"]]) for f in frame_records(records)], new_of)


def _renumbered_if_same(records: list[dict], oracle: Oracle) -> list[dict]:
    """The renumbered trace when both policies' outcomes map onto the originals, else ``records``."""
    renumbered, new_of = renumber_iterations(records)
    if all(k == v for k, v in new_of.items()):
        return records
    for pol in (oracle.policy, oracle.contrast):
        if pol is None:
            continue
        a, b = oracle.outcome(records, pol), oracle.outcome(renumbered, pol)
        if a is None or b is None:
            return records
        mapped = dataclasses.replace(
            a, crash_iter=None if a.crash_iter is None else new_of[a.crash_iter],
            first_leak_iter=None if a.first_leak_iter is None else new_of.get(a.first_leak_iter))
        if mapped != b:
            log.info("renumbering iterations changes the %s outcome; kept the original numbers",
                     _name(pol))
            return records
    return renumbered


__all__ = ["DEFAULT_PASSES", "PASSES", "ShrinkPass", "register_pass", "ddmin", "Oracle",
           "MinimizeResult", "NotFailingError", "minimize", "minimize_input", "replay_records", "renumber_iterations"]
