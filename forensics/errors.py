"""Typed errors raised by the library; the CLI turns them into messages and exit codes.

Every error about input carries the file and, where known, the 1-based line, so a user can open
the exact place that was refused.
"""
from __future__ import annotations


class ForensicsError(Exception):
    """Base class of every error the library raises on purpose."""

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


class InputError(ForensicsError):
    """An input file is missing, unreadable or of a kind the tool does not read."""


class BinaryInputError(InputError):
    """An input file is binary (not text); it is refused, the other inputs are still ingested."""


class TraceFormatError(InputError):
    """A request-state trace breaks the v1 format (traces/FORMAT.md)."""


class StatsFormatError(InputError):
    """An iteration-stats JSON file is not a JSON array or JSON Lines of objects."""


class DatasetError(ForensicsError):
    """A dataset directory is missing, incomplete or of an unsupported schema version."""


class NoTraceError(DatasetError):
    """The input holds no request-state trace run, so there is nothing to replay."""

    def __init__(self, *, path: str | None = None):
        super().__init__("no request-state trace run in the input (nothing to replay)", path=path,
                         hint=("record one with ADP_FORENSICS_TRACE_DIR (docs/recording.md, format "
                               "traces/FORMAT.md); for logs alone, `forensics postmortem` says what "
                               "the logs show"))


class PolicyError(ForensicsError):
    """A policy name or policy source cannot be resolved or executed."""


class ConfigError(ForensicsError):
    """A run configuration or simulation parameter is invalid."""
