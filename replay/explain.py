"""Plain-English causal chains for a replay's leaks and crash (domain doc §1).

Each chain follows the three interacting behaviours of NVBug 6438685: why a rank offered a
zero batch without a dummy (pad predicate wider than the scheduler, a refused allocation, a
capacity refusal), the fleet-wide skip it caused and the dummies it left behind, and what the
leaked dummy did next (an entry assert at the cap, a surplus warning, a raised floor, removal).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from replay.policy import EntryCheck
from replay.states import RequestState, micro_batch_window

if TYPE_CHECKING:  # pragma: no cover
    from replay.results import Leak, ReplayResult


def _ids(ids: list[int], limit: int = 8) -> str:
    if len(ids) > 2 and ids == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]}..{ids[-1]}"
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def describe_requests(pairs) -> str:
    """``only GENERATION_TO_COMPLETE requests (ids 17, 23)`` style summary of a frame."""
    if not pairs:
        return "no requests"
    by_state: dict[str, list[int]] = {}
    for rid, state in pairs:
        name = state if isinstance(state, str) else RequestState(int(state)).name
        by_state.setdefault(name, []).append(int(rid))
    parts = [f"{name} ({'ids' if len(ids) > 1 else 'id'} {_ids(ids)})" for name, ids in by_state.items()]
    if len(parts) == 1:
        return f"only {parts[0].replace(' (id', ' requests (id', 1)}"
    return "requests " + ", ".join(parts)


class FrameRow:
    """Row ``k`` of a DataFrame, read field by field (``row.active``, ``row["active"]``):
    ``frame.iloc[k]`` builds a Series of every column, a mixed row converted to objects, about
    0.2 ms, and a chain reads a few fields of a few dozen rows."""

    __slots__ = ("_frame", "_k")

    def __init__(self, frame, k: int):
        if not -len(frame) <= k < len(frame):
            raise IndexError(f"row {k} of {len(frame)}")
        self._frame, self._k = frame, k

    def __getitem__(self, name: str):
        return self._frame[name].array[self._k]

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._frame.columns:
            raise AttributeError(name)
        return self[name]


def _row(res: ReplayResult, it: int, rank: int) -> FrameRow:
    d = res.decisions
    R = res.config.tp_size
    i = int(res.frames.iters.searchsorted(it))
    return FrameRow(d, i * R + rank)


def _zero_batch_reason(res: ReplayResult, it: int, rank: int) -> str:
    fr = res.frames
    i = int(fr.iters.searchsorted(it))
    row = _row(res, it, rank)
    pol = res.policy
    window = micro_batch_window(res.config.encoder_decoder)
    held = describe_requests(fr.requests_of(i, rank))
    head = f"rank {rank} held {held}"
    pred = pol.predicate(_replayed_config(res))
    if bool(row.alloc_failed) and _prechecked_out(res, i, rank):
        why = (f"; it needed a dummy but the KV-capacity precheck said it cannot fit, so "
               f"{pol.name} skipped padding (\"Unable to fit the complete attention-DP dummy KV "
               f"allocation\"): batch 0")
    elif bool(row.alloc_failed):
        why = (f"; it needed a dummy but add_dummy_requests returned None, so {pol.name} skipped "
               f"padding (\"Cannot allocate ... pad dummy\"): batch 0")
    elif int(row.real) == 0 and int(row.expected) == 0:
        why = "; expected_num_active_requests was 0, so it got no dummy: batch 0"
    elif int(row.schedulable) > 0 and int(row.window_real) == 0:
        why = (f"; {pol.name}'s predicate ({pred.describe()}) counts them as schedulable so rank "
               f"{rank} got no dummy, but the scheduler refuses them (window {window!r}): batch 0")
    elif int(row.schedulable) > 0:
        why = (f"; the pad predicate counted {int(row.schedulable)} schedulable so rank {rank} got "
               f"no dummy, but the scheduler took none of them (recorded scheduled 0, e.g. no KV "
               f"capacity): batch 0")
    else:
        why = "; it got no dummy: batch 0"
    if pol.postpad_empty_batch and int(row.active) > 0:
        if int(row.active) >= res.config.cap:
            why += f" (no post-schedule dummy: {int(row.active)} active is at the cap {res.config.cap})"
        elif bool(row.alloc_failed) or not _alloc_ok(res, i, rank):
            why += " (no post-schedule dummy: it could not be allocated)"
    return head + why


def _replayed_config(res: ReplayResult):
    """The configuration the shown decisions were replayed with (a model assumed where the run
    names none: ``ReplayResult.gated``)."""
    if res.gated is None:
        return res.config
    return res.under_model(res.gated.shown).config


def _alloc_ok(res: ReplayResult, i: int, rank: int) -> bool:
    """The dummy could have been allocated: it fits and the allocation is not refused."""
    return bool(res.frames.alloc_ok[i, rank]) and bool(res.frames.kv_precheck_ok[i, rank])


def _prechecked_out(res: ReplayResult, i: int, rank: int) -> bool:
    """The version's KV-capacity precheck ran on this frame and said the dummy cannot fit."""
    return (not bool(res.frames.kv_precheck_ok[i, rank])
            and res.policy.prechecks(_replayed_config(res)))


def _cap_text(res: ReplayResult, row) -> str:
    cfg = res.config
    if str(row.expected_source) == "recorded":
        src = "recorded"
        if res.policy.cap and int(row.expected) == cfg.cap:
            src += f", at the cap max_num_active_requests = {cfg.cap}"
    elif res.policy.cap and int(row.expected) == cfg.cap:
        src = f"capped at pp_size*max_batch_size = {cfg.cap}" if cfg.cap == cfg.pp_size * cfg.max_batch_size \
            else f"capped at max_num_active_requests = {cfg.cap}"
    else:
        src = "computed"
    return f"expected {int(row.expected)} ({src})"


def leak_chain(res: ReplayResult, leak: Leak) -> str:
    """The causal chain of one leak."""
    fr = res.frames
    pol = res.policy
    it = leak.iter_skipped
    causes = "; ".join(_zero_batch_reason(res, it, c) for c in leak.cause_ranks) or \
        "some rank offered batch 0"
    offered = ", ".join(str(c) for c in leak.cause_ranks)
    plural = "s" if len(leak.cause_ranks) > 1 else ""
    i_created = int(fr.iters.searchsorted(leak.iter_created))
    held = describe_requests(fr.requests_of(i_created, leak.rank))
    origin = "padded" if leak.role == "context" or _row(res, leak.iter_created, leak.rank).padded \
        else "post-padded"
    text = (f"iter {it}: {causes}. can_queue is False fleet-wide (rank{plural} {offered} offered 0), "
            f"so the forward step and the request-state update were skipped everywhere; the "
            f"{leak.role} dummy {origin} on rank {leak.rank} at iter {leak.iter_created} (which held "
            f"{held}) was not removed")
    if pol.rollback_on_skip and not pol.rolls_back(_replayed_config(res)):
        gate = pol.gates().get("transactional_dummy")
        where = f"where {gate.describe()}" if gate is not None else "on the disaggregated path"
        text += f" ({pol.name} rolls back a pending dummy only {where})"
    elif not pol.rolls_back(_replayed_config(res)):
        text += f" ({pol.name} does not roll back a pending dummy)"
    elif leak.iter_created < it:
        text += " (it was no longer pending, so no rollback)"
    text += "."
    led = res.ledger
    entry = FrameRow(led, int(np.flatnonzero(led["dummy"].to_numpy() == leak.dummy)[0])) \
        if leak.dummy >= 0 else None
    crash = res.crash
    if crash is not None and leak.rank in crash.ranks and (entry is None or entry.iter_removed is None
                                                          or _isna(entry.iter_removed)):
        row = _row(res, crash.iter, leak.rank)
        text += (f" iter {crash.iter}: rank {leak.rank} counted {int(row.real)} real requests + its "
                 f"leaked dummy = {int(row.active)} > {_cap_text(res, row)}: AssertionError.")
    elif entry is not None and not _isna(entry.iter_removed):
        nxt = int(entry.iter_removed)
        row = _row(res, nxt, leak.rank)
        extra = ""
        if bool(row.surplus) and pol.entry_check is EntryCheck.WARN:
            extra = (f" At iter {nxt} it made rank {leak.rank} count {int(row.active)} > "
                     f"{_cap_text(res, row)}; {pol.name} only warns (PR #17278).")
        elif not pol.cap and int(row.active) > res.config.cap:
            extra = (f" At iter {nxt} rank {leak.rank} counted {int(row.active)} with it, above "
                     f"pp_size*max_batch_size = {res.config.cap}, but {pol.name} has no cap: the "
                     f"leaked dummy raised the floor to expected {int(row.expected)} and could not "
                     f"trip the assert.")
        path = {"update_states_tp": "_update_request_states_tp (it was the last element)",
                "handle_responses": "_handle_responses (it was no longer the last element)",
                "rollback": "_finalize_adp_dummy_allocation(False)"}.get(str(entry.removal_path),
                                                                       str(entry.removal_path))
        text += (f"{extra} It was removed at iter {nxt} by {path} after surviving "
                 f"{int(entry.skips_survived)} skipped iteration(s).")
    elif crash is not None:
        text += f" It was still alive when the run stopped at iter {crash.iter}."
    else:
        text += " It was still alive at the end of the trace."
    return text


def _isna(v) -> bool:
    try:
        import pandas as pd
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return v is None


def crash_chain(res: ReplayResult) -> str:
    """The causal chain of the crash."""
    c = res.crash
    assert c is not None
    fr = res.frames
    i = int(fr.iters.searchsorted(c.iter))
    parts = []
    for r in c.ranks:
        row = _row(res, c.iter, r)
        held = describe_requests(fr.requests_of(i, r))
        if c.kind == "assert":
            dummy = ""
            if bool(row.carried_dummy):
                d = res.ledger[(res.ledger["rank"] == r) & (res.ledger.iter_created < c.iter)]
                created = int(d.iter_created.iloc[-1]) if len(d) else "?"
                dummy = f" + a dummy leaked since iter {created}"
            parts.append(f"rank {r} held {held}: {int(row.real)} real{dummy} = {int(row.active)} "
                         f"> {_cap_text(res, row)}")
        elif c.kind == "dummy_alloc_none":
            parts.append(f"rank {r} held {held} and needed a dummy, but add_dummy_requests returned "
                         f"None and {res.policy.name} uses the result unchecked")
        else:
            parts.append(f"rank {r}: the pad hook raised {c.message}")
    what = {"assert": "AssertionError in _pad_attention_dp_dummy_request",
            "dummy_alloc_none": "TypeError on the None dummy"}.get(c.kind, c.message)
    return f"iter {c.iter}: " + "; ".join(parts) + f": {what}. The run stops here."


def model_condition(res: ReplayResult) -> str | None:
    """How the verdict depends on the model, when the run names none and the version's gates
    read it (None otherwise): ``"fix-16279: crash unless the model is DeepSeek-V4 (...)"``."""
    g = res.gated
    if g is None:
        return None
    from replay.policy import GateState, model_name
    verdict = res.policy.applies_to(res.config)
    gates = res.policy.gates()
    flags = sorted({gates[k].flag for k, st in verdict.paths.items() if st is GateState.UNKNOWN})
    shown = "a model outside the gate" if g.shown is None else model_name(g.shown)
    return (f"{res.policy.name}: {g.summary()}. The run record names no model and "
            f"{', '.join(flags)} reads it (replayed once per model); the chains below assume "
            f"{shown}.")


def explain(res: ReplayResult) -> list[str]:
    """One chain per leak, the fatal leak (the one the crash follows from) first and the others
    in ledger order, then one for the crash (the order of the report and the pytest plugin);
    first, when the run names no model and the version's gates read it, how the verdict depends
    on the model."""
    cond = model_condition(res)
    out = [cond] if cond and (res.leak_records or res.crash is not None) else []
    out += [leak_chain(res, leak) for leak in res.leak_records]   # fatal first, then ledger order
    if res.crash is not None:
        out.append(crash_chain(res))
    return out


def story(res: ReplayResult) -> list[str]:
    """The chain a reader needs first: with a crash, the leak that put the dummy on the crashing
    rank (its chain ends with the crash); else the first leak. Empty when nothing went wrong."""
    fatal = res.fatal_leak
    cond = model_condition(res)
    head = [cond] if cond else []
    if res.crash is not None:
        # A fatal leak's chain already ends with the crash it causes.
        return head + ([leak_chain(res, fatal)] if fatal is not None else [crash_chain(res)])
    return head + [leak_chain(res, res.first_leak)] if res.leak_records else []


def warnings(res: ReplayResult) -> list[tuple[int, int, str]]:
    """``(iter, rank, message)`` for every warning the replayed executor would log."""
    d = res.decisions
    out = []
    sur = d[d.surplus & ~d.crash]
    for it, rank, act, exp in zip(sur["iter"], sur["rank"], sur["active"], sur["expected"]):
        out.append((int(it), int(rank), f"active_requests ({int(act)}) exceeds "
                    f"expected_num_active_requests ({int(exp)}); tolerating"))
    fail = d[d.alloc_failed]
    fr = res.frames
    for it, rank in zip(fail["iter"], fail["rank"]):
        i = int(fr.iters.searchsorted(int(it))) if fr is not None else -1
        if fr is not None and _prechecked_out(res, i, int(rank)):
            text = ("Unable to fit the complete attention-DP dummy KV allocation; skipping this "
                    "forward iteration and retrying")
        else:
            text = ("Cannot allocate the attention-DP pad dummy; skipping padding this "
                    "iteration, the fleet will retry.")
        out.append((int(it), int(rank), text))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


__all__ = ["crash_chain", "describe_requests", "explain", "leak_chain", "model_condition", "story",
           "warnings"]
