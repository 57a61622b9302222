"""What the ``.pth`` line runs when ``ADP_FORENSICS_TRACE_DIR`` is set: a post-import hook.

:func:`install` puts a finder first on ``sys.meta_path`` that, when
``tensorrt_llm._torch.pyexecutor.py_executor`` is imported, lets the normal finders locate it and
wraps the loader so that, once the module has executed, ``PyExecutor``'s methods are wrapped
(:data:`forensics.record.capture.WRAPPERS`, each only if it exists). ``tensorrt_llm`` is never
imported here. If the module is already loaded it is patched at once.

This module imports only the standard library and ``forensics.record``.
"""
from __future__ import annotations

import importlib.abc
import logging
import os
import sys
import threading
from typing import Any

from forensics.record import capture, writer

logger = logging.getLogger(__name__)

#: The module whose ``PyExecutor`` is wrapped.
TARGET_MODULE = "tensorrt_llm._torch.pyexecutor.py_executor"
#: The class wrapped in it.
TARGET_CLASS = "PyExecutor"
#: Set to ``0`` to leave SIGTERM alone (then only atexit and periodic flushes save frames).
SIGTERM_ENV = "ADP_FORENSICS_SIGTERM"

_state: dict[str, Any] = {"installed": False, "patched": [], "missing": []}
_lock = threading.Lock()


class _PatchingLoader:
    """Delegates to the real loader, then patches the executed module."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch_module(module)

    def __getattr__(self, name):  # get_source, get_code, is_package, ... for tools and tracebacks
        return getattr(self._loader, name)


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader the other finders return for one module."""

    def __init__(self, fullname: str):
        self.fullname = fullname
        self._busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if fullname != self.fullname or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.on = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            logger.warning("adp-forensics: cannot hook the import of %s (loader %r); "
                           "nothing will be recorded", fullname, spec.loader)
            return spec
        spec.loader = _PatchingLoader(spec.loader)
        return spec


def patch_class(cls: type) -> tuple[list[str], list[str]]:
    """Wrap the recorder's methods on ``cls``; returns (wrapped, missing). Idempotent."""
    wrapped, missing = [], []
    for name, factory in capture.WRAPPERS.items():
        fn = getattr(cls, name, None)  # may live on a base class in some builds
        if fn is None or not callable(fn):
            missing.append(name)
            continue
        if getattr(fn, capture.ORIGINAL_ATTR, None) is None:
            setattr(cls, name, factory(fn))
        wrapped.append(name)
    return wrapped, missing


def unpatch_class(cls: type) -> None:
    """Restore the original methods (tests)."""
    for name in capture.WRAPPERS:
        fn = cls.__dict__.get(name)  # only what patch_class set on cls itself
        original = getattr(fn, capture.ORIGINAL_ATTR, None)
        if original is not None:
            setattr(cls, name, original)


def patch_module(module) -> bool:
    """Patch ``module.PyExecutor``; logs once what could not be wrapped. Never raises."""
    try:
        cls = getattr(module, TARGET_CLASS, None)
        if not isinstance(cls, type):
            logger.warning("adp-forensics: %s has no %s class; nothing will be recorded",
                           module.__name__, TARGET_CLASS)
            return False
        wrapped, missing = patch_class(cls)
        _state["patched"], _state["missing"] = wrapped, missing
        notes = []
        if missing:
            consequence = {
                "_pad_attention_dp_dummy_request": "no frames are recorded",
                "_can_queue": "scheduled comes from _schedule and can_queue is not recorded",
                "_schedule": "scheduled comes from _can_queue only",
            }
            for name in missing:
                if name in capture.OPTIONAL_WRAPPERS:
                    continue  # a build before PR #17379: no post-schedule pad, nothing to record
                text = f"not wrapped: {TARGET_CLASS}.{name} does not exist in this build; " \
                       f"{consequence.get(name, 'its data is not recorded')}"
                notes.append(text)
                logger.warning("adp-forensics: %s", text)
        capture.configure(_state["trace_dir"], notes)
        # Only processes that load the executor get a SIGTERM handler (the import normally runs
        # in the main thread; install_sigterm_flush declines elsewhere).
        if os.environ.get(SIGTERM_ENV, "1") != "0":
            writer.install_sigterm_flush()
        return "_pad_attention_dp_dummy_request" in wrapped
    except Exception as exc:
        logger.warning("adp-forensics: could not patch %s (%s: %s); nothing will be recorded",
                       getattr(module, "__name__", module), type(exc).__name__, exc)
        return False


def install(trace_dir: str | None = None) -> bool:
    """Arm the hook when a trace directory is given or set in the environment. Never raises.

    Returns:
        True when the hook is armed (or the module was already patched).
    """
    try:
        trace_dir = trace_dir or os.environ.get(capture.TRACE_DIR_ENV)
        if not trace_dir:
            return False
        with _lock:
            if _state["installed"]:
                return True
            _state["trace_dir"] = os.path.abspath(trace_dir)
            capture.configure(_state["trace_dir"])
            module = sys.modules.get(TARGET_MODULE)
            if module is not None:
                patch_module(module)
            else:
                sys.meta_path.insert(0, PostImportFinder(TARGET_MODULE))
            _state["installed"] = True
        return True
    except Exception as exc:
        logger.warning("adp-forensics: recorder not installed (%s: %s)", type(exc).__name__, exc)
        return False


def status() -> dict:
    """What the hook did in this process: armed, methods wrapped, methods missing."""
    return {"installed": _state["installed"], "trace_dir": _state.get("trace_dir"),
            "wrapped": list(_state["patched"]), "missing": list(_state["missing"])}
