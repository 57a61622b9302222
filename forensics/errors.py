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
    """A request-state trace breaks its format (v1 or v2, traces/FORMAT.md)."""


class StatsFormatError(InputError):
    """An iteration-stats JSON file is not a JSON array or JSON Lines of objects."""


class EnvironmentFault(ForensicsError):
    """The machine, not the input, stopped the command: a permission, a full or read-only disk,
    a missing program, an interrupt, a closed pipe. Exit code 2 (never 1, which ``postmortem``
    uses for "leak or crash explained"), with the path and a hint.

    Attributes:
        errno: the OS error number, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None,
                 errno: int | None = None):
        self.errno = errno
        super().__init__(message, path=path, hint=hint)

    @classmethod
    def from_os_error(cls, e: OSError, path: str | None = None, *,
                      name_path: bool = False) -> "EnvironmentFault":
        """A typed fault from an ``OSError`` (``path`` when the error names none).

        ``name_path``: name ``path`` even when the error names a file: the error is about a lock
        or temporary file the tool keeps beside the user's path (``.x.lock``, ``.x.tmp-123``),
        a name the user never gave.
        """
        import errno as _errno
        import re

        code = e.errno
        if code is None:  # pyarrow's OSError carries the number only in its message
            m = re.search(r"errno (\d+)", str(e), re.IGNORECASE)
            code = int(m.group(1)) if m else None
        where = path if (name_path and path is not None) or e.filename is None else e.filename
        if isinstance(where, bytes):
            where = where.decode("utf-8", "surrogateescape")
        reason = e.strerror or (_errno.errorcode.get(code, "") if code else "") or str(e)
        hint = _HINTS.get(code) if code is not None else None
        return cls(reason, path=where, errno=code,
                   hint=hint or "check the path and its permissions; rerun with --debug "
                                "(or FORENSICS_DEBUG=1) for the traceback")


def _hints() -> dict[int, str]:
    import errno as e
    return {
        e.EACCES: "no permission: choose a directory you can write (-o) or fix its permissions",
        e.EPERM: "operation not permitted: choose another -o directory",
        e.ENOSPC: "the disk is full: free space or write to another file system (-o)",
        e.EDQUOT: "the disk quota is exceeded: free space or write elsewhere (-o)",
        e.EROFS: "the file system is read-only: write the output to a writable place (-o)",
        e.ENOTDIR: "a part of the path is a file, not a directory: choose another -o",
        e.EISDIR: "the path is a directory where a file was expected",
        e.ENOENT: "the path does not exist (or was removed while the command ran)",
        e.EEXIST: "the path already exists",
        e.ENAMETOOLONG: "the path is too long for the file system",
        e.EMFILE: "too many open files: raise `ulimit -n`",
        e.EIO: "an I/O error of the device: check the disk",
        e.EPIPE: "the reader of the output went away (broken pipe)",
    }


_HINTS = _hints()
