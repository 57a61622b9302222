"""Turning a ``--policy`` argument into a :class:`~replay.policy.Policy`.

Accepted forms: a catalogue name (``prefix-2026``). Real-code and candidate forms
(``trtllm:PATH[@REV]``, ``trtllm:installed``, ``py:MODULE:FUNCTION``, ``py:FILE.py:FUNCTION``)
are resolved by ``replay.trtllm_source`` / ``replay.candidate``.
"""
from __future__ import annotations

from replay.catalogue import CATALOGUE, get_policy
from replay.policy import Policy


def resolve_policy(spec: str | Policy) -> Policy:
    """A Policy from a name or spec; raises ``PolicyError`` naming what is wrong."""
    if isinstance(spec, Policy):
        return spec
    return get_policy(spec)


def resolve_policies(specs: list[str] | tuple[str, ...] | None) -> list[Policy]:
    """Policies for a list of specs; the whole catalogue when empty."""
    if not specs:
        return list(CATALOGUE.values())
    return [resolve_policy(s) for s in specs]
