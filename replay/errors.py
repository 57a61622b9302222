"""Errors the replay library raises on purpose.

``replay`` is a library of its own: it imports nothing from ``forensics``. The forensics pipeline
re-exports these classes (``forensics.errors``): :class:`ReplayError` *is*
``forensics.errors.ForensicsError``, so ``except ForensicsError`` still catches every error raised
here, and ``from forensics.errors import PolicyError`` names the same class as this module's.

Every error about input carries the file and, where known, the 1-based line, so a user can open
the exact place that was refused.
"""
from __future__ import annotations


class ReplayError(Exception):
    """Base class of every error the library raises on purpose (``forensics.errors.ForensicsError``).

    Fields: ``message``, ``path`` (file, or None), ``line`` (1-based, or None), ``hint`` (what to
    do, or None); ``exit_code`` is the CLI's exit code for it (2: bad input).
    """

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 hint: str | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class DatasetError(ReplayError):
    """A dataset directory is missing, incomplete or of an unsupported schema version."""


class NoTraceError(DatasetError):
    """The input holds no request-state trace run, so there is nothing to replay."""

    def __init__(self, *, path: str | None = None):
        super().__init__("no request-state trace run in the input (nothing to replay)", path=path,
                         hint=("record one with ADP_FORENSICS_TRACE_DIR (docs/recording.md, format "
                               "traces/FORMAT.md); for logs alone, `forensics postmortem` says what "
                               "the logs show"))


class PolicyError(ReplayError):
    """A policy name or policy source cannot be resolved or executed."""


class ConfigError(ReplayError):
    """A run configuration or simulation parameter is invalid."""


class NoReaderError(ReplayError):
    """Reading trace files or datasets was asked for but no reader is installed (``replay.feed``)."""


__all__ = ["ConfigError", "DatasetError", "NoReaderError", "NoTraceError", "PolicyError",
           "ReplayError"]
