"""Typed errors raised by the library; the CLI turns them into messages and exit codes.

Every error about input carries the file and, where known, the 1-based line, so a user can open
the exact place that was refused.
"""
from __future__ import annotations

# Re-exported: the replay library raises these, the forensics pipeline too.
from replay.errors import (ConfigError, DatasetError, NoReaderError, NoTraceError,  # noqa: F401
                           PolicyError, ReplayError)


#: The base class of every error the library raises on purpose; it lives with the replay
#: library (which imports nothing from ``forensics``) so that ``except ForensicsError`` also
#: catches the replay's own errors.
ForensicsError = ReplayError


class InputError(ForensicsError):
    """An input file is missing, unreadable or of a kind the tool does not read."""


class BinaryInputError(InputError):
    """An input file is binary (not text); it is refused, the other inputs are still ingested."""


class TraceFormatError(InputError):
    """A request-state trace breaks the v1 format (traces/FORMAT.md)."""


class StatsFormatError(InputError):
    """An iteration-stats JSON file is not a JSON array or JSON Lines of objects."""
