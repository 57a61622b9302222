"""Which executor era a TensorRT-LLM source is, read off its AST (issue #6 item 2).

The era names the catalogue policy that supplies the rest of the loop (can_queue, removal,
rollback, cap) around the real pad code. Nothing here executes the source.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Optional

PAD_METHOD = "_pad_attention_dp_dummy_request"
COUNT_METHOD = "_count_schedulable_active_requests"
DELEGATE_METHOD = "is_request_in_schedulable_state"


def attr_names(node: ast.AST) -> set[str]:
    """Every attribute name used under ``node``."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def loaded_names(node: ast.AST) -> set[str]:
    """Every bare name used under ``node``."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@dataclasses.dataclass(frozen=True)
class Era:
    """What a source contains around the pad step, and the catalogue policy it matches.

    Fields:
        policy: the catalogue name supplying the rest of the loop.
        reasons: the facts that chose it, for reports.
    """

    policy: str
    reasons: tuple[str, ...]


_CAP_WORDS = frozenset({"max_num_active_requests", "hard_cap"})


def find_cap(trees: dict[str, Optional[ast.Module]]) -> Optional[str]:
    """Where ``expected_num_active_requests`` is capped: a function that computes it (by name or
    by assigning it) and calls ``min`` on ``max_num_active_requests`` / ``hard_cap``."""
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
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id == "min"
                        and any((attr_names(a) | loaded_names(a)) & _CAP_WORDS
                                for a in call.args)):
                    return f"{rel}:{fn.name}"
    return None


def detect_era(methods: dict[str, ast.FunctionDef], class_methods: frozenset[str],
               cap: Optional[str]) -> Era:
    """Which catalogue policy supplies the rest of the loop, from what the source contains.

    ``_pad_empty_attention_dp_batch`` → postpad-17379 (PR #17379); delegation to
    ``is_request_in_schedulable_state`` → sched-aware-16921; a window comparison
    (``GENERATION_TO_COMPLETE`` / ``scheduling_state_range``) → fix-16161, or tolerant-17278
    (the window with the surplus warning) without the entry assert; a separate count method or
    a cap on expected (:func:`find_cap`, in the executor or the router files) → prefix-2026;
    else legacy-2025.
    """
    pad = methods[PAD_METHOD]
    count_nodes = [pad] + ([methods[COUNT_METHOD]] if COUNT_METHOD in methods else [])
    words = set().union(*(attr_names(n) | loaded_names(n) for n in methods.values()))
    count_words = set().union(*(attr_names(n) | loaded_names(n) for n in count_nodes))
    asserts = any(isinstance(n, ast.Assert)
                  and "expected_num_active_requests" in attr_names(n.test)
                  for n in ast.walk(pad))
    window = bool(count_words & {"GENERATION_TO_COMPLETE", "scheduling_state_range",
                                 "no_schedule_after_state"})
    delegates = DELEGATE_METHOD in words
    separate = COUNT_METHOD in class_methods
    reasons = [
        f"count: {'separate ' + COUNT_METHOD if separate else 'inlined in ' + PAD_METHOD}",
        f"entry check: {'assert' if asserts else 'no assert (warning)'}",
    ]
    if delegates:
        reasons.append(f"delegates to scheduler.{DELEGATE_METHOD}")
    if window:
        reasons.append("compares against the scheduler window")
    reasons.append(f"cap on expected: {'min(..) in ' + cap if cap else 'not found'}")
    if "_finalize_adp_dummy_allocation" in class_methods:
        reasons.append("pending dummy rolled back by _finalize_adp_dummy_allocation")
    if "_pad_empty_attention_dp_batch" in class_methods:
        reasons.append("post-schedule _pad_empty_attention_dp_batch")
        name = "postpad-17379"
    elif delegates:
        name = "sched-aware-16921"
    elif window:
        name = "fix-16161" if asserts else "tolerant-17278"
    elif separate or cap:
        name = "prefix-2026"
    else:
        name = "legacy-2025"
    return Era(policy=name, reasons=tuple(reasons))
