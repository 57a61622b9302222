"""The names extracted TensorRT-LLM code sees in place of its module's globals
(:func:`base_namespace`): upstream's enums and errors as stand-ins, a ``logger`` that records
every message (:class:`RecordingLogger`), an ``os`` with an empty environment
(:class:`StandinOs`), restricted builtins.
"""
from __future__ import annotations

import enum
import math
from typing import Any, Optional

from replay.collectives import ADPForwardIntent, ReduceOp
from replay.source_guard import SAFE_BUILTINS
from replay.states import DUMMY_REQUEST_ID, RequestState

#: Upstream names for the request-state enum (the C++ ``LlmRequestState`` ints).
LlmRequestState = RequestState


class ResourceManagerType(enum.Enum):
    """Keys of ``resource_manager.get_resource_manager``; every one maps to None here."""

    KV_CACHE_MANAGER = "kv"
    DRAFT_KV_CACHE_MANAGER = "draft_kv"
    SEQ_SLOT_MANAGER = "seq_slot"
    SPEC_RESOURCE_MANAGER = "spec"
    PEFT_CACHE_MANAGER = "peft"


class NoFreeSlotsError(RuntimeError):
    """Stand-in for the resource managers' out-of-slots error (never raised here)."""


class OutOfPagesError(RuntimeError):
    """Stand-in for KV-cache manager v2's out-of-pages error (never raised here)."""


class RecordingLogger:
    """The ``logger`` the extracted code sees: records every message by severity."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def _log(self, level: str, msg: object, *args: object) -> None:
        text = str(msg)
        if args:
            try:
                text = text % args
            except (TypeError, ValueError):
                text = " ".join([text, *map(str, args)])
        self.records.append((level, text))

    def warning(self, msg: object, *args: object, **_: object) -> None:
        self._log("warning", msg, *args)

    warn = warning

    def info(self, msg: object, *args: object, **_: object) -> None:
        self._log("info", msg, *args)

    def debug(self, msg: object, *args: object, **_: object) -> None:
        self._log("debug", msg, *args)

    def error(self, msg: object, *args: object, **_: object) -> None:
        self._log("error", msg, *args)

    def verbose(self, msg: object, *args: object, **_: object) -> None:
        self._log("verbose", msg, *args)

    def warning_once(self, msg: object, *args: object, **_: object) -> None:
        self._log("warning", msg, *args)

    def info_once(self, msg: object, *args: object, **_: object) -> None:
        self._log("info", msg, *args)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(text for level, text in self.records if level == "warning")


class StandinOs:
    """``os`` as the extracted code sees it: an empty environment, nothing else.

    Upstream reads switches with ``os.environ.get("TLLM_...")`` / ``os.getenv``; a replay must
    not depend on this machine's environment, so every switch reads as unset (upstream's
    default), and nothing of the real ``os`` (files, processes) is reachable.
    """

    environ: dict[str, str] = {}

    @staticmethod
    def getenv(_key: str, default: Any = None) -> Any:
        return default


def base_namespace(logger: RecordingLogger) -> dict[str, Any]:
    """Names the extracted functions may use, standing in for their module's imports.

    Built from the stand-in alone: restricted builtins (``replay.source_guard.SAFE_BUILTINS``),
    no real ``os``, and none of the source's module globals. This keeps honest code from touching
    the machine by accident; it is not a sandbox (a body reaches every class of the interpreter
    through ``().__class__.__base__.__subclasses__()``): ``replay.isolation`` confines it.
    """
    return {
        "__name__": "replay.standin",
        "__builtins__": dict(SAFE_BUILTINS),
        "os": StandinOs(),
        "math": math,
        "logger": logger,
        "LlmRequestState": LlmRequestState,
        "ATTENTION_DP_DUMMY_REQUEST_ID": DUMMY_REQUEST_ID,
        "_ADPForwardIntent": ADPForwardIntent,
        "ReduceOp": ReduceOp,
        "ResourceManagerType": ResourceManagerType,
        "NoFreeSlotsError": NoFreeSlotsError,
        "OutOfPagesError": OutOfPagesError,
        "Optional": Optional,
        "nvtx_range": lambda *_a, **_k: (lambda f: f),
    }
