"""Turning a ``--policy`` argument into a :class:`~replay.policy.Policy`.

Accepted forms:

* a catalogue name (``prefix-2026``, see ``replay.catalogue``);
* ``trtllm:PATH``, ``trtllm:PATH@REV``, ``trtllm:PATH#REV``, ``trtllm:installed``: the real pad
  code of a TensorRT-LLM checkout (at a git revision) or of the installed package
  (``replay.trtllm_source``). ``#`` always separates the revision; ``@`` does unless the whole
  text is an existing path (a directory ``dir@HEAD`` is read as that directory);
* ``py:MODULE:FUNCTION``, ``py:FILE.py:FUNCTION`` (optionally ``:pad``/``:count`` and a base
  policy): a candidate patch (``replay.candidate``).
"""
from __future__ import annotations

from replay.catalogue import CATALOGUE, get_policy
from replay.policy import Policy

TRTLLM_PREFIX = "trtllm:"
CANDIDATE_PREFIX = "py:"


def resolve_policy(spec: str | Policy) -> Policy:
    """A Policy from a name or spec; raises ``PolicyError`` naming what is wrong."""
    if isinstance(spec, Policy):
        return spec
    if spec.startswith(TRTLLM_PREFIX):
        from replay.trtllm_source import resolve_trtllm
        return resolve_trtllm(spec)
    if spec.startswith(CANDIDATE_PREFIX):
        from replay.candidate import resolve_candidate
        return resolve_candidate(spec)
    return get_policy(spec)


def resolve_policies(specs: list[str] | tuple[str, ...] | None) -> list[Policy]:
    """Policies for a list of specs; the whole catalogue when empty."""
    if not specs:
        return list(CATALOGUE.values())
    return [resolve_policy(s) for s in specs]
