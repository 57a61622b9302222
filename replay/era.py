"""Which executor era a TensorRT-LLM source is, read off its AST (issue #6 item 2, issue 12 item 3).

The era is told by what the pad code *does* (domain doc §10's table), not by which helper names
exist: an early-2026 build already has ``_count_schedulable_active_requests`` but no cap on
``expected`` (PR #13347 came later), so the cap is looked for where it is computed, the ADP
router (``scheduler/adp_router.py``, ``min(..., max_num_active_requests)`` / ``hard_cap``), the
request queue or the executor. The era names the catalogue policy supplying the rest of the loop
(can_queue, removal, rollback, cap) around the real pad code: the first of its candidates the
catalogue has (a newer catalogue entry is picked up as soon as it exists). Nothing here executes
the source.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Optional

PAD_METHOD = "_pad_attention_dp_dummy_request"
COUNT_METHOD = "_count_schedulable_active_requests"
DELEGATE_METHOD = "is_request_in_schedulable_state"
#: The same steps as loop-task methods (a public fork's ``executor_loop_tasks.IngestionTask``).
TASK_PAD_METHOD = PAD_METHOD.lstrip("_")
TASK_COUNT_METHOD = COUNT_METHOD.lstrip("_")
ROLLBACK_METHODS = ("_finalize_adp_dummy_allocation", "finalize_adp_dummy_allocation")
POSTPAD_METHODS = ("_pad_empty_attention_dp_batch", "pad_empty_attention_dp_batch")
#: Model-gate flags (PR #16279: DeepSeek-V4 only; PR #16921: model and overlap).
DSV4_FLAG = "_enable_dsv4_adp_dummy_fixes"


def attr_names(node: ast.AST) -> set[str]:
    """Every attribute name used under ``node``."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def names_read(fn: ast.FunctionDef) -> set[str]:
    """The names a function may read off the stand-in: every attribute name and string constant
    (``getattr(self, "x")``), each also with a leading underscore (a loop task's
    ``_ctx.config.x`` names ``_x``); a loop task's ``_ctx.config`` bucket is not the stand-in's
    ``config``."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute):
            ctx_bucket = isinstance(node.value, ast.Attribute) and node.value.attr == "_ctx"
            if not ctx_bucket:
                out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
    return out | {"_" + n for n in out}


def loaded_names(node: ast.AST) -> set[str]:
    """Every bare name used under ``node``."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


#: §10's eras: label -> (description, catalogue candidates for the loop, preferred first; among
#: the candidates the catalogue has, one counting as the source does is taken, see
#: :func:`pick_policy`).
ERAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mid-2025": ("inline legacy count, no cap, assert; context dummy for a context-only arrival",
                 ("mid-2025", "legacy-2025")),
    "late-2025": ("inline legacy count, no cap, assert; always a generation dummy",
                  ("late-2025", "legacy-2025")),
    "early-2026": ("separate legacy count method, no cap yet, assert",
                   ("early-2026", "legacy-2025")),
    "prefix-2026": ("legacy count, cap in the router (PR #13347), assert: the crashing build",
                    ("prefix-2026",)),
    "fix-16161": ("window count with a transceiver, ungated (the proposed PR #16161, never merged)",
                  ("fix-16161",)),
    "16279": ("window count only with _enable_dsv4_adp_dummy_fixes and a transceiver, assert "
              "(PR #16279, merged)", ("fix-16279", "fix-16161")),
    "after-16279": ("gated window count, surplus warning, no scheduler delegation",
                    ("tolerant-17278", "fix-16279", "fix-16161")),
    "16921": ("scheduler delegation, assert (PR #16921)", ("sched-aware-16921",)),
    "17278": ("scheduler delegation, surplus warning (PR #17278)",
              ("tolerant-17278", "sched-aware-16921")),
    "after-16921": ("scheduler delegation, warning, post-schedule padding (PR #17379)",
                    ("postpad-17379",)),
    "newest": ("as after #16921, forward intent (non-overlap), a refusal after the KV-capacity "
               "precheck tolerated on the legacy path too (PR #18157)", ("newest", "postpad-17379")),
    "dkv": ("as newest, and both pads return at once under a dkv configuration",
            ("dkv", "newest")),
}


@dataclasses.dataclass(frozen=True)
class Era:
    """What a source contains around the pad step, and the catalogue policy it matches.

    Fields:
        policy: the catalogue name supplying the rest of the loop.
        reasons: the facts that chose it, for reports.
        label: the §10 era (a key of :data:`ERAS`).
        cap: the source caps ``expected`` (found by :func:`find_cap`).
    """

    policy: str
    reasons: tuple[str, ...]
    label: str = ""
    cap: bool = True


_CAP_WORDS = frozenset({"max_num_active_requests", "hard_cap"})


def find_cap(trees: dict[str, Optional[ast.Module]]) -> Optional[str]:
    """Where ``expected_num_active_requests`` is capped: a function that computes it (by name or
    by assigning it) and calls ``min`` on ``max_num_active_requests`` / ``hard_cap``, or passes
    ``hard_cap=`` to the router that does."""
    for rel, tree in trees.items():
        if tree is None:
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            words = attr_names(fn) | loaded_names(fn)
            if "expected_num_active_requests" not in fn.name and \
                    "expected_num_active_requests" not in words:
                continue
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                if (isinstance(call.func, ast.Name) and call.func.id == "min"
                        and any((attr_names(a) | loaded_names(a)) & _CAP_WORDS
                                for a in call.args)):
                    return f"{rel}:{fn.name}"
                if any(k.arg == "hard_cap" for k in call.keywords):
                    return f"{rel}:{fn.name} (hard_cap=)"
    return None


def _unchecked_allocation(nodes: list[ast.AST]) -> bool:
    """``add_dummy_requests(...)[0]``: the allocation result indexed without a None check."""
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Call)
               and isinstance(n.value.func, ast.Attribute)
               and n.value.func.attr == "add_dummy_requests"
               for node in nodes for n in ast.walk(node))


def pick_policy(candidates: tuple[str, ...], count: str = "", asserts: Optional[bool] = None
                ) -> str:
    """The first of ``candidates`` the catalogue has, preferring one whose disaggregated count
    (``legacy``/``window``/``scheduler``) and entry check match the source's: the same name has
    meant other builds as the catalogue grew (``tolerant-17278``)."""
    from replay.catalogue import CATALOGUE
    present = [c for c in candidates if c in CATALOGUE]
    if not present:
        return candidates[-1]
    kind = {"legacy": "not-awaiting-kv", "window": "window", "scheduler": "scheduler"}.get(count)

    def score(name: str) -> tuple[int, int]:
        p = CATALOGUE[name]
        same_count = kind is not None and p.disagg_predicate.value == kind
        same_check = asserts is not None and (p.entry_check.value == "assert") == asserts
        return (int(same_count) * 2 + int(same_check), -present.index(name))
    return max(present, key=score)


def detect_era(methods: dict[str, ast.FunctionDef], class_methods: frozenset[str],
               cap: Optional[str], pad: str = PAD_METHOD) -> Era:
    """Which §10 era the source is, and the catalogue policy supplying the rest of the loop.

    Read off the pad closure (``methods``): the count (legacy, window, scheduler delegation), the
    entry check (an ``assert`` on ``expected_num_active_requests`` or a warning), the model gate
    (``_enable_dsv4_adp_dummy_fixes``), an unchecked allocation (``add_dummy_requests(..)[0]``),
    the forward intent (a ``tp_allreduce`` in the pad code), the role rule
    (``has_context_request``: mid 2025); from the class: the post-schedule pad and the rollback;
    ``cap``: :func:`find_cap` over the executor and router files.
    """
    nodes = list(methods.values())
    words = set().union(*(attr_names(n) | loaded_names(n) for n in nodes))
    pad_node = methods[pad]
    asserts = any(isinstance(n, ast.Assert) and "expected_num_active_requests" in attr_names(n.test)
                  for n in ast.walk(pad_node))
    window = bool(words & {"GENERATION_TO_COMPLETE", "scheduling_state_range",
                           "no_schedule_after_state"})
    delegates = DELEGATE_METHOD in words
    separate = bool({COUNT_METHOD, TASK_COUNT_METHOD} & class_methods)
    postpad = bool(set(POSTPAD_METHODS) & class_methods)
    rollback = bool(set(ROLLBACK_METHODS) & class_methods)
    intent = "tp_allreduce" in words
    unchecked = _unchecked_allocation(nodes)
    gated = DSV4_FLAG in words
    reasons = [
        f"count: {'separate ' + COUNT_METHOD.lstrip('_') if separate else 'inlined in the pad'}",
        f"entry check: {'assert' if asserts else 'no assert (warning)'}",
        f"cap on expected: {'min(..) in ' + cap if cap else 'none found in the router or executor'}",
    ]
    if delegates:
        reasons.append(f"delegates to scheduler.{DELEGATE_METHOD}")
    if window:
        reasons.append("compares against the scheduler window"
                       + (f" behind {DSV4_FLAG}" if gated else ""))
    if rollback:
        reasons.append("pending dummy rolled back by finalize_adp_dummy_allocation")
    if postpad:
        reasons.append("post-schedule pad_empty_attention_dp_batch")
    if intent:
        reasons.append("all-reduced forward intent")
    if unchecked:
        reasons.append("a dummy allocation is indexed unchecked")
    dkv = "dkv_enabled" in words
    if dkv:
        reasons.append("pads skipped under dkv_enabled")
    if postpad:
        label = ("dkv" if dkv else "newest") if intent and not unchecked else "after-16921"
    elif delegates:
        label = "16921" if asserts else "17278"
    elif window:
        label = ("16279" if asserts else "after-16279") if gated else "fix-16161"
    elif cap:
        label = "prefix-2026"
    elif separate:
        label = "early-2026"
    else:
        label = "mid-2025" if "has_context_request" in words else "late-2025"
    reasons.insert(0, f"era: {label} ({ERAS[label][0]})")
    count = "scheduler" if delegates else "window" if window else "legacy"
    return Era(policy=pick_policy(ERAS[label][1], count, asserts), reasons=tuple(reasons),
               label=label, cap=cap is not None)
