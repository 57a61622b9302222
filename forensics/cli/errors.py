"""The error contract of every command, in one place.

- a typed library error (:class:`~forensics.errors.ForensicsError`: bad input, bad dataset,
  unresolvable policy) is a message naming file and line, exit code 2;
- a fault of the environment (permission, full or read-only disk, missing program, interrupt:
  :class:`~forensics.errors.EnvironmentFault`, or a raw ``OSError`` that escaped the library) is a message with the path and a hint, exit code 2, never a traceback;
- anything else is a bug of the tool: exit code 4 with the traceback;
- a reader that closes the pipe early (``forensics replay DS | head``) is not a failure: the
  command ends quietly, as ``git log | head`` does, with the status of its work (the verdict a
  command records with :func:`set_exit_status` before it prints, else 0).

Exit code 1 keeps its one meaning (``postmortem``: a leak or crash explained); it is never the
code of a failure. ``--debug`` (or ``FORENSICS_DEBUG=1``) prints the traceback of every failure.

Every failure's message goes to stderr, its control characters escaped
(:func:`~forensics.cli.options.terminal_text`). With ``--json`` it is also one JSON object on
stdout, ``{"error", "path", "hint", "exit_status"}`` (``path``/``hint`` null when there is none),
so a script reading stdout always gets JSON.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import traceback

import click

from forensics.cli.options import terminal_text
from forensics.errors import EnvironmentFault, ForensicsError

#: Exit code of a bug in the tool (an exception nobody typed).
INTERNAL_ERROR = 4
#: Where the group's context keeps the status a command's work ends with.
_STATUS_KEY = "forensics.exit_status"


class BadInput(click.ClickException):
    """Exit code 2: the input could not be used.

    Fields: ``message`` (the whole text, ``hint:`` line included), ``path`` and ``hint`` (or
    None) for the ``--json`` error object; ``json_printed``: the command already printed its
    one JSON object (``ingest`` with refused inputs), so no error object follows it.
    """

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None,
                 json_printed: bool = False):
        super().__init__(message)
        self.path = path
        self.hint = hint
        self.json_printed = json_printed

    @classmethod
    def from_error(cls, e: ForensicsError) -> "BadInput":
        """The click error of a typed library error (its path and hint kept)."""
        return cls(str(e), path=e.path, hint=e.hint)

    def format_message(self) -> str:
        return terminal_text(self.message)


@contextlib.contextmanager
def library_errors():
    """Re-raise ``ForensicsError`` as a click error naming file and line, exit code 2."""
    try:
        yield
    except ForensicsError as e:
        if debug_enabled():
            traceback.print_exc()
        raise BadInput.from_error(e) from None


def wants_json(ctx: click.Context | None) -> bool:
    """``--json`` was given to the command being run (read from its arguments, so that an
    error while they are parsed is JSON too)."""
    while ctx is not None:
        if ctx.params.get("as_json") or "--json" in ctx.meta.get("forensics.args", ()):
            return True
        ctx = ctx.parent
    return False


def error_object(e: click.ClickException, exit_status: int) -> dict:
    """The ``--json`` object of a failure: ``error``, ``path``, ``hint``, ``exit_status``."""
    message = e.message if isinstance(e, BadInput) else e.format_message()
    hint = getattr(e, "hint", None)
    if hint and message.endswith(f"\nhint: {hint}"):
        message = message[: -len(f"\nhint: {hint}")]
    path = getattr(e, "path", None)
    if path and message.startswith(f"{path}: "):
        message = message[len(path) + 2:]
    return {"error": message, "path": path, "hint": hint, "exit_status": exit_status}


def _echo_error_json(obj: dict) -> None:
    with contextlib.suppress(OSError, ValueError):
        click.echo(json.dumps(obj))


def debug_enabled() -> bool:
    """``--debug`` was given or ``FORENSICS_DEBUG`` is set to something other than 0/empty."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get("forensics.debug"):
        return True
    return os.environ.get("FORENSICS_DEBUG", "") not in ("", "0")


def set_exit_status(code: int) -> None:
    """Record the status the running command ends with (its verdict), before it prints: if the
    reader closes the pipe while it prints, the command still ends with this status."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().meta[_STATUS_KEY] = int(code)


def _work_status(ctx: click.Context | None, default: int = 0) -> int:
    if ctx is None:
        return default
    return int(ctx.find_root().meta.get(_STATUS_KEY, default))


def _is_closed_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


def output_of(ctx: click.Context | None) -> str | None:
    """The ``-o`` value of the command being run, for faults that name no path."""
    while ctx is not None:
        for key in ("output", "out_dir", "out"):
            value = ctx.params.get(key)
            if isinstance(value, (str, os.PathLike)):
                return str(value)
        ctx = ctx.parent
    return None


def as_fault(exc: BaseException, ctx: click.Context | None = None) -> EnvironmentFault | None:
    """The environment fault an exception stands for, or None when it is not one."""
    if isinstance(exc, EnvironmentFault):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return EnvironmentFault("interrupted", hint="the command was stopped (Ctrl-C or SIGINT); "
                                "outputs are written atomically, so nothing half-written remains")
    if isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
        return EnvironmentFault("output closed early (broken pipe)", errno=errno.EPIPE,
                                hint="the program reading the output stopped first")
    if isinstance(exc, OSError):
        return EnvironmentFault.from_os_error(exc, path=output_of(ctx))
    return None


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _closed_pipe_exit(ctx: click.Context | None, default: int = 0) -> click.exceptions.Exit:
    """The reader went away: nothing more goes to stdout, no message; the work's status."""
    _quiet_stdout()
    return click.exceptions.Exit(_work_status(ctx, default))


def _flush_stdout(ctx: click.Context, status: int) -> None:
    """Flush what the command printed while the contract still holds: a pipe closed early shows
    here when the output fits in the buffer (else the interpreter's exit prints a traceback)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) and _is_closed_pipe(e):
            raise _closed_pipe_exit(ctx, status) from None
        if isinstance(e, OSError):
            raise


def invoke_with_contract(invoke, ctx: click.Context):
    """Run ``invoke(ctx)`` (a click group's invoke) under the error contract; with ``--json``
    a failure is also one JSON object on stdout (:func:`error_object`)."""
    ctx.meta["forensics.args"] = tuple(ctx.args)  # the command's arguments, before click takes them
    try:
        return _invoke_flushed(invoke, ctx)
    except click.ClickException as e:
        if not isinstance(e, BadInput):
            e.message = terminal_text(e.message)  # a usage error quotes the user's value
        if wants_json(ctx) and not getattr(e, "json_printed", False):
            _echo_error_json(error_object(e, e.exit_code))
        raise
    except click.exceptions.Exit as e:
        if e.exit_code == INTERNAL_ERROR and wants_json(ctx):
            _echo_error_json({"error": "internal error (a bug of the tool)", "path": None,
                              "hint": "rerun with --debug and report the traceback",
                              "exit_status": INTERNAL_ERROR})
        raise


def _invoke_flushed(invoke, ctx: click.Context):
    """``_invoke``, then stdout flushed while a closed pipe can still end the command quietly."""
    try:
        result = _invoke(invoke, ctx)
    except SystemExit as e:          # a command's verdict status (``raise SystemExit(1)``)
        _flush_stdout(ctx, e.code if isinstance(e.code, int) else 1)
        raise
    except click.exceptions.Exit as e:
        _flush_stdout(ctx, e.exit_code)
        raise
    _flush_stdout(ctx, 0)
    return result


def _invoke(invoke, ctx: click.Context):
    try:
        return invoke(ctx)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise
    except ForensicsError as e:
        if isinstance(e, EnvironmentFault) and e.errno == errno.EPIPE:
            raise _closed_pipe_exit(ctx) from None
        if debug_enabled():
            traceback.print_exc()
        raise BadInput.from_error(e) from None
    except (KeyboardInterrupt, OSError, EOFError) as e:
        if _is_closed_pipe(e):
            raise _closed_pipe_exit(ctx) from None
        fault = as_fault(e, ctx) if not isinstance(e, EOFError) else None
        if fault is None:  # EOFError: a truncated stream that escaped the readers (click says "Aborted!")
            fault = EnvironmentFault(f"unexpected end of input: {e or 'truncated stream'}",
                                     path=output_of(ctx), hint="an input is truncated")
        if debug_enabled():
            traceback.print_exc()
        raise BadInput.from_error(fault) from None
    except Exception:
        traceback.print_exc()
        click.echo("forensics: internal error (a bug of the tool; the traceback above says where)",
                   err=True)
        raise click.exceptions.Exit(INTERNAL_ERROR) from None
