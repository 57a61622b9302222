"""The lockstep driver: run the extracted pad step on stand-in executors and read its outcome.

:func:`call_pad` runs one rank's pad step and classifies what happened (padded, refused, a
replayed crash, or a tool problem); :func:`run_fleet` runs every rank of one iteration in lockstep,
answering each collective with all ranks' contributions (see
:class:`replay.collectives.Exchange`). The stand-in itself lives in
:mod:`replay.standin_executor`.
"""
from __future__ import annotations

import enum
import traceback
import types
from typing import Any, Callable, Optional

from replay.collectives import Exchange, StandinDist
from replay.errors import PolicyError
from replay.policy import FrameView, PadOutcome
from replay.standin_executor import (
    ContextBucket,
    StandinExecutor,
    StandinKvCacheManager,
    StandinRequest,
    StandinResourceManager,
    StandinScheduler,
)
from replay.standin_namespace import RecordingLogger
from replay.states import RequestState

def outcome_of(executor: StandinExecutor, before: list[StandinRequest], logger: RecordingLogger,
               crash: Optional[str] = None) -> PadOutcome:
    """Read a :class:`PadOutcome` off the stand-in after the pad method ran (or raised)."""
    before_ids = {id(r) for r in before}
    added = [r for r in executor.active_requests if id(r) not in before_ids]
    dummy = next((r for r in added if r.is_attention_dp_dummy), added[0] if added else None)
    padded = dummy is not None and crash is None
    role = "generation"
    if dummy is not None and dummy.state_value < int(RequestState.GENERATION_IN_PROGRESS):
        role = "context"
    warnings = logger.warnings
    surplus = (crash is None and len(before) > executor.expected_num_active_requests
               and any("expected" in w or "exceed" in w for w in warnings))
    return PadOutcome(padded=padded, role=role,
                      alloc_failed=(not padded and crash is None
                                    and executor.kv_cache_manager.refused),
                      crash=crash, surplus_warning=surplus, warnings=warnings)


def _crash_message(e: BaseException) -> str:
    """``Type: message``, with the raising source line when the message is empty (a bare assert)."""
    text = f"{type(e).__name__}: {e}".rstrip(": ")
    if not str(e):
        frames = traceback.extract_tb(e.__traceback__)
        if frames and frames[-1].line:
            last = frames[-1]
            text += f" at {last.filename}, line {last.lineno}: {last.line.strip()}"
    return text


def call_pad(executor: StandinExecutor, method: Callable[[], Any], logger: RecordingLogger,
             label: str) -> PadOutcome:
    """Run ``method`` (the bound pad step) and classify what happened.

    An exception the executor itself would raise (AssertionError, TypeError on a None dummy, ...)
    is a replayed crash. A missing name or a stand-in attribute the code expects is a tool
    problem: :class:`PolicyError` naming it and ``label`` (the source and revision).
    """
    before = list(executor.active_requests)
    try:
        method()
    except PolicyError:
        raise
    except ImportError as e:  # an import inside a body: the stand-in has no __import__
        raise PolicyError(f"{label}: the extracted code imports at run time ({e}); the replay "
                          "runs with the stand-in's names only",
                          hint="extend replay/standin_namespace.py or pick another revision") from e
    except NameError as e:
        raise PolicyError(f"{label}: the extracted code needs {e.name!r}, which the stand-in "
                          "executor does not provide",
                          hint="extend replay/standin_namespace.py or pick another revision") from e
    except AttributeError as e:
        owner = getattr(e, "obj", None)
        if owner is not None and isinstance(owner, (StandinExecutor, StandinRequest,
                                                    StandinKvCacheManager, StandinScheduler,
                                                    StandinDist, StandinResourceManager,
                                                    ContextBucket,
                                                    types.SimpleNamespace, enum.EnumMeta)):
            where = "collectives" if isinstance(owner, StandinDist) else "standin_executor"
            raise PolicyError(f"{label}: the extracted code needs {type(owner).__name__}."
                              f"{e.name}, which the stand-in executor does not provide",
                              hint=f"extend replay/{where}.py or pick another revision") from e
        return outcome_of(executor, before, logger, crash=f"AttributeError: {e}")
    except Exception as e:  # the executor's own failure: replayed as a crash
        return outcome_of(executor, before, logger, crash=_crash_message(e))
    return outcome_of(executor, before, logger)


#: Upper bound on the collectives one iteration's pad step may enter (a pass answers one each).
MAX_COLLECTIVES = 16


def run_fleet(make: Callable[..., StandinExecutor], views: list[FrameView], pad_name: str,
              logger: RecordingLogger, label: str,
              role_context: Optional[bool] = None) -> list[PadOutcome]:
    """Run the pad step of every rank of one iteration in lockstep (see :class:`Exchange`).

    ``views`` are the iteration's frames in rank order; ``make(view, exchange=, role_context=)``
    builds a fresh stand-in for a pass. The outcomes of the last pass are returned: there every
    collective a rank entered was answered with all ranks' contributions.
    """
    answers: list[list[Any]] = []
    for _ in range(MAX_COLLECTIVES + 1):
        exchange = Exchange(len(views), answers)
        outcomes = []
        for view in views:
            logger.records.clear()
            executor = make(view, exchange=exchange, role_context=role_context)
            outcomes.append(call_pad(executor, getattr(executor, pad_name), logger, label))
        k = len(answers)
        if all(len(calls) <= k for calls in exchange.calls):
            return outcomes
        answers.append([calls[k] if len(calls) > k else None for calls in exchange.calls])
    raise PolicyError(f"{label}: the pad step entered more than {MAX_COLLECTIVES} collectives in "
                      "one iteration; the lockstep replay gives up")
