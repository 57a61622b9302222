"""Making an entry-point module callable, so ``forensics.ingest(...)`` and
``forensics.investigate(...)`` keep working after their module has been imported.

Importing ``forensics.ingest`` binds the package attribute ``forensics.ingest`` to the *module*
(Python sets a package's submodules as attributes), which shadows the package's lazy
``__getattr__`` that returns the function of the same name. A module whose class defines
``__call__`` keeps both spellings working.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Callable


def make_module_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Calling the module ``module_name`` calls ``function`` with the same arguments."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    CallableModule.__doc__ = f"Calling this module calls {function.__qualname__}."
    sys.modules[module_name].__class__ = CallableModule
