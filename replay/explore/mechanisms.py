"""The failure mechanisms the explorer reports, and what a differential run compares.

A mechanism is a kind of failure with its cause:

* ``leak``: a pad dummy survives a fleet-wide skip (a rank scheduled 0; the cause is what that
  rank held, or the KV outcome that refused its dummy);
* ``wasted capacity``: the entry check's surplus is tolerated (PR #17278's warning): a leaked
  dummy occupies a slot of the rank's capacity (the cause is that dummy's leak);
* ``crash``: the entry assert fires (the rank's event loop dies, the fleet follows; the cause is
  the leaked dummy that pushed the rank over ``expected``);
* ``hang in a collective``: a refused dummy is used unchecked (``TypeError`` on ``None[0]``): the
  event-loop thread dies and its peers wait in ``_can_queue``'s all-gather until the hang detector
  fires (PR #18157's description; the cause is the KV outcome);
* ``crash (other exception)``: real code raised something else in the pad step.
"""
from __future__ import annotations

KIND_LEAK = 1
KIND_WASTE = 2
KIND_CRASH = 3
KIND_HANG = 4
KIND_ERROR = 5

KIND_NAMES = {KIND_LEAK: "leak", KIND_WASTE: "wasted capacity", KIND_CRASH: "crash",
              KIND_HANG: "hang in a collective", KIND_ERROR: "crash (other exception)"}
#: The kind of each name.
KIND_OF = {name: kind for kind, name in KIND_NAMES.items()}
#: File-name slugs of the kinds.
KIND_SLUGS = {KIND_LEAK: "leak", KIND_WASTE: "wasted-capacity", KIND_CRASH: "crash",
              KIND_HANG: "hang", KIND_ERROR: "error"}

#: What a differential run compares, per rank, in this order (the first differing field names
#: the divergence): the crash kind, then ``replay.step.StepOutputs`` fields.
DIVERGENCE_FIELDS = ("crash", "padded", "role_context", "alloc_failed", "postpadded", "batch",
                     "can_queue", "removed_path", "survives", "surplus")


def crash_kind_of_message(message: str) -> int:
    """The kind of a hook's exception text (``"AssertionError: ..."``)."""
    head = message.split(":", 1)[0].split(" ", 1)[0].strip()
    if head == "AssertionError":
        return KIND_CRASH
    if head == "TypeError" and "NoneType" in message:
        return KIND_HANG
    return KIND_ERROR


def describe_kind(kind: int, cause: str) -> str:
    """One sentence for a mechanism and its cause (a reason label of ``replay.explore.model``)."""
    name = KIND_NAMES[kind]
    kv = cause.startswith("KV ")
    what = (f"a rank's dummy was not padded ({cause[3:]})" if kv
            else f"a rank that held {cause} scheduled 0")
    if kind == KIND_LEAK:
        return f"{name}: {what} and the fleet skipped"
    if kind == KIND_WASTE:
        return f"{name}: a leaked dummy tolerated over expected (it leaked because {what})"
    if kind == KIND_CRASH:
        return f"{name}: the entry assert fires (the dummy leaked because {what})"
    if kind == KIND_HANG:
        return f"{name}: a dummy whose allocation was refused is used unchecked ({cause[3:] if kv else cause})"
    return f"{name} ({cause})"


__all__ = ["DIVERGENCE_FIELDS", "KIND_CRASH", "KIND_ERROR", "KIND_HANG", "KIND_LEAK",
           "KIND_NAMES", "KIND_OF", "KIND_SLUGS", "KIND_WASTE", "crash_kind_of_message", "describe_kind"]
