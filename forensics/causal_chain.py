"""The causal chain told once per mechanism, and the report's opening sentence.

A crashed run has tens of leaks that happen the same way (the same predicate gap on the same kind
of zero-batch rank, the same missing rollback); telling each in full buries the one that matters.
:func:`mechanisms` groups a replay's leaks by how they happened, the group holding the fatal leak
first; :func:`opening_sentence` says in one sentence what crashed, where, why (the three behaviours
of domain doc §1 with this run's ranks, iterations and request states) and what to do.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Optional

import pandas as pd

from replay.explain import FrameRow, describe_requests
from replay.states import STATE_INDEX, RequestState, micro_batch_window

_PATHS = {"update_states_tp": "_update_request_states_tp",
          "handle_responses": "_handle_responses",
          "rollback": "_finalize_adp_dummy_allocation(False)"}


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """Leaks that happened the same way.

    Fields:
        kind: ``"predicate-gap"``, ``"alloc-failed"``, ``"expected-zero"``, ``"scheduler-refused"``
            or ``"no-dummy"`` (why the zero-batch rank had no dummy).
        states: for a predicate gap, the states counted by the predicate and refused by the scheduler.
        text: the mechanism, told once.
        leaks: the leaks it explains, the fatal one first.
        items: one short line per leak (same order).
        fatal: it holds the leak the crash follows from.
    """

    kind: str
    states: tuple[str, ...]
    text: str
    leaks: tuple[Any, ...]
    items: tuple[str, ...]
    fatal: bool

    @property
    def count(self) -> int:
        return len(self.leaks)

    def title(self) -> str:
        n = self.count
        head = f"{n} leak{'' if n == 1 else 's'}"
        return head + (" (the fatal one first)" if self.fatal else "")

    def to_json(self) -> dict:
        return {"kind": self.kind, "states": list(self.states), "count": self.count,
                "fatal": self.fatal, "text": self.text, "leaks": [x.to_json() for x in self.leaks],
                "items": list(self.items)}


_INDEX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _index(res):
    """The decision rows of the iterations a chain names (leak skips, the crash) and the ledger,
    indexed once per result: a fleet-hour run has millions of decision rows and many leaks."""
    got = _INDEX.get(res)
    if got is None:
        its = sorted({int(x.iter_skipped) for x in res.leak_records}
                     | ({int(res.crash.iter)} if res.crash is not None else set()))
        # Those rows only: a streamed replay's file is not read whole (millions of rows).
        sub = res.read_decisions([("iter", "in", its)])
        rows = {(int(i), int(r)): k for k, (i, r) in enumerate(zip(sub["iter"], sub["rank"]))}
        led = res.ledger
        by_dummy = ({int(x): k for k, x in enumerate(led["dummy"])} if len(led) else {})
        got = (sub, rows, by_dummy)
        _INDEX[res] = got
    return got


def _row(res, it: int, rank: int):
    sub, rows, _ = _index(res)
    k = rows.get((int(it), int(rank)))
    return None if k is None else FrameRow(sub, k)


def _gap(res, states) -> tuple[str, ...]:
    """The states of ``states`` the policy's predicate counts but the scheduler refuses."""
    counted = res.policy.predicate(res.config).mask(res.config)
    window = micro_batch_window(res.config.encoder_decoder)
    out = []
    for _, s in states:
        name = s if isinstance(s, str) else RequestState(int(s)).name
        v = int(RequestState[name])
        if counted[STATE_INDEX[v]] and v not in window and name not in out:
            out.append(name)
    return tuple(out)


def cause_kind(res, leak) -> tuple[str, tuple[str, ...]]:
    """Why the zero-batch rank(s) of a leak had no dummy: ``(kind, gap states)``."""
    kinds, states = [], []
    for c in leak.cause_ranks:
        row = _row(res, leak.iter_skipped, c)
        if row is None:
            kinds.append("no-dummy")
            continue
        if bool(row["alloc_failed"]):
            kinds.append("alloc-failed")
        elif int(row["real"]) == 0 and int(row["expected"]) == 0:
            kinds.append("expected-zero")
        elif int(row["schedulable"]) > 0 and int(row["window_real"]) == 0:
            kinds.append("predicate-gap")
            states += [s for s in _gap(res, leak.cause_states.get(c, ())) if s not in states]
        elif int(row["schedulable"]) > 0:
            kinds.append("scheduler-refused")
        else:
            kinds.append("no-dummy")
    order = ("predicate-gap", "alloc-failed", "scheduler-refused", "expected-zero", "no-dummy")
    kind = min(kinds, key=order.index) if kinds else "no-dummy"
    return kind, tuple(sorted(states, key=lambda s: s != "GENERATION_TO_COMPLETE"))


def _no_rollback(res, leak) -> str:
    pol, cfg = res.policy, res.config
    if pol.rollback_on_skip and not pol.rolls_back(cfg):
        return (f"{pol.name} rolls back a pending dummy only on the disaggregated"
                f"{', pp_size 1' if pol.scheduler_gate_pp1 else ''} path")
    if not pol.rolls_back(cfg):
        return f"{pol.name} does not roll back a pending dummy"
    return "it was no longer pending, so no rollback"


def _ledger_entry(res, leak):
    if leak.dummy < 0:
        return None
    k = _index(res)[2].get(int(leak.dummy))
    return None if k is None else FrameRow(res.ledger, k)


def leak_outcome(res, leak) -> str:
    """What became of a leaked dummy, in a few words."""
    crash = res.crash
    fatal = res.fatal_leak
    if crash is not None and fatal is not None and leak == fatal:
        row = _row(res, crash.iter, leak.rank)
        if row is not None and crash.kind == "assert":
            return (f"fatal: at iter {crash.iter} rank {leak.rank} counted {int(row['active'])} "
                    f"> expected {int(row['expected'])}: AssertionError")
        return f"fatal: the run stops at iter {crash.iter} ({crash.message})"
    entry = _ledger_entry(res, leak)
    if entry is not None and not pd.isna(entry["iter_removed"]):
        path = _PATHS.get(str(entry["removal_path"]), str(entry["removal_path"]))
        return (f"removed at iter {int(entry['iter_removed'])} by {path} after "
                f"{int(entry['skips_survived'])} skipped iteration(s)")
    if crash is not None:
        return f"still alive when the run stopped at iter {crash.iter}"
    return "still alive at the end of the trace"


def leak_item(res, leak) -> str:
    """One short line per leak for the folded list."""
    causes = ", ".join(str(c) for c in leak.cause_ranks)
    return (f"rank {leak.rank}: {leak.role} dummy padded at iter {leak.iter_created}, survived the "
            f"skip of iter {leak.iter_skipped} (zero batch on rank{'s' if len(leak.cause_ranks) > 1 else ''} "
            f"{causes}); {leak_outcome(res, leak)}")


def _mechanism_text(res, kind: str, states: tuple[str, ...], leaks: list, rollback: str) -> str:
    pol = res.policy
    pred = pol.predicate(res.config)
    window = micro_batch_window(res.config.encoder_decoder)
    skips = sorted({x.iter_skipped for x in leaks})
    causes = sorted({c for x in leaks for c in x.cause_ranks})
    if kind == "predicate-gap":
        why = (f"{pol.name}'s pad predicate ({pred.describe()}) counts {', '.join(states)} requests "
               f"as schedulable but the scheduler refuses them (window {window!r}), so a rank "
               "holding them and nothing the scheduler takes got no dummy and offered batch 0")
    elif kind == "alloc-failed":
        why = (f"add_dummy_requests returned None on the rank that needed a dummy, so {pol.name} "
               "skipped padding and it offered batch 0")
    elif kind == "expected-zero":
        why = "expected_num_active_requests was 0 on an empty rank, so it got no dummy and offered batch 0"
    elif kind == "scheduler-refused":
        why = ("the pad predicate counted schedulable requests, so the rank got no dummy, but the "
               "scheduler took none of them (recorded scheduled 0, e.g. no KV capacity): batch 0")
    else:
        why = "a rank got no dummy and offered batch 0"
    return (f"{why}; can_queue went False fleet-wide, the forward step and the request-state update "
            f"were skipped everywhere, and the dummies the other ranks had padded stayed ({rollback}). "
            f"Skipped iteration{'s' if len(skips) > 1 else ''} {_list(skips)}; zero batch on "
            f"rank{'s' if len(causes) > 1 else ''} {_list(causes)}.")


def _list(xs, limit: int = 12) -> str:
    shown = ", ".join(str(x) for x in xs[:limit])
    return shown + (f", ... ({len(xs) - limit} more)" if len(xs) > limit else "")


def mechanisms(res) -> list[Mechanism]:
    """The leaks of a replay grouped by mechanism; the group with the fatal leak first (the fatal
    leak first in it), the others by their first leak."""
    fatal = res.fatal_leak
    groups: dict[tuple, list] = {}
    for leak in res.leak_records:                       # the fatal one first
        kind, states = cause_kind(res, leak)
        rollback = _no_rollback(res, leak)
        groups.setdefault((kind, states, rollback), []).append(leak)
    out = []
    for (kind, states, rollback), leaks in groups.items():
        out.append(Mechanism(kind=kind, states=states,
                             text=_mechanism_text(res, kind, states, leaks, rollback),
                             leaks=tuple(leaks), items=tuple(leak_item(res, x) for x in leaks),
                             fatal=fatal is not None and leaks[0] == fatal))
    return out


def _crash_what(res) -> str:
    c = res.crash
    if c.kind == "assert":
        return (f"AssertionError in _pad_attention_dp_dummy_request: {c.active} active > "
                f"expected_num_active_requests {c.expected}")
    if c.kind == "dummy_alloc_none":
        return "TypeError: add_dummy_requests returned None and the result was used unchecked"
    return c.message


def opening_sentence(res, *, recording_build: bool = False, todo: str = "") -> str:
    """One sentence: what crashed (or leaked), where, why, and ``todo``.

    Args:
        res: the replay whose story is told (``ReplayResult``).
        recording_build: ``res.policy`` is the build that recorded the run.
        todo: what to do (a clause without a final full stop), appended after a semicolon.
    """
    who = f"{res.policy.name}" + (" (the build that recorded the run)" if recording_build else "")
    tail = f"; {todo}" if todo else ""
    fatal = res.fatal_leak
    leak = fatal if fatal is not None else res.first_leak
    if leak is None:
        if res.crash is not None:
            c = res.crash
            ranks = ", ".join(str(r) for r in c.ranks)
            return (f"Under {who} rank{'s' if len(c.ranks) > 1 else ''} {ranks} crashed at iteration "
                    f"{c.iter} ({_crash_what(res)}) with no leaked dummy before it{tail}.")
        return f"Under {who} no dummy leaked and nothing crashed{tail}."
    kind, states = cause_kind(res, leak)
    causes = leak.cause_ranks
    held = "; ".join(f"rank {c} held {describe_requests(leak.cause_states.get(c, ()))}" for c in causes)
    if kind == "predicate-gap":
        b1 = (f"at iteration {leak.iter_skipped} {held}, and {res.policy.name}'s pad predicate counts "
              f"{', '.join(states)} as schedulable while the scheduler refuses it, so "
              f"rank{'s' if len(causes) > 1 else ''} {_list(list(causes))} got no dummy and offered "
              "batch 0")
    else:
        b1 = (f"at iteration {leak.iter_skipped} rank{'s' if len(causes) > 1 else ''} "
              f"{_list(list(causes))} offered batch 0 without a dummy ({kind.replace('-', ' ')}; {held})")
    b2 = (f"the whole fleet skipped iteration {leak.iter_skipped} and the {leak.role} dummy padded on "
          f"rank {leak.rank} at iteration {leak.iter_created} stayed ({_no_rollback(res, leak)})")
    n = len(res.leak_records)
    others = ""
    if n > 1:
        k = len(mechanisms(res))
        others = (f"; {n - 1} more dumm{'y' if n - 1 == 1 else 'ies'} leaked "
                  + ("the same way" if k == 1 else f"through {k} mechanisms in all"))
    if fatal is not None:
        c = res.crash
        row = _row(res, c.iter, leak.rank)
        b3 = (f"at iteration {c.iter} rank {leak.rank} counted "
              + (f"{int(row['real'])} real requests + the leaked dummy = {int(row['active'])} > "
                 f"expected_num_active_requests {int(row['expected'])}"
                 + (f" (capped at {res.config.cap})" if res.policy.cap and int(row['expected']) == res.config.cap else "")
                 if row is not None else "the leaked dummy") + " and the entry assert fired")
        return (f"Under {who} rank {c.rank} crashed at iteration {c.iter} ({_crash_what(res)}) "
                f"because {b1}; {b2}; {b3}{others}{tail}.")
    if res.crash is not None:
        c = res.crash
        return (f"Under {who} {n} dumm{'y' if n == 1 else 'ies'} leaked and rank {c.rank} crashed at "
                f"iteration {c.iter} ({_crash_what(res)}): {b1}; {b2}{tail}.")
    effect = ("it only warns about the surplus (PR #17278)" if res.policy.cap and
              res.policy.entry_check.value == "warn" else
              "it has no cap, so a leaked dummy raises the floor instead of tripping the assert"
              if not res.policy.cap else "no rank reached the cap")
    return (f"Under {who} {n} dumm{'y' if n == 1 else 'ies'} leaked without a crash ({effect}): "
            f"first {b1}; {b2}{tail}.")


def chain_json(res) -> Optional[dict]:
    """The grouped chain for ``findings.json`` / ``--json``."""
    if res is None:
        return None
    return {"policy": res.policy.name,
            "lines": [str(x) for x in res.explain()],
            "mechanisms": [m.to_json() for m in mechanisms(res)]}


__all__ = ["Mechanism", "cause_kind", "chain_json", "leak_item", "leak_outcome", "mechanisms",
           "opening_sentence"]
