"""Candidate patches: a user's own pad predicate replayed like any policy (issue #6 item 4).

Spec: ``py:MODULE:FUNCTION`` or ``py:FILE.py:FUNCTION``, optionally ``:KIND`` and ``:BASE``
(``py:fix.py:count_fixed:count:prefix-2026``). The function has the upstream method's signature
and receives the stand-in executor (``replay.standin_executor``) as ``self``:

* ``KIND = pad``: it replaces ``_pad_attention_dp_dummy_request`` (``def f(self) -> None``); it
  appends the dummy to ``self.active_requests`` itself, as upstream does. ``self.
  _count_schedulable_active_requests()`` is available and counts as the BASE policy does.
* ``KIND = count``: it replaces ``_count_schedulable_active_requests`` (``def f(self) -> int``);
  the pad step around it is BASE's: ``expected > 0 and count == 0`` pads, entry assert or warning
  and a None dummy crash or skip as BASE does.

Without KIND, a function whose name contains ``count`` is a count, one containing ``pad`` a pad;
the function may also carry attributes ``adp_kind`` / ``adp_base``. BASE (default ``newest``) is
the catalogue policy supplying the rest of the loop (can_queue, removal, rollback, cap).

``self.scheduler.is_request_in_schedulable_state`` is the PR #16921 model (window minus 7/8/9).
Log through ``self.logger`` (``warning``/``info``): those records become the replay's warnings,
and a warning mentioning ``expected`` on a surplus frame marks the surplus as tolerated.

Example (``my_fix.py``), tried on the recorded failure with ``--policy
py:my_fix.py:count_in_window:count:prefix-2026``::

    def count_in_window(self):
        if self.kv_cache_transceiver is None:
            return len(self.active_requests)
        low, high = self.scheduler.scheduling_state_range
        return sum(1 for r in self.active_requests if int(low) <= r.state_value < int(high))
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from replay.errors import PolicyError
from replay.catalogue import CATALOGUE, get_policy
from replay.policy import AllocFailure, EntryCheck, FrameView, PadOutcome, Policy
from replay.lockstep import call_pad
from replay.standin_executor import StandinExecutor, StandinScheduler
from replay.standin_namespace import RecordingLogger
from replay.states import DUMMY_REQUEST_ID, STATE_INDEX

KINDS = ("pad", "count")
DEFAULT_BASE = "newest"


class CandidateScheduler(StandinScheduler):
    """The scheduler a candidate sees: ``is_request_in_schedulable_state`` is the model."""

    def is_request_in_schedulable_state(self, request) -> bool:
        return self.model_is_request_in_schedulable_state(request)


@dataclasses.dataclass(frozen=True)
class CandidateSpec:
    """A parsed ``py:`` spec.

    Fields:
        target: the module name or ``.py`` file.
        function: the function's name in it.
        kind: ``pad`` or ``count``; None to infer from the name / ``adp_kind``.
        base: catalogue policy for the rest of the loop; None for ``adp_base`` or the default.
    """

    target: str
    function: str
    kind: Optional[str] = None
    base: Optional[str] = None


def parse_spec(spec: str) -> CandidateSpec:
    """``py:TARGET:FUNCTION[:KIND[:BASE]]`` → :class:`CandidateSpec`."""
    body = spec[3:] if spec.startswith("py:") else spec
    parts = body.split(":")
    base = kind = None
    if len(parts) >= 4 and parts[-2] in KINDS:
        kind, base = parts[-2], parts[-1]
        parts = parts[:-2]
    elif len(parts) >= 3 and parts[-1] in KINDS:
        kind = parts[-1]
        parts = parts[:-1]
    if len(parts) < 2 or not parts[-1] or not parts[0]:
        raise PolicyError(f"policy {spec!r} is not py:MODULE:FUNCTION or py:FILE.py:FUNCTION",
                          hint="optionally followed by :pad or :count and a catalogue base policy")
    if base is not None and base not in CATALOGUE:
        raise PolicyError(f"policy {spec!r}: unknown base policy {base!r}",
                          hint="known policies: " + ", ".join(CATALOGUE))
    return CandidateSpec(target=":".join(parts[:-1]), function=parts[-1], kind=kind, base=base)


def load_function(target: str, function: str) -> Callable[..., Any]:
    """Import ``function`` from a module name or a ``.py`` file (the user's own code runs)."""
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise PolicyError(f"{path}: no such candidate file")
        name = f"adp_candidate_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise PolicyError(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            sys.modules.pop(name, None)
            raise PolicyError(f"{path}: importing the candidate failed: {type(e).__name__}: {e}"
                              ) from e
        where = str(path)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise PolicyError(f"candidate module {target!r} cannot be imported: {e}",
                              hint="use py:FILE.py:FUNCTION for a file not on sys.path") from e
        where = target
    fn = getattr(module, function, None)
    if not callable(fn):
        raise PolicyError(f"{where}: no function {function!r}")
    return fn


def infer_kind(fn: Callable[..., Any], name: str) -> str:
    """``pad`` or ``count`` from ``adp_kind`` or the name."""
    kind = getattr(fn, "adp_kind", None)
    if kind is None:
        lowered = name.lower()
        kind = "count" if "count" in lowered else "pad" if "pad" in lowered else None
    if kind not in KINDS:
        raise PolicyError(f"candidate {name!r}: cannot tell whether it replaces the pad method or "
                          "the count", hint="append :pad or :count to the spec")
    return kind


def _model_count(self: StandinExecutor) -> int:
    """``_count_schedulable_active_requests`` as the base policy counts (``Predicate.mask``)."""
    mask = self.base_policy.predicate(self.config).mask(self.config)
    return sum(1 for r in self.active_requests if mask[STATE_INDEX[r.state_value]])


def _base_pad(self: StandinExecutor) -> None:
    """The base policy's pad step around ``_count_schedulable_active_requests`` (domain doc §6)."""
    if not self.enable_attention_dp:
        return
    active, expected = len(self.active_requests), self.expected_num_active_requests
    if active > expected:
        if self.base_policy.entry_check is EntryCheck.ASSERT:
            raise AssertionError(f"expected_num_active_requests ({expected}) < "
                                 f"len(active_requests) ({active})")
        self.logger.warning(f"active_requests ({active}) exceeds expected_num_active_requests "
                            f"({expected}); tolerating the surplus")
    if expected > 0 and self._count_schedulable_active_requests() == 0:
        allocated = self.kv_cache_manager.add_dummy_requests(
            request_ids=[DUMMY_REQUEST_ID], is_gen=self._adp_dummy_is_gen, prepare_resource=True,
            max_num_draft_tokens=self.max_total_draft_tokens)
        if allocated is None and self.base_policy.alloc_failure is AllocFailure.SKIP:
            self.logger.warning("Cannot allocate an attention-DP pad dummy; skipping padding, "
                                "the fleet will retry.")
            return
        dummy = allocated[0]  # None[0]: the unchecked allocation's TypeError (pre-#16161)
        dummy.is_attention_dp_dummy = True
        self.active_requests.append(dummy)


def candidate_policy(fn: Callable[..., Any], name: str, kind: Optional[str] = None,
                     base: Optional[str] = None) -> Policy:
    """A hooked policy running ``fn`` as the pad method or the count (see module docstring)."""
    kind = kind or infer_kind(fn, getattr(fn, "__name__", name))
    base_policy = get_policy(base or getattr(fn, "adp_base", None) or DEFAULT_BASE)
    logger = RecordingLogger()
    members: dict[str, Any] = {"scheduler_class": CandidateScheduler, "base_policy": base_policy,
                               "logger": logger}
    if kind == "pad":
        members["_pad_attention_dp_dummy_request"] = fn
        members["_count_schedulable_active_requests"] = _model_count
    else:
        members["_pad_attention_dp_dummy_request"] = _base_pad
        members["_count_schedulable_active_requests"] = fn
    executor_class = type("CandidateExecutor", (StandinExecutor,), members)
    # The candidate's own module may log through a ``logger`` global; it is theirs to keep.

    def hook(frame: FrameView) -> PadOutcome:
        logger.records.clear()
        executor = executor_class(frame)
        return call_pad(executor, executor._pad_attention_dp_dummy_request, logger, name)

    method = ("_pad_attention_dp_dummy_request" if kind == "pad"
              else "_count_schedulable_active_requests")
    source = f"{name}: replaces {method}; rest of the loop from {base_policy.name}"
    return dataclasses.replace(base_policy, name=name, title=f"candidate {name}", pad_hook=hook,
                               source=source,
                               notes=f"candidate patch ({kind} replacement) on the loop of "
                                     f"{base_policy.name}. {base_policy.notes}")


def resolve_candidate(spec: str) -> Policy:
    """Resolve ``py:MODULE:FUNCTION`` / ``py:FILE.py:FUNCTION[:KIND[:BASE]]`` to a hooked policy."""
    parsed = parse_spec(spec)
    fn = load_function(parsed.target, parsed.function)
    return candidate_policy(fn, spec, parsed.kind, parsed.base)
